// Package zcprobe proves (or disproves) that a broker serves fetches without
// copying: it traces one process with eBPF and counts the bytes that reach
// its TCP sockets through the splice path (sendfile(2), splice(2), io_uring
// splice — page-cache pages handed to the socket) apart from the bytes
// copied in from user memory (write, writev, send*, io_uring send).
//
// # What is traced, and why there
//
// Best: the kernel's tcp_sendmsg, through an fexit program (BTF
// trampoline), which sees its return value — the bytes actually queued on a
// TCP socket. Every way a process puts bytes on a TCP socket ends there
// (since Linux 6.5 sendfile and splice to a socket go through
// splice_to_socket → tcp_sendmsg with MSG_SPLICE_PAGES), and nothing else
// does: write(2)s to segment files never reach it, io_uring's sends (from
// io-wq threads of the same process) do. Whether a call is on the splice
// path is a per-thread flag set while the thread is inside sendfile64 or
// splice (syscall tracepoints) or splice_to_socket (fentry/fexit, which also
// catches io_uring's IORING_OP_SPLICE).
//
// Fallback, where fexit cannot load (no kernel BTF, trampolines refused, as
// in some sandboxes): syscall tracepoints filtered by tgid. sys_exit_sendfile64
// and sys_exit_splice count zero-copy bytes; sys_enter/sys_exit of write,
// writev, sendto and sendmsg count copied bytes per fd, and a sampler reads
// /proc/<pid>/fd every 100 ms to sort fds into sockets and files, since a
// tracepoint cannot tell a socket write from a segment-file write. Bytes on
// an fd closed before it was sampled count as socket bytes (the
// conservative side). io_uring operations issue no syscalls: the tracepoints
// io_uring_submit_req (opcode, by tgid) and io_uring_complete (result) count
// SEND/SENDMSG and WRITE* as copied, SPLICE and SEND_ZC as zero-copy. Which
// method ran is in Counts.Method.
//
// BPF programs are assembled in Go with cilium/ebpf's asm package; no C
// compiler is needed. Loading them needs root (CAP_BPF and CAP_PERFMON).
package zcprobe

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"
)

// Counter slots in the counters array map.
const (
	slotTCPZeroCopy = iota // tcp_sendmsg bytes while on the splice path
	slotTCPCopied          // tcp_sendmsg bytes otherwise
	slotSendfile           // sendfile64 return values
	slotSplice             // splice return values
	slotWrites             // write, writev, sendto, sendmsg return values (any fd)
	slotURingSend          // io_uring SEND, SENDMSG results
	slotURingWrite         // io_uring WRITE, WRITEV, WRITE_FIXED results (any fd)
	slotURingSplice        // io_uring SPLICE results
	slotURingSendZC        // io_uring SEND_ZC, SENDMSG_ZC results
	numSlots
)

// Methods reported in Counts.Method.
const (
	MethodTCP      = "fexit tcp_sendmsg, split by a splice-path flag (sendfile64/splice tracepoints, splice_to_socket fentry/fexit)"
	MethodSyscalls = "tracepoints: sendfile64/splice (+io_uring SPLICE, SEND_ZC) bytes vs write/writev/sendto/sendmsg on socket fds (+io_uring SEND*, WRITE*)"
)

// sampleEvery is how often fds are sorted into sockets and files.
const sampleEvery = 100 * time.Millisecond

// ErrNeedRoot is returned when the caller may not load BPF programs.
var ErrNeedRoot = errors.New("zcprobe needs root (CAP_BPF, CAP_PERFMON) to load eBPF programs")

// Counts are bytes seen since the probe was attached.
type Counts struct {
	// fexit method.
	TCPZeroCopyBytes uint64 `json:"tcp_zero_copy_bytes"`
	TCPCopiedBytes   uint64 `json:"tcp_copied_bytes"`
	// Syscall tracepoints (both methods).
	SendfileBytes uint64 `json:"sendfile_bytes"`
	SpliceBytes   uint64 `json:"splice_bytes"`
	WriteBytes    uint64 `json:"write_family_bytes"` // all fds
	// The write family sorted by fd kind.
	SocketWriteBytes uint64 `json:"socket_write_bytes"`
	FileWriteBytes   uint64 `json:"file_write_bytes"`
	GoneWriteBytes   uint64 `json:"closed_fd_write_bytes"` // fd closed before it was sorted
	// io_uring operations the process submitted (tracepoints
	// io_uring:io_uring_submit_req and io_uring_complete).
	URingSendBytes   uint64 `json:"io_uring_send_bytes"`
	URingWriteBytes  uint64 `json:"io_uring_write_bytes"` // any fd
	URingSpliceBytes uint64 `json:"io_uring_splice_bytes"`
	URingSendZCBytes uint64 `json:"io_uring_send_zc_bytes"`
	Method           string `json:"method"`
}

// Sub returns c - prev, for a window between two reads.
func (c Counts) Sub(prev Counts) Counts {
	return Counts{
		TCPZeroCopyBytes: c.TCPZeroCopyBytes - prev.TCPZeroCopyBytes,
		TCPCopiedBytes:   c.TCPCopiedBytes - prev.TCPCopiedBytes,
		SendfileBytes:    c.SendfileBytes - prev.SendfileBytes,
		SpliceBytes:      c.SpliceBytes - prev.SpliceBytes,
		WriteBytes:       c.WriteBytes - prev.WriteBytes,
		SocketWriteBytes: c.SocketWriteBytes - prev.SocketWriteBytes,
		FileWriteBytes:   c.FileWriteBytes - prev.FileWriteBytes,
		GoneWriteBytes:   c.GoneWriteBytes - prev.GoneWriteBytes,
		URingSendBytes:   c.URingSendBytes - prev.URingSendBytes,
		URingWriteBytes:  c.URingWriteBytes - prev.URingWriteBytes,
		URingSpliceBytes: c.URingSpliceBytes - prev.URingSpliceBytes,
		URingSendZCBytes: c.URingSendZCBytes - prev.URingSendZCBytes,
		Method:           c.Method,
	}
}

// ZeroCopyBytes is what went to sockets on the splice path.
func (c Counts) ZeroCopyBytes() uint64 {
	if c.Method == MethodTCP {
		return c.TCPZeroCopyBytes
	}
	return c.SendfileBytes + c.SpliceBytes + c.URingSpliceBytes + c.URingSendZCBytes
}

// CopiedBytes is what went to sockets from user memory. The syscall method
// cannot tell which fd an io_uring write went to, and counts it here: the
// conservative side.
func (c Counts) CopiedBytes() uint64 {
	if c.Method == MethodTCP {
		return c.TCPCopiedBytes
	}
	return c.SocketWriteBytes + c.GoneWriteBytes + c.URingSendBytes + c.URingWriteBytes
}

// Fraction is zero-copy bytes over all bytes sent to sockets, or 0 if none
// were.
func (c Counts) Fraction() float64 {
	zc, cp := c.ZeroCopyBytes(), c.CopiedBytes()
	if zc+cp == 0 {
		return 0
	}
	return float64(zc) / float64(zc+cp)
}

// Probe is attached BPF programs counting for one process.
type Probe struct {
	pid      int
	method   string
	fallback string // why MethodTCP is not in use

	counters *ebpf.Map // slot → bytes
	flags    *ebpf.Map // tid → on the splice path
	pending  *ebpf.Map // tid → fd of the write-family syscall in flight
	fdBytes  *ebpf.Map // fd → write-family bytes
	reqs     *ebpf.Map // io_uring request → counter slot
	progs    []*ebpf.Program
	links    []link.Link
	attached []string // what the links are on, for tests and reports

	stop chan struct{}
	done chan struct{}
	mu   struct {
		sync.Mutex
		seen                 map[uint32]uint64 // fdBytes as last sampled
		socket, file, closed uint64
	}
}

// Attach starts counting for process pid (all its threads).
func Attach(pid int) (*Probe, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNeedRoot
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("zcprobe: memlock: %w", err)
	}
	if err := ensureTracefs(); err != nil {
		return nil, err
	}
	p := &Probe{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	p.mu.seen = map[uint32]uint64{}
	if err := p.attach(); err != nil {
		close(p.done)
		p.Close()
		if errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("%w: %v", ErrNeedRoot, err)
		}
		return nil, err
	}
	go p.sampleLoop()
	return p, nil
}

func (p *Probe) attach() error {
	var err error
	newMap := func(name string, typ ebpf.MapType, k, v, n uint32) *ebpf.Map {
		if err != nil {
			return nil
		}
		var m *ebpf.Map
		m, err = ebpf.NewMap(&ebpf.MapSpec{Name: name, Type: typ, KeySize: k, ValueSize: v, MaxEntries: n})
		return m
	}
	p.counters = newMap("zc_counters", ebpf.Array, 4, 8, numSlots)
	p.flags = newMap("zc_splicing", ebpf.Hash, 4, 4, 16384)
	p.pending = newMap("zc_pending", ebpf.Hash, 4, 4, 16384)
	p.fdBytes = newMap("zc_fd_bytes", ebpf.Hash, 4, 8, 65536)
	p.reqs = newMap("zc_uring_reqs", ebpf.Hash, 8, 4, 65536)
	if err != nil {
		return fmt.Errorf("zcprobe: create map: %w", err)
	}
	tgid := int32(p.pid)
	for _, sc := range []string{"sendfile64", "splice"} {
		if err := p.tracepoint("sys_enter_"+sc, setFlag(tgid, p.flags)); err != nil {
			return err
		}
	}
	if err := p.tracepoint("sys_exit_sendfile64", exitSyscall(tgid, p.flags, p.counters, slotSendfile)); err != nil {
		return err
	}
	if err := p.tracepoint("sys_exit_splice", exitSyscall(tgid, p.flags, p.counters, slotSplice)); err != nil {
		return err
	}
	for _, sc := range []string{"write", "writev", "sendto", "sendmsg"} {
		if err := p.tracepoint("sys_enter_"+sc, enterWrite(tgid, p.pending)); err != nil {
			return err
		}
		if err := p.tracepoint("sys_exit_"+sc, exitWrite(tgid, p.pending, p.fdBytes, p.counters)); err != nil {
			return err
		}
	}
	// io_uring issues no syscall per operation; its own tracepoints
	// exist on kernels built with them.
	if err := p.tracepointIn("io_uring", "io_uring_submit_req", uringSubmit(tgid, p.reqs)); err == nil {
		_ = p.tracepointIn("io_uring", "io_uring_complete", uringComplete(p.reqs, p.counters))
	}
	p.method = MethodSyscalls
	if err := p.tracing("tcp_sendmsg", ebpf.AttachTraceFExit, tcpSendmsgExit(tgid, p.flags, p.counters)); err != nil {
		p.fallback = err.Error()
		return nil
	}
	p.method = MethodTCP
	// splice_to_socket (Linux 6.5+) marks io_uring splices too; sendfile
	// and splice(2) are already marked by their tracepoints.
	if err := p.tracing("splice_to_socket", ebpf.AttachTraceFEntry, setFlag(tgid, p.flags)); err == nil {
		_ = p.tracing("splice_to_socket", ebpf.AttachTraceFExit, clearFlag(tgid, p.flags))
	}
	return nil
}

func (p *Probe) tracepoint(name string, insns asm.Instructions) error {
	return p.tracepointIn("syscalls", name, insns)
}

func (p *Probe) tracepointIn(group, name string, insns asm.Instructions) error {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: progName(name), Type: ebpf.TracePoint, License: "GPL", Instructions: insns})
	if err != nil {
		return fmt.Errorf("zcprobe: load %s: %w", name, err)
	}
	p.progs = append(p.progs, prog)
	l, err := link.Tracepoint(group, name, prog, nil)
	if err != nil {
		return fmt.Errorf("zcprobe: attach %s:%s: %w", group, name, err)
	}
	p.links = append(p.links, l)
	p.attached = append(p.attached, group+":"+name)
	return nil
}

func (p *Probe) tracing(fn string, at ebpf.AttachType, insns asm.Instructions) error {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: progName(fn), Type: ebpf.Tracing, AttachType: at, AttachTo: fn, License: "GPL", Instructions: insns})
	if err != nil {
		return fmt.Errorf("zcprobe: load %s %s: %w", at, fn, err)
	}
	p.progs = append(p.progs, prog)
	l, err := link.AttachTracing(link.TracingOptions{Program: prog, AttachType: at})
	if err != nil {
		return fmt.Errorf("zcprobe: attach %s %s: %w", at, fn, err)
	}
	p.links = append(p.links, l)
	p.attached = append(p.attached, at.String()+":"+fn)
	return nil
}

// progName keeps program names within the kernel's 15 characters.
func progName(s string) string {
	s = strings.TrimPrefix(s, "sys_")
	if len(s) > 12 {
		s = s[len(s)-12:]
	}
	return "zc_" + s
}

// sampleLoop sorts new write-family bytes by fd kind until Close.
func (p *Probe) sampleLoop() {
	defer close(p.done)
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			p.sample()
		}
	}
}

// sample reads fdBytes and charges each fd's growth since the last sample
// to what the fd is now.
func (p *Probe) sample() {
	p.mu.Lock()
	defer p.mu.Unlock()
	var fd uint32
	var n uint64
	it := p.fdBytes.Iterate()
	for it.Next(&fd, &n) {
		d := n - p.mu.seen[fd]
		if d == 0 {
			continue
		}
		p.mu.seen[fd] = n
		target, err := os.Readlink("/proc/" + strconv.Itoa(p.pid) + "/fd/" + strconv.FormatUint(uint64(fd), 10))
		switch {
		case err != nil:
			p.mu.closed += d
		case strings.HasPrefix(target, "socket:"):
			p.mu.socket += d
		default:
			p.mu.file += d
		}
	}
}

// Counts reads the counters.
func (p *Probe) Counts() (Counts, error) {
	p.sample()
	var v [numSlots]uint64
	for i := range v {
		if err := p.counters.Lookup(uint32(i), &v[i]); err != nil {
			return Counts{}, fmt.Errorf("zcprobe: read counter %d: %w", i, err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return Counts{
		TCPZeroCopyBytes: v[slotTCPZeroCopy],
		TCPCopiedBytes:   v[slotTCPCopied],
		SendfileBytes:    v[slotSendfile],
		SpliceBytes:      v[slotSplice],
		WriteBytes:       v[slotWrites],
		SocketWriteBytes: p.mu.socket,
		FileWriteBytes:   p.mu.file,
		GoneWriteBytes:   p.mu.closed,
		URingSendBytes:   v[slotURingSend],
		URingWriteBytes:  v[slotURingWrite],
		URingSpliceBytes: v[slotURingSplice],
		URingSendZCBytes: v[slotURingSendZC],
		Method:           p.method,
	}, nil
}

// Method says how bytes are being told apart, and if that is the syscall
// fallback, why.
func (p *Probe) Method() (method, fallbackReason string) { return p.method, p.fallback }

// Attached lists the tracepoints and functions the probe is attached to.
func (p *Probe) Attached() []string { return append([]string(nil), p.attached...) }

// Close detaches everything.
func (p *Probe) Close() error {
	select {
	case <-p.stop:
		return nil
	default:
	}
	close(p.stop)
	<-p.done
	for _, l := range p.links {
		l.Close()
	}
	for _, pr := range p.progs {
		pr.Close()
	}
	for _, m := range []*ebpf.Map{p.counters, p.flags, p.pending, p.fdBytes, p.reqs} {
		if m != nil {
			m.Close()
		}
	}
	return nil
}

// ensureTracefs mounts tracefs where it is expected if nothing is there, as
// perf does: tracepoints are found through it.
func ensureTracefs() error {
	for _, d := range []string{"/sys/kernel/tracing/events", "/sys/kernel/debug/tracing/events"} {
		if _, err := os.Stat(d); err == nil {
			return nil
		}
	}
	if err := unix.Mount("nodev", "/sys/kernel/tracing", "tracefs", 0, ""); err != nil {
		return fmt.Errorf("zcprobe: tracefs is not mounted and mounting it failed: %w", err)
	}
	return nil
}
