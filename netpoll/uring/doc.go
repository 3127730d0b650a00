// Package uring is Sluice's own io_uring binding, on golang.org/x/sys/unix
// alone. No io_uring Go module is served to this project, so we own this one;
// it is small on purpose and covers exactly what the network layer needs.
//
// # What is here
//
//   - Ring setup (io_uring_setup) and the three mappings it returns: the SQ
//     ring, the CQ ring (one mapping when the kernel has
//     IORING_FEAT_SINGLE_MMAP) and the SQE array.
//   - Submission and completion with the kernel's memory-ordering rules:
//     the application writes SQEs, then publishes them with a release store
//     of the SQ tail; it reads the CQ tail with an acquire load before
//     reading CQEs, and gives the slots back with a release store of the CQ
//     head. Go's sync/atomic operations are sequentially consistent, which
//     is stronger than needed, and the compiler never moves plain memory
//     accesses across them.
//   - The operations the broker uses, as Prep methods on *SQE: accept
//     (multishot), recv (optionally from a provided-buffer ring), send,
//     sendmsg, writev, splice, poll, read, timeout, link timeout, cancel,
//     close, shutdown and nop.
//   - Provided buffer rings (IORING_REGISTER_PBUF_RING, Linux 5.19) in
//     BufRing, and IORING_REGISTER_PROBE in Probe, so callers can test each
//     opcode before relying on it and fall back cleanly.
//
// # Memory handed to the kernel
//
// An SQE carries raw addresses (buffers, iovecs, msghdrs, timespecs). The Go
// garbage collector does not move heap objects, but goroutine stacks move,
// so anything an SQE points to must live on the heap (or in mmap'd memory)
// and stay reachable until its completion arrives. Callers keep such
// memory in long-lived structs; this package never allocates on the
// submission or completion path.
//
// # Layout of the shared rings
//
//	SQ ring:  head  tail  mask  entries  flags  dropped  array[entries]u32
//	           ^kernel      (read-only)          ^kernel  index into SQEs
//	CQ ring:  head  tail  mask  entries  overflow  cqes[entries]CQE
//	           ^app  ^kernel
//	SQEs:     [entries]SQE (64 bytes each)
//
// The application owns the SQ tail and the CQ head; the kernel owns the SQ
// head and the CQ tail. array[i] = i is written once at setup, so SQE slot
// and ring position always agree.
//
// A Ring is not safe for concurrent use: one goroutine (locked to its OS
// thread when the ring is created with IORING_SETUP_SINGLE_ISSUER) submits
// and reaps.
package uring
