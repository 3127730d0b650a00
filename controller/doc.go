// Package controller is the active controller's decisions: broker
// registration and liveness, leader elections, controlled shutdown,
// replica placement, ISR changes (AlterPartition) and preferred leader
// election, in KRaft's semantics (docs/cluster.md).
//
// It is a pure state machine, as etcd raft's core is: each event is a
// method call carrying the metadata image it is decided against and the
// time, and each returns the records to propose and the response to send
// once they commit. Nothing here does I/O, starts a goroutine or reads a
// clock, so every scenario is a table test that never sleeps.
//
// # State
//
// Everything durable is in the image (package metadata): brokers with
// their epoch, fenced and controlled-shutdown state; partitions with
// replicas, ISR, leader and epochs; configs. A Controller adds only soft
// state that a newly active controller rebuilds from nothing:
//
//   - sessions: per broker, when its session expires (last heartbeat +
//     broker.session.timeout.ms) and when its heartbeat connection closed.
//     A controller that becomes active gives every registered broker a
//     fresh session at its first Tick, as KRaft does, so a failover never
//     fences a broker that was heartbeating to the old controller — except
//     the brokers of voters whose process is known to be gone
//     (VotersLost: their raft connections were closed by their kernel),
//     which are treated as lost connections (voters.go).
//
// # Calling it
//
// The image passed to each call must include every record the controller
// proposed before (either wait for each batch to commit before the next
// call, or apply proposals to a speculative image as KRaft does): a
// decision against an image that lacks an earlier one would repeat it.
// The runner calls Tick(img, now) at NextTickMs() or later.
//
// # Invariants kept (Check states them)
//
// Every partition's leader is -1 or a registered broker that is unfenced
// and not shutting down; ISR ⊆ replicas; leader ∈ ISR; epochs never go
// back. A fenced broker leaves every ISR except one it would empty: there
// it stays as the last member, the partition has no leader, and a clean
// election waits for that broker (KIP-841).
package controller
