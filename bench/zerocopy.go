package bench

import (
	"github.com/sluice-broker/sluice/tools/zcprobe"
)

// ZeroCopyProbe traces a broker process with tools/zcprobe over a window.
type ZeroCopyProbe struct {
	pid  int
	p    *zcprobe.Probe
	base zcprobe.Counts
}

// ZeroCopyReport is what a broker sent to sockets in a window, split into
// zero-copy and copied bytes.
type ZeroCopyReport struct {
	Pid            int            `json:"pid"`
	Counts         zcprobe.Counts `json:"counts"`
	ZeroCopyBytes  uint64         `json:"zero_copy_bytes"`
	CopiedBytes    uint64         `json:"copied_bytes"`
	Fraction       float64        `json:"zero_copy_fraction"`
	FallbackReason string         `json:"fallback_reason,omitempty"`
}

// StartZeroCopyProbe attaches to pid, or if pid is 0 to the process
// listening on addr's port.
func StartZeroCopyProbe(addr string, pid int) (*ZeroCopyProbe, error) {
	if pid == 0 {
		var err error
		if pid, err = zcprobe.ListenerPID(addr); err != nil {
			return nil, err
		}
	}
	p, err := zcprobe.Attach(pid)
	if err != nil {
		return nil, err
	}
	z := &ZeroCopyProbe{pid: pid, p: p}
	z.Reset()
	return z, nil
}

// Reset starts a new window.
func (z *ZeroCopyProbe) Reset() {
	z.base, _ = z.p.Counts()
}

// Read reports the window so far.
func (z *ZeroCopyProbe) Read() ZeroCopyReport {
	now, err := z.p.Counts()
	r := ZeroCopyReport{Pid: z.pid}
	if err != nil {
		r.FallbackReason = err.Error()
		return r
	}
	c := now.Sub(z.base)
	r.Counts = c
	r.ZeroCopyBytes, r.CopiedBytes, r.Fraction = c.ZeroCopyBytes(), c.CopiedBytes(), c.Fraction()
	_, r.FallbackReason = z.p.Method()
	return r
}

// Close detaches the probe.
func (z *ZeroCopyProbe) Close() error { return z.p.Close() }
