package zcprobe

import (
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// The programs below share a prologue: keep the context in R6, the
// pid_tgid in R7 (thread id in its low half), and leave at once for any
// process but the traced one.
//
// Stack: fp-4 holds a thread id (flag map key), fp-8 a counter slot or a
// flag value.

// Offsets into contexts.
const (
	// syscalls:sys_exit_* tracepoints: 8 bytes of common fields, the
	// syscall number, then `long ret` at 16.
	tpExitRet = 16
	// syscalls:sys_enter_* tracepoints: the first argument (an fd for
	// every syscall traced here) at 16.
	tpEnterArg0 = 16
	// fexit tcp_sendmsg(struct sock *, struct msghdr *, size_t): three
	// u64 argument slots, then the int return value.
	tcpSendmsgRet = 3 * 8
)

func prologue(tgid int32) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.FnGetCurrentPidTgid.Call(),
		asm.Mov.Reg(asm.R7, asm.R0),
		asm.RSh.Imm(asm.R0, 32),
		asm.JNE.Imm(asm.R0, tgid, "out"),
		asm.StoreMem(asm.RFP, -4, asm.R7, asm.Word),
	}
}

func epilogue() asm.Instructions {
	return asm.Instructions{
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	}
}

// setFlag marks the calling thread as being on the splice path.
func setFlag(tgid int32, flags *ebpf.Map) asm.Instructions {
	insns := prologue(tgid)
	insns = append(insns,
		asm.StoreImm(asm.RFP, -8, 1, asm.Word),
		asm.LoadMapPtr(asm.R1, flags.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, -8),
		asm.Mov.Imm(asm.R4, 0), // BPF_ANY
		asm.FnMapUpdateElem.Call(),
	)
	return append(insns, epilogue()...)
}

// clearFlag unmarks the calling thread.
func clearFlag(tgid int32, flags *ebpf.Map) asm.Instructions {
	insns := prologue(tgid)
	insns = append(insns, deleteTid(flags)...)
	return append(insns, epilogue()...)
}

// deleteTid removes the calling thread's entry (key at fp-4) from m.
func deleteTid(m *ebpf.Map) asm.Instructions {
	return asm.Instructions{
		asm.LoadMapPtr(asm.R1, m.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapDeleteElem.Call(),
	}
}

// addR8 adds R8 to counters[slot in R9].
func addR8(counters *ebpf.Map) asm.Instructions {
	return asm.Instructions{
		asm.StoreMem(asm.RFP, -8, asm.R9, asm.Word),
		asm.LoadMapPtr(asm.R1, counters.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -8),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.StoreXAdd(asm.R0, asm.R8, asm.DWord),
	}
}

// exitSyscall adds a positive syscall return value to counters[slot], and
// clears the thread's splice flag first if flags is not nil.
func exitSyscall(tgid int32, flags, counters *ebpf.Map, slot int32) asm.Instructions {
	insns := prologue(tgid)
	if flags != nil {
		insns = append(insns, deleteTid(flags)...)
	}
	insns = append(insns,
		asm.LoadMem(asm.R8, asm.R6, tpExitRet, asm.DWord),
		asm.JSLE.Imm(asm.R8, 0, "out"),
		asm.Mov.Imm(asm.R9, slot),
	)
	insns = append(insns, addR8(counters)...)
	return append(insns, epilogue()...)
}

// tcpSendmsgExit adds tcp_sendmsg's positive return value to the zero-copy
// counter if the thread is on the splice path, else to the copied one.
func tcpSendmsgExit(tgid int32, flags, counters *ebpf.Map) asm.Instructions {
	insns := prologue(tgid)
	insns = append(insns,
		asm.LoadMem(asm.R8, asm.R6, tcpSendmsgRet, asm.DWord),
		// The int return value sits in a u64 slot: sign-extend it.
		asm.LSh.Imm(asm.R8, 32),
		asm.ArSh.Imm(asm.R8, 32),
		asm.JSLE.Imm(asm.R8, 0, "out"),
		asm.Mov.Imm(asm.R9, slotTCPCopied),
		asm.LoadMapPtr(asm.R1, flags.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "count"),
		asm.Mov.Imm(asm.R9, slotTCPZeroCopy),
	)
	add := addR8(counters)
	add[0] = add[0].WithSymbol("count")
	insns = append(insns, add...)
	return append(insns, epilogue()...)
}

// enterWrite remembers, per thread, the fd a write-family syscall is about
// to write to.
func enterWrite(tgid int32, pending *ebpf.Map) asm.Instructions {
	insns := prologue(tgid)
	insns = append(insns,
		asm.LoadMem(asm.R8, asm.R6, tpEnterArg0, asm.Word),
		asm.StoreMem(asm.RFP, -8, asm.R8, asm.Word),
		asm.LoadMapPtr(asm.R1, pending.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, -8),
		asm.Mov.Imm(asm.R4, 0), // BPF_ANY
		asm.FnMapUpdateElem.Call(),
	)
	return append(insns, epilogue()...)
}

// exitWrite adds a positive return value to counters[slotWrites] and to
// fdBytes[fd] for the fd enterWrite remembered. Stack: fp-16 holds the fd,
// fp-24 a zero to create a missing fdBytes entry with.
func exitWrite(tgid int32, pending, fdBytes, counters *ebpf.Map) asm.Instructions {
	insns := prologue(tgid)
	insns = append(insns,
		asm.LoadMapPtr(asm.R1, pending.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.LoadMem(asm.R1, asm.R0, 0, asm.Word),
		asm.StoreMem(asm.RFP, -16, asm.R1, asm.Word),
	)
	insns = append(insns, deleteTid(pending)...) // same key, other map
	insns = append(insns,
		asm.LoadMem(asm.R8, asm.R6, tpExitRet, asm.DWord),
		asm.JSLE.Imm(asm.R8, 0, "out"),
		// fdBytes[fd] += ret, creating the entry first if need be.
		asm.Mov.Imm(asm.R1, 0),
		asm.StoreMem(asm.RFP, -24, asm.R1, asm.DWord),
		asm.LoadMapPtr(asm.R1, fdBytes.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -16),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, -24),
		asm.Mov.Imm(asm.R4, 1), // BPF_NOEXIST: keep a count that is there
		asm.FnMapUpdateElem.Call(),
		asm.LoadMapPtr(asm.R1, fdBytes.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -16),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "total"),
		asm.StoreXAdd(asm.R0, asm.R8, asm.DWord),
		asm.Mov.Imm(asm.R9, slotWrites).WithSymbol("total"),
	)
	insns = append(insns, addR8(counters)...)
	return append(insns, epilogue()...)
}

// io_uring opcodes (enum io_uring_op) whose bytes the probe counts.
const (
	opWritev     = 2
	opWriteFixed = 5
	opSendmsg    = 9
	opWrite      = 23
	opSend       = 26
	opSplice     = 30
	opSendZC     = 47
	opSendmsgZC  = 48
)

// Offsets into the io_uring tracepoints' records.
const (
	uringReq    = 16 // void *req, both tracepoints
	uringOpcode = 32 // u8 opcode, io_uring_submit_req
	uringRes    = 32 // int res, io_uring_complete
)

// uringSubmit remembers, per request, the counter slot of a send, write or
// splice the traced process submits to an io_uring. Stack: fp-8 the slot,
// fp-16 the request pointer.
func uringSubmit(tgid int32, reqs *ebpf.Map) asm.Instructions {
	insns := prologue(tgid)
	insns = append(insns,
		asm.LoadMem(asm.R8, asm.R6, uringOpcode, asm.Byte),
		asm.Mov.Imm(asm.R9, slotURingSend),
		asm.JEq.Imm(asm.R8, opSend, "keep"),
		asm.JEq.Imm(asm.R8, opSendmsg, "keep"),
		asm.Mov.Imm(asm.R9, slotURingWrite),
		asm.JEq.Imm(asm.R8, opWrite, "keep"),
		asm.JEq.Imm(asm.R8, opWritev, "keep"),
		asm.JEq.Imm(asm.R8, opWriteFixed, "keep"),
		asm.Mov.Imm(asm.R9, slotURingSplice),
		asm.JEq.Imm(asm.R8, opSplice, "keep"),
		asm.Mov.Imm(asm.R9, slotURingSendZC),
		asm.JEq.Imm(asm.R8, opSendZC, "keep"),
		asm.JEq.Imm(asm.R8, opSendmsgZC, "keep"),
		asm.Ja.Label("out"),
		asm.StoreMem(asm.RFP, -8, asm.R9, asm.Word).WithSymbol("keep"),
		asm.LoadMem(asm.R1, asm.R6, uringReq, asm.DWord),
		asm.StoreMem(asm.RFP, -16, asm.R1, asm.DWord),
		asm.LoadMapPtr(asm.R1, reqs.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -16),
		asm.Mov.Reg(asm.R3, asm.RFP),
		asm.Add.Imm(asm.R3, -8),
		asm.Mov.Imm(asm.R4, 0), // BPF_ANY
		asm.FnMapUpdateElem.Call(),
	)
	return append(insns, epilogue()...)
}

// uringComplete adds a positive result of a remembered request to its
// slot. It does not filter by process: completions may be posted from
// another task's context, and only the traced process's requests are in
// reqs.
func uringComplete(reqs, counters *ebpf.Map) asm.Instructions {
	insns := asm.Instructions{
		asm.Mov.Reg(asm.R6, asm.R1),
		asm.LoadMem(asm.R1, asm.R6, uringReq, asm.DWord),
		asm.StoreMem(asm.RFP, -16, asm.R1, asm.DWord),
		asm.LoadMapPtr(asm.R1, reqs.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -16),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.LoadMem(asm.R9, asm.R0, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, reqs.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -16),
		asm.FnMapDeleteElem.Call(),
		asm.LoadMem(asm.R8, asm.R6, uringRes, asm.Word),
		asm.LSh.Imm(asm.R8, 32),
		asm.ArSh.Imm(asm.R8, 32),
		asm.JSLE.Imm(asm.R8, 0, "out"),
	}
	insns = append(insns, addR8(counters)...)
	return append(insns, epilogue()...)
}
