package storage

// The Linux-only system calls of storage's data path. The rest of the
// package uses interfaces every Unix has.

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// iovMax is Linux's IOV_MAX.
const iovMax = 1024

// pwritevAll writes all of iov at off, continuing after short writes. It
// calls the syscall directly so that no Go-side iovec conversion allocates.
func pwritevAll(fd int, iov []unix.Iovec, off int64) error {
	for len(iov) > 0 {
		chunk := iov[:min(len(iov), iovMax)]
		n, _, errno := unix.Syscall6(unix.SYS_PWRITEV, uintptr(fd), uintptr(unsafe.Pointer(&chunk[0])),
			uintptr(len(chunk)), uintptr(off), uintptr(uint64(off)>>32), 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return errno
		}
		if n == 0 {
			return unix.EIO
		}
		off += int64(n)
		iov = advanceIovecs(iov, int64(n))
	}
	return nil
}

// mapForScan maps the file from (about) from to its end for a sequential
// scan. MAP_POPULATE fills the page tables from the page cache in one call,
// so the scan neither copies the data (as read would) nor takes a page
// fault per 4 KiB; a long tail is then checked at the speed of the CRC.
// Failure just means reading instead.
func (r *chunkReader) mapForScan(from int64) {
	off := from &^ (int64(os.Getpagesize()) - 1)
	if r.size-off < recoveryChunk || r.size > maxRel {
		return
	}
	b, err := unix.Mmap(int(r.f.Fd()), off, int(r.size-off), unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return
	}
	unix.Madvise(b, unix.MADV_SEQUENTIAL)
	r.mapped, r.start = b, off
}
