package netpoll

import (
	"context"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// Listen opens a TCP listener with SO_REUSEPORT set, so that the event-loop
// backends can give each loop a listening socket of its own on the same
// address (the kernel then spreads connections over the loops). Any
// backend serves it; for the std backend it is an ordinary listener.
func Listen(network, addr string) (net.Listener, error) {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	return lc.Listen(context.Background(), network, addr)
}

// listenReusePort opens one more non-blocking listening socket on addr,
// which must already be bound with SO_REUSEPORT by this user.
func listenReusePort(addr *net.TCPAddr) (int, error) {
	family, sa := unix.AF_INET, unix.Sockaddr(nil)
	if ip4 := addr.IP.To4(); ip4 != nil {
		s := &unix.SockaddrInet4{Port: addr.Port}
		copy(s.Addr[:], ip4)
		sa = s
	} else {
		family = unix.AF_INET6
		s := &unix.SockaddrInet6{Port: addr.Port}
		copy(s.Addr[:], addr.IP.To16())
		sa = s
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("reuseport socket: %w", err)
	}
	for _, opt := range []int{unix.SO_REUSEADDR, unix.SO_REUSEPORT} {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, 1); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("reuseport setsockopt: %w", err)
		}
	}
	if err := unix.Bind(fd, sa); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("reuseport bind %s: %w", addr, err)
	}
	if err := unix.Listen(fd, 4096); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("reuseport listen %s: %w", addr, err)
	}
	return fd, nil
}
