//go:build !linux

package netpoll

import "errors"

const epollAvailable = false

func uringAvailable() error { return errors.New("io_uring is Linux-only") }

func newUring(h Handler, opts Options) (Server, error) { return NewStd(h, opts), nil }
func newEpoll(h Handler, opts Options) (Server, error) { return NewStd(h, opts), nil }
