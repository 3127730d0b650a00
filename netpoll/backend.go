package netpoll

import (
	"context"
	"fmt"
	"net"
)

// Backend names (the --net flag and the sluice.net config key).
const (
	BackendUring = "uring"
	BackendEpoll = "epoll"
	BackendStd   = "std"
)

// Server is what every backend offers.
type Server interface {
	// Serve accepts on ln until Shutdown and returns nil after Shutdown.
	Serve(ln net.Listener) error
	// ServeListener is Serve for a named listener, TLS when lo.TLS is set.
	// Several listeners may be served at once, each by its own call.
	ServeListener(ln net.Listener, lo ListenerOptions) error
	// Shutdown stops accepting, lets each connection finish the request
	// it is serving, closes every connection and waits (or until ctx ends).
	Shutdown(ctx context.Context) error
	// Backend names the backend actually serving.
	Backend() string
}

// Backend implements Server.
func (s *StdServer) Backend() string { return BackendStd }

// New returns a server of the named backend ("" for the default). A
// backend the host cannot run falls back to the next one (uring → epoll →
// std) with a warning that says why; the chosen backend is logged.
func New(backend string, h Handler, opts Options) (Server, error) {
	opts.defaults()
	name, why := resolveBackend(backend)
	if name == "" {
		return nil, fmt.Errorf("netpoll: unknown backend %q (want %s, %s or %s)", backend, BackendUring, BackendEpoll, BackendStd)
	}
	if why != "" {
		level := opts.Logger.Info
		if backend != "" {
			level = opts.Logger.Warn
		}
		level("network backend fallback", "wanted", orDefault(backend), "using", name, "why", why)
	}
	opts.Logger.Debug("network backend", "backend", name, "loops", opts.Loops)
	switch name {
	case BackendUring:
		return newUring(h, opts)
	case BackendEpoll:
		return newEpoll(h, opts)
	default:
		return NewStd(h, opts), nil
	}
}

func orDefault(s string) string {
	if s == "" {
		return "default"
	}
	return s
}

// DefaultBackend is the backend New("") picks on this host, and why a
// faster one was passed over ("" when none was).
func DefaultBackend() (name, why string) { return resolveBackend("") }

// resolveBackend maps a requested backend to one the host can run.
func resolveBackend(want string) (name, why string) {
	switch want {
	case "", BackendUring:
		if err := uringAvailable(); err != nil {
			name, why = resolveBackend(BackendEpoll)
			if why == "" {
				why = "io_uring: " + err.Error()
			}
			return name, why
		}
		return BackendUring, ""
	case BackendEpoll:
		if !epollAvailable {
			return BackendStd, "epoll is Linux-only"
		}
		return BackendEpoll, ""
	case BackendStd:
		return BackendStd, ""
	}
	return "", ""
}

// UringAvailable reports whether the uring backend can run here, or why
// not.
func UringAvailable() error { return uringAvailable() }
