package bench

import (
	"os"
	"path/filepath"
	"testing"
)

// TestBallastWritesARingAndStaysItsSize: a top-up that never reaches its
// free-memory goal writes the ring once and stops, and the next one
// rewrites the same file instead of growing it.
func TestBallastWritesARingAndStaysItsSize(t *testing.T) {
	dir := t.TempDir()
	b, err := NewBallast(dir, 3*ballastChunk+1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if b.Size() != 3*ballastChunk {
		t.Fatalf("size %d, want %d (whole chunks)", b.Size(), 3*ballastChunk)
	}
	for i := range 2 {
		n, _, err := b.Fill(0)
		if err != nil {
			t.Fatal(err)
		}
		if n < b.Size() || n > b.Size()+ballastBurst {
			t.Fatalf("top-up %d wrote %d bytes, want one ring (%d) rounded up to a burst", i, n, b.Size())
		}
		st, err := os.Stat(filepath.Join(dir, "page-cache-ballast"))
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() != b.Size() {
			t.Fatalf("ballast file is %d bytes, want %d", st.Size(), b.Size())
		}
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "page-cache-ballast")); !os.IsNotExist(err) {
		t.Fatalf("ballast file left behind: %v", err)
	}
}

// TestBallastStopsAtItsGoal: with free memory already below the goal a
// top-up writes nothing.
func TestBallastStopsAtItsGoal(t *testing.T) {
	b, err := NewBallast(t.TempDir(), 2*ballastChunk, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	total, err := MemInfo("MemTotal")
	if err != nil {
		t.Fatal(err)
	}
	if n, _, err := b.Fill(total); err != nil || n != 0 {
		t.Fatalf("Fill(MemTotal) wrote %d bytes, err %v; want nothing", n, err)
	}
}
