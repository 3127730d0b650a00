package zcprobe

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// ListenerPID returns the pid of the process with a TCP socket listening on
// addr's port (host:port), from /proc/net/tcp{,6} and /proc/*/fd.
func ListenerPID(addr string) (int, error) {
	_, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("bad port in %q", addr)
	}
	inodes := map[string]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if err := listeningInodes(f, uint16(port), inodes); err != nil && !os.IsNotExist(err) {
			return 0, err
		}
	}
	if len(inodes) == 0 {
		return 0, fmt.Errorf("nothing listens on port %d", port)
	}
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		target, err := os.Readlink(fd)
		if err != nil || !strings.HasPrefix(target, "socket:[") {
			continue
		}
		if inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] {
			pid, err := strconv.Atoi(strings.Split(fd, "/")[2])
			if err == nil {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("no process found holding the listener on port %d", port)
}

// listeningInodes adds the inodes of sockets in LISTEN state (0A) on port.
func listeningInodes(path string, port uint16, out map[string]bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fl := strings.Fields(sc.Text())
		if len(fl) < 10 || fl[3] != "0A" {
			continue
		}
		_, hexPort, ok := strings.Cut(fl[1], ":")
		if !ok {
			continue
		}
		if p, err := strconv.ParseUint(hexPort, 16, 16); err == nil && uint16(p) == port {
			out[fl[9]] = true
		}
	}
	return sc.Err()
}
