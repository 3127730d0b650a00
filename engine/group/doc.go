// Package group is the group coordinator: classic groups (JoinGroup /
// SyncGroup / Heartbeat / LeaveGroup), KIP-848 consumer-protocol groups
// (ConsumerGroupHeartbeat, consumer*.go, assignors in assign.go) and
// committed offsets.
//
// It is a state machine with its I/O at the edges. Time comes from a Clock
// (a FakeClock in tests), its log is a PartitionLog per partition of
// __consumer_offsets, and a request that must wait (a JoinGroup until the
// join phase ends, a SyncGroup until the leader's assignment) is parked in
// its group as a completion callback that whichever call or timer ends the
// phase invokes. The engine's handlers translate Kafka requests into calls
// of a Coordinator and its results back into responses; this package knows
// neither the engine nor the network.
//
// # Lifecycle of coordinator state
//
// Every group belongs to one partition of __consumer_offsets, the one
// Kafka picks: abs(groupId.hashCode()) % partitions (PartitionFor). The
// coordinator serves a group only while it has that partition loaded,
// following the partition's leadership (as Redpanda's group_manager and
// Kafka's GroupMetadataManager do):
//
//   - attached: LoadPartition(p, log) is called when this broker becomes
//     the leader of partition p (at start, for a single node, every
//     partition). Until it returns, requests for p's groups answer
//     NOT_COORDINATOR.
//   - recovered: LoadPartition replays p's records in log order, the last
//     record of each key winning (what compaction would leave), and then
//     owns the groups that hash to p: a group whose last metadata record
//     has members comes back Stable with them, each session starting now,
//     so consumers that keep heartbeating do not rebalance; a group with
//     only offsets comes back Empty.
//   - dropped: UnloadPartition(p) when leadership moves away (Close for
//     every partition at shutdown). p's groups are forgotten, their timers
//     stopped and their parked JoinGroup/SyncGroup answered
//     NOT_COORDINATOR so that clients look for the coordinator again.
//     Nothing is lost: whatever was acknowledged is already in the log.
//
// Files:
//
//	coordinator.go  partition ownership, group lookup, retention sweep
//	state.go        one group's state machine (phases, timers, replies)
//	join.go         JoinGroup, SyncGroup, Heartbeat, LeaveGroup
//	offsets.go      offset commit, fetch, delete and expiry
//	admin.go        DescribeGroups, ListGroups, DeleteGroups
//	log.go          records of __consumer_offsets, writing them
//	load.go         LoadPartition's replay
//	clock.go        Clock, the real one and a fake one
//	consumer*.go    consumer-protocol groups: heartbeat, reconciliation,
//	                lifecycle and timers, records (keys 3-8), replay,
//	                describe, migration to and from classic groups
//	assign.go       the uniform and range server-side assignors
package group
