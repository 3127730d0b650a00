package storage

import (
	"encoding/binary"
	"math/rand/v2"
	"sort"
	"testing"
)

func TestSearchLEMatchesBinarySearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := 0; trial < 2000; trial++ {
		n := rng.IntN(300)
		keys := make([]uint32, n)
		k := uint32(rng.IntN(50))
		for i := range keys {
			switch trial % 3 {
			case 0:
				k += 1 + uint32(rng.IntN(10)) // near uniform
			case 1:
				k += 1 + uint32(rng.ExpFloat64()*100) // skewed
			default:
				if rng.IntN(20) == 0 {
					k += 100000
				}
				k++
			}
			keys[i] = k
		}
		for q := 0; q < 50; q++ {
			target := uint32(rng.IntN(int(k) + 100))
			want := int64(sort.Search(n, func(i int) bool { return keys[i] > target })) - 1
			got := searchLE(int64(n), target, uint32(rng.IntN(int(k)+2)), func(i int64) uint32 { return keys[i] })
			if got != want {
				t.Fatalf("n=%d target=%d: got %d want %d (keys %v)", n, target, got, want, keys)
			}
		}
	}
}

func TestOffsetIndexLookup(t *testing.T) {
	x := &offsetIndex{buf: make([]byte, 8*10)}
	for i := uint32(1); i <= 5; i++ {
		x.add(i*10-1, i*100) // batch ending at offset 10i-1 starts at 100i
	}
	if x.n.Load() != 0 || x.lookup(100, 50) != 0 {
		t.Fatal("unpublished entries visible")
	}
	x.publish()
	for _, tt := range []struct{ rel, pos uint32 }{{0, 0}, {8, 0}, {9, 100}, {10, 100}, {19, 200}, {48, 400}, {49, 500}, {1000, 500}} {
		if got := x.lookup(tt.rel, 50); got != tt.pos {
			t.Errorf("lookup(%d) = %d, want %d", tt.rel, got, tt.pos)
		}
	}
	if x.lookupPos(250, 600) != 200 || x.lookupPos(99, 600) != 0 {
		t.Fatal("lookupPos")
	}
	if got := x.validPrefix(450); got != 4 {
		t.Fatalf("validPrefix = %d", got)
	}
	binary.BigEndian.PutUint32(x.buf[2*8+4:], 50) // position going backwards
	if got := x.validPrefix(1000); got != 2 {
		t.Fatalf("validPrefix after damage = %d", got)
	}
}

func TestTimeIndex(t *testing.T) {
	x := &timeIndex{buf: make([]byte, 12*4)}
	if !x.maybeAdd(100, 5) || x.maybeAdd(100, 6) || x.maybeAdd(90, 7) || !x.maybeAdd(200, 9) {
		t.Fatal("maybeAdd must keep timestamps strictly increasing")
	}
	if !x.full(2) || x.full(1) {
		t.Fatal("one slot is reserved for the final entry")
	}
	x.publish()
	if rel, ok := x.lookup(150); !ok || rel != 5 {
		t.Fatal("lookup 150")
	}
	if _, ok := x.lookup(99); ok {
		t.Fatal("lookup before first")
	}
	if ts, rel, ok := x.last(); !ok || ts != 200 || rel != 9 {
		t.Fatal("last")
	}
}

func TestSegListFind(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := 0; trial < 500; trial++ {
		n := rng.IntN(50)
		segs := make([]*segment, n)
		base := int64(rng.IntN(100))
		for i := range segs {
			segs[i] = &segment{base: base}
			base += 1 + int64(rng.ExpFloat64()*float64(1+trial%100))
		}
		l := newSegList(segs)
		for q := 0; q < 50; q++ {
			off := int64(rng.IntN(int(base) + 10))
			want := sort.Search(n, func(i int) bool { return segs[i].base > off }) - 1
			if got := l.find(off); got != want {
				t.Fatalf("find(%d) = %d, want %d", off, got, want)
			}
		}
	}
}
