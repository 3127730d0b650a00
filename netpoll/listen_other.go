//go:build !linux

package netpoll

import "net"

// Listen opens a TCP listener (SO_REUSEPORT matters only on Linux).
func Listen(network, addr string) (net.Listener, error) { return net.Listen(network, addr) }
