package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/sluice-broker/sluice/netpoll"
)

// The network backend of `sluice serve`, layered like every other
// setting: the SLUICE_NET environment variable, then the config file's
// sluice.net and sluice.net.loops keys, then the --net and --net-loops
// flags. Unset everywhere, the broker picks the fastest backend the host
// supports (uring, else epoll, logging why).
const (
	netKey      = "sluice.net"
	netLoopsKey = "sluice.net.loops"
)

// isNetKey tells the network keys apart from the engine's, so that the
// engine's "unknown key" warning skips them.
func isNetKey(k string) bool { return k == netKey || k == netLoopsKey }

// netSettings resolves the backend name ("" for automatic) and loop count
// (0 for one per core).
func netSettings(f serveFlags) (backend string, loops int, err error) {
	backend = os.Getenv("SLUICE_NET")
	if f.config != "" {
		if backend, loops, err = netFromFile(f.config, backend); err != nil {
			return "", 0, err
		}
	}
	if f.net != "" {
		backend = f.net
	}
	if f.netLoops > 0 {
		loops = f.netLoops
	}
	switch backend {
	case "auto":
		backend = ""
	case "", netpoll.BackendUring, netpoll.BackendEpoll, netpoll.BackendStd:
	default:
		return "", 0, fmt.Errorf("network backend %q: want uring, epoll, std or auto", backend)
	}
	return backend, loops, nil
}

func netFromFile(path, backend string) (string, int, error) {
	file, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer file.Close()
	loops := 0
	sc := bufio.NewScanner(file)
	for line := 1; sc.Scan(); line++ {
		s := strings.TrimSpace(sc.Text())
		if s == "" || s[0] == '#' || s[0] == '!' {
			continue
		}
		i := strings.IndexAny(s, "=:")
		if i < 0 {
			continue
		}
		key, val := strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+1:])
		switch key {
		case netKey:
			backend = val
		case netLoopsKey:
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 || n > 1024 {
				return "", 0, fmt.Errorf("%s: config line %d: %s=%q: want 0 (one per core) to 1024", path, line, key, val)
			}
			loops = n
		}
	}
	return backend, loops, sc.Err()
}
