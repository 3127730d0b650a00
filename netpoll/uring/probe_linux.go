package uring

import (
	"fmt"
	"unsafe"
)

const probeOps = 256

type probeOp struct {
	Op    uint8
	Resv  uint8
	Flags uint16
	Resv2 uint32
}

type probeBuf struct {
	LastOp uint8
	OpsLen uint8
	Resv   uint16
	Resv2  [3]uint32
	Ops    [probeOps]probeOp
}

const opSupported = 1 << 0

// Probe is the set of opcodes the running kernel supports
// (IORING_REGISTER_PROBE, Linux 5.6).
type Probe struct {
	supported [probeOps]bool
	lastOp    uint8
}

// Probe asks the kernel which opcodes this ring can run.
func (r *Ring) Probe() (*Probe, error) {
	buf := new(probeBuf)
	if err := r.register(registerProbe, unsafe.Pointer(buf), probeOps); err != nil {
		return nil, fmt.Errorf("io_uring probe: %w", err)
	}
	p := &Probe{lastOp: buf.LastOp}
	for i := 0; i < int(buf.OpsLen) && i < probeOps; i++ {
		op := buf.Ops[i]
		p.supported[op.Op] = op.Flags&opSupported != 0
	}
	return p, nil
}

// Supports reports whether op can be submitted.
func (p *Probe) Supports(op uint8) bool { return p != nil && p.supported[op] }

// Missing returns the names of the ops in want that the kernel lacks.
func (p *Probe) Missing(want ...uint8) []string {
	var out []string
	for _, op := range want {
		if !p.Supports(op) {
			out = append(out, OpName(op))
		}
	}
	return out
}
