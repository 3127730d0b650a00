package netpoll

import (
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// sendFileRegion sends n bytes of f from off to the socket with sendfile(2),
// through the runtime poller so EAGAIN parks the goroutine instead of
// spinning. The file's own offset is never used (pread semantics), so many
// connections can send from one *os.File at once.
func sendFileRegion(rc syscall.RawConn, f *os.File, off, n int64) error {
	src := int(f.Fd())
	var opErr error
	err := rc.Write(func(fd uintptr) bool {
		for n > 0 {
			chunk := n
			if chunk > 1<<30 {
				chunk = 1 << 30
			}
			w, err := unix.Sendfile(int(fd), src, &off, int(chunk))
			if w > 0 {
				n -= int64(w)
			}
			switch {
			case err == unix.EAGAIN:
				return false // wait for writability; off already advanced
			case err == unix.EINTR:
				continue
			case err != nil:
				opErr = err
				return true
			case w == 0:
				opErr = io.ErrUnexpectedEOF // file shorter than the region
				return true
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	return opErr
}
