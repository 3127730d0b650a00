package storage

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// residentPages counts the pages of a mapping that are in memory.
func residentPages(t *testing.T, buf []byte) int {
	t.Helper()
	vec := make([]byte, (len(buf)+os.Getpagesize()-1)/os.Getpagesize())
	_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)), uintptr(unsafe.Pointer(&vec[0])))
	if errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}

var sink byte

// TestIndexFaultReadsNoAhead: touching one entry of a sparse preallocated
// index brings in a page or a fault-around's worth, not the device's
// read-ahead. With 8 MiB of read-ahead every first touch of a new
// partition's two indexes zero-filled 16 MiB of page cache, which made
// creating 1,000 partitions take 22 s.
func TestIndexFaultReadsNoAhead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "00000000000000000000.index")
	buf, _, err := mapFile(path, 10<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	defer unmap(buf)
	sink += buf[0]         // a read, as an index lookup makes
	const faultAround = 16 // the kernel's default fault_around_bytes, 64 KiB
	if n := residentPages(t, buf); n > faultAround {
		t.Fatalf("one touch made %d pages resident", n)
	}
}

// TestNewPartitionTouchesNoIndexPage: a new log creates and maps no index
// file at all (creating thousands of partitions paid for two files and two
// mappings each); its first append creates them, and only that append's
// entry pages become resident.
func TestNewPartitionTouchesNoIndexPage(t *testing.T) {
	dir := t.TempDir()
	l := mustOpen(t, dir, testConfig())
	defer l.Close()
	s := l.mu.active
	for _, suf := range []string{indexSuffix, timeIndexSuffix} {
		if _, err := os.Stat(s.path(suf)); !os.IsNotExist(err) {
			t.Fatalf("a new log's %s file: %v, want none", suf, err)
		}
	}
	if s.ix.mapped || s.ix.off.buf != nil {
		t.Fatal("a new log's indexes are mapped")
	}
	appendOne(t, l, buildBatch(spec(1, 10)))
	s.ix.RLock()
	defer s.ix.RUnlock()
	if !s.ix.mapped {
		t.Fatal("the first append left the indexes unmapped")
	}
	const faultAround = 16 // pages: the kernel's default fault_around_bytes
	if n := residentPages(t, s.ix.off.buf) + residentPages(t, s.ix.tim.buf); n > 2*faultAround {
		t.Fatalf("after one append the indexes have %d resident pages", n)
	}
}
