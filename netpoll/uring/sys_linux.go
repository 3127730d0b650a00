package uring

import "unsafe"

// Opcodes (enum io_uring_op). Only those used or probed by Sluice.
const (
	OpNop          = 0
	OpWritev       = 2
	OpPollAdd      = 6
	OpPollRemove   = 7
	OpSendmsg      = 9
	OpTimeout      = 11
	OpTimeoutRem   = 12
	OpAccept       = 13
	OpAsyncCancel  = 14
	OpLinkTimeout  = 15
	OpClose        = 19
	OpRead         = 22
	OpWrite        = 23
	OpSend         = 26
	OpRecv         = 27
	OpSplice       = 30
	OpShutdown     = 34
	OpSendZC       = 47
	opNameOverflow = 48
)

var opNames = [opNameOverflow]string{
	OpNop: "NOP", OpWritev: "WRITEV", OpPollAdd: "POLL_ADD", OpPollRemove: "POLL_REMOVE",
	OpSendmsg: "SENDMSG", OpTimeout: "TIMEOUT", OpTimeoutRem: "TIMEOUT_REMOVE",
	OpAccept: "ACCEPT", OpAsyncCancel: "ASYNC_CANCEL", OpLinkTimeout: "LINK_TIMEOUT",
	OpClose: "CLOSE", OpRead: "READ", OpWrite: "WRITE", OpSend: "SEND", OpRecv: "RECV",
	OpSplice: "SPLICE", OpShutdown: "SHUTDOWN", OpSendZC: "SEND_ZC",
}

// OpName names an opcode for logs ("op 41" for those this package does not
// name).
func OpName(op uint8) string {
	if int(op) < len(opNames) && opNames[op] != "" {
		return opNames[op]
	}
	return "op " + itoa(int(op))
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// SQE flags (IOSQE_*).
const (
	SQEFixedFile      = 1 << 0
	SQEIODrain        = 1 << 1
	SQEIOLink         = 1 << 2
	SQEIOHardlink     = 1 << 3
	SQEAsync          = 1 << 4
	SQEBufferSelect   = 1 << 5
	SQECQESkipSuccess = 1 << 6
)

// Setup flags (IORING_SETUP_*).
const (
	SetupCQSize       = 1 << 3
	SetupClamp        = 1 << 4
	SetupSubmitAll    = 1 << 7
	SetupCoopTaskrun  = 1 << 8
	SetupTaskrunFlag  = 1 << 9
	SetupSingleIssuer = 1 << 12
	SetupDeferTaskrun = 1 << 13
)

// Feature bits reported by setup (IORING_FEAT_*).
const (
	FeatSingleMmap = 1 << 0
	FeatNoDrop     = 1 << 1
	FeatFastPoll   = 1 << 5
	FeatExtArg     = 1 << 8
)

// Completion flags (IORING_CQE_F_*).
const (
	CQEFBuffer       = 1 << 0
	CQEFMore         = 1 << 1
	CQEFSockNonempty = 1 << 2
	CQEFNotif        = 1 << 3
	cqeBufferShift   = 16
)

// Per-op flags.
const (
	AcceptMultishot    = 1 << 0 // accept_flags (in ioprio)
	RecvPollFirst      = 1 << 0 // IORING_RECVSEND_POLL_FIRST (in ioprio)
	RecvMultishot      = 1 << 1
	PollAddMulti       = 1 << 0 // in len
	TimeoutAbs         = 1 << 0
	TimeoutETimeSucc   = 1 << 5
	CancelAll          = 1 << 0
	CancelFD           = 1 << 1
	CancelAny          = 1 << 2
	spliceOffsetNone   = ^uint64(0) // "no offset": use (and move) the fd's position
	enterGetEvents     = 1 << 0
	enterExtArg        = 1 << 3
	sqNeedWakeup       = 1 << 0
	sqCQOverflow       = 1 << 1
	sqTaskrun          = 1 << 2
	registerProbe      = 8
	registerPbufRing   = 22
	unregisterPbufRing = 23
	offSQRing          = 0
	offCQRing          = 0x8000000
	offSQEs            = 0x10000000
)

// SQE is a submission queue entry (struct io_uring_sqe, 64 bytes). The
// union members are named after their commonest use; the Prep methods fill
// them correctly per opcode.
type SQE struct {
	Opcode      uint8
	Flags       uint8
	IOPrio      uint16
	Fd          int32
	Off         uint64 // off / addr2
	Addr        uint64 // addr / splice_off_in
	Len         uint32
	OpFlags     uint32 // rw_flags, msg_flags, timeout_flags, accept_flags, …
	UserData    uint64
	BufIndex    uint16 // buf_index / buf_group
	Personality uint16
	SpliceFdIn  int32 // splice_fd_in / file_index
	Addr3       uint64
	_           uint64
}

// CQE is a completion queue entry (struct io_uring_cqe, 16 bytes).
type CQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// BufferID is the provided buffer a completion consumed (valid when
// Flags&CQEFBuffer != 0).
func (c *CQE) BufferID() uint16 { return uint16(c.Flags >> cqeBufferShift) }

// HasBuffer reports whether the completion consumed a provided buffer.
func (c *CQE) HasBuffer() bool { return c.Flags&CQEFBuffer != 0 }

// More reports whether a multishot request stays armed after this CQE.
func (c *CQE) More() bool { return c.Flags&CQEFMore != 0 }

type sqringOffsets struct {
	Head, Tail, RingMask, RingEntries, Flags, Dropped, Array, Resv1 uint32
	Resv2                                                           uint64
}

type cqringOffsets struct {
	Head, Tail, RingMask, RingEntries, Overflow, Cqes, Flags, Resv1 uint32
	Resv2                                                           uint64
}

type params struct {
	SQEntries, CQEntries, Flags, SQThreadCPU, SQThreadIdle, Features, WQFd uint32
	Resv                                                                   [3]uint32
	SQOff                                                                  sqringOffsets
	CQOff                                                                  cqringOffsets
}

type geteventsArg struct {
	Sigmask   uint64
	SigmaskSz uint32
	Pad       uint32
	Ts        uint64
}

type bufReg struct {
	RingAddr    uint64
	RingEntries uint32
	Bgid        uint16
	Pad         uint16
	Resv        [3]uint64
}

// Compile-time checks of the ABI sizes.
var (
	_ [64 - unsafe.Sizeof(SQE{})]struct{}
	_ [unsafe.Sizeof(SQE{}) - 64]struct{}
	_ [16 - unsafe.Sizeof(CQE{})]struct{}
	_ [unsafe.Sizeof(CQE{}) - 16]struct{}
	_ [120 - unsafe.Sizeof(params{})]struct{}
	_ [unsafe.Sizeof(params{}) - 120]struct{}
	_ [40 - unsafe.Sizeof(bufReg{})]struct{}
)
