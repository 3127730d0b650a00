package storage

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/sluice-broker/sluice/internal/fsutil"
)

// mapFile maps size bytes of the file at path. Writable mappings create the
// file and grow it (sparsely) to size first; read-only ones map the file as
// it is and return nil for an empty file. The descriptor is closed before
// returning: a mapping stays valid without it, which keeps index files from
// costing descriptors.
func mapFile(path string, size int64, writable bool) (buf []byte, fileSize int64, err error) {
	flag, prot := os.O_RDONLY, unix.PROT_READ
	if writable {
		flag, prot = os.O_RDWR|os.O_CREATE, unix.PROT_READ|unix.PROT_WRITE
	}
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, 0, err
	}
	fileSize = st.Size()
	if !writable {
		size = fileSize
	} else if fileSize < size {
		if err := f.Truncate(size); err != nil {
			return nil, 0, err
		}
	}
	if size == 0 {
		return nil, fileSize, nil
	}
	buf, err = unix.Mmap(int(f.Fd()), 0, int(size), prot, unix.MAP_SHARED)
	if err != nil {
		return nil, 0, &os.PathError{Op: "mmap", Path: path, Err: err}
	}
	// Index lookups are binary searches and appends touch one page at a
	// time, so the kernel's read-around on a fault only costs: with the
	// device's read-ahead (8 MiB on some hosts) one touch of a sparse
	// preallocated index zero-filled megabytes of page cache, which made
	// creating a partition cost ~20 ms of CPU. The advice is only advice.
	_ = unix.Madvise(buf, unix.MADV_RANDOM)
	return buf, fileSize, nil
}

func unmap(buf []byte) error {
	if buf == nil {
		return nil
	}
	return unix.Munmap(buf)
}

// syncMapped writes a writable mapping's dirty pages to disk.
func syncMapped(buf []byte) error {
	if buf == nil {
		return nil
	}
	return unix.Msync(buf, unix.MS_SYNC)
}

// truncatePath sets the size of the file at path.
func truncatePath(path string, size int64) error { return os.Truncate(path, size) }

// syncDir makes renames, creations and removals in dir durable.
func syncDir(dir string) error { return fsutil.SyncDir(dir) }
