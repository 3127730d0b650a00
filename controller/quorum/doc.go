// Package quorum is the controller quorum's replicated log: etcd raft's
// consensus core (go.etcd.io/raft/v3 RawNode, used unchanged) with the
// storage and transport raft asks its user to write.
//
// Sluice replicates cluster metadata the way KRaft does — a log of typed
// records that every controller and broker applies to the same image — but
// the log's consensus is etcd raft, which etcd, CockroachDB and TiKV run,
// rather than a consensus of our own. What this package adds:
//
//   - DiskStorage: a write-ahead log of raft entries and hard state, plus
//     snapshots of the state machine, so a member restarted after SIGKILL
//     has exactly what it acknowledged (storage.go, the on-disk format).
//   - Node: the loop raft's documentation prescribes (persist the Ready,
//     send its messages, apply committed entries, Advance), written as a
//     step function that a single goroutine (Runner) or a test calls, with
//     time entering only as Tick calls, so scenarios are deterministic.
//   - Proposal tracking: a proposal carries its proposer and number, so
//     the proposing member answers its caller when the entry is applied.
//   - Transport: raft messages over TCP on the controller listener.
//
// raft runs with CheckQuorum and PreVote: a leader that loses contact with
// a majority steps down (so a partitioned controller stops deciding), and
// a member that was briefly cut off cannot force an election when it comes
// back (so a network hiccup does not flap leadership).
package quorum
