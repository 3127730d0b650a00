package netpoll

import "errors"

func uringAvailable() error { return errors.New("not yet") }

func newUring(h Handler, opts Options) (Server, error) { return newEpoll(h, opts) }
