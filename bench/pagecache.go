package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// A Ballast keeps a machine's page cache full of one file's clean pages, the
// state of any host that has run a broker for a while, so that a benchmark's
// writes get their pages by reclaiming the ballast's instead of from free
// memory.
//
// Why a benchmark needs it: on a virtual machine whose balloon reports free
// pages to the host (virtio free page reporting), a page the guest has not
// touched since it was freed costs a fault on the host when it is first
// written. Writes into fresh page-cache pages then run at a fraction of
// their usual speed (on the project's 2-core VM, ~400 MB/s with a core
// busy in the kernel, against 1.4–2.3 GB/s when the same writes reclaim
// clean cache), and a produce benchmark measures that instead of the broker.
// Both brokers of a side-by-side run are filled the same way.
//
// The ballast is written as a ring: the kernel evicts its least recently
// written pages first, which are the ones the ring writes next, so topping
// it up rewrites what the last run took.
type Ballast struct {
	f    *os.File
	path string
	size int64  // the file's size; writes wrap at it
	next int64  // ring cursor: where the next top-up writes
	buf  []byte // one write's worth of non-zero bytes
}

// ballastChunk is one write(2) of a top-up.
const ballastChunk = 4 << 20

// NewBallast creates the ballast file in dir, sized to the machine's memory
// (at most maxBytes if that is positive) but leaving keepDisk bytes of the
// file system free. It writes nothing yet.
func NewBallast(dir string, maxBytes, keepDisk int64) (*Ballast, error) {
	mem, err := MemInfo("MemTotal")
	if err != nil {
		return nil, err
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return nil, err
	}
	size := min(mem, int64(st.Bavail)*st.Bsize-keepDisk)
	if maxBytes > 0 {
		size = min(size, maxBytes)
	}
	size -= size % ballastChunk
	if size < ballastChunk {
		return nil, fmt.Errorf("no room for a page-cache ballast in %s (%d MiB free beyond the %d MiB kept)", dir, size>>20, keepDisk>>20)
	}
	path := filepath.Join(dir, "page-cache-ballast")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	buf := bytes.Repeat([]byte("sluice page-cache ballast\n"), ballastChunk/26+1)[:ballastChunk]
	return &Ballast{f: f, path: path, size: size, buf: buf}, nil
}

// Size is the ballast file's size in bytes.
func (b *Ballast) Size() int64 { return b.size }

// Fill writes the ballast until the page cache is full — free memory has
// stopped falling over the last fullWindow written (the kernel now reclaims
// as fast as the ballast writes; zones it keeps in reserve stay free, so
// MemFree alone never says so) or is at most keepFree — or one whole ring
// has been written. Then it writes the dirty pages back so that they are
// clean, reclaimable without waiting on the disk, and not written back
// during the next measurement. It returns the bytes written and how long
// that took (write-back included).
func (b *Ballast) Fill(keepFree int64) (written int64, took time.Duration, err error) {
	start := time.Now()
	var window []int64 // MemFree before each of the last bursts, oldest first
	for written < b.size {
		free, err := MemInfo("MemFree")
		if err != nil {
			return written, time.Since(start), err
		}
		if free <= keepFree || cacheFull(window, free) {
			break
		}
		if window = append(window, free); len(window) > fullWindow/ballastBurst {
			window = window[1:]
		}
		if err := b.burst(); err != nil {
			return written, time.Since(start), err
		}
		written += ballastBurst
	}
	err = b.f.Sync()
	return written, time.Since(start), err
}

// A top-up looks at MemFree every ballastBurst written and calls the cache
// full when a whole fullWindow written freed up at least fullSlack less
// than it wrote: a little, because other work allocates and frees meanwhile.
const (
	ballastBurst = 16 * ballastChunk
	fullWindow   = 1 << 30
	fullSlack    = 128 << 20
)

// cacheFull: free memory fell by less than fullSlack over a full window.
func cacheFull(window []int64, free int64) bool {
	return len(window) == fullWindow/ballastBurst && window[0]-free < fullSlack
}

// burst writes ballastBurst bytes at the ring cursor.
func (b *Ballast) burst() error {
	for range ballastBurst / ballastChunk {
		if _, err := b.f.WriteAt(b.buf, b.next); err != nil {
			return err
		}
		if b.next += ballastChunk; b.next >= b.size {
			b.next = 0
		}
	}
	return nil
}

// Close removes the ballast file; its pages go back to free memory.
func (b *Ballast) Close() error {
	return errors.Join(b.f.Close(), os.Remove(b.path))
}

// MemInfo reads one field of /proc/meminfo, in bytes.
func MemInfo(field string) (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok || string(name) != field {
			continue
		}
		fields := bytes.Fields(rest)
		if len(fields) == 0 {
			break
		}
		kb, err := strconv.ParseInt(string(fields[0]), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/meminfo %s: %w", field, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("/proc/meminfo has no %s", field)
}
