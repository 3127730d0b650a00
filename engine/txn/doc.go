// Package txn is the transaction coordinator: transactional ids, their
// producer ids and epochs, the partitions of each transaction, and the
// two-phase commit that ends one (a Prepare record, markers on every
// partition, a Complete record).
//
// Like engine/group it is a state machine with its I/O at the edges: time
// comes from a Clock (a FakeClock in tests), its state is written to a
// PartitionLog per partition of __transaction_state, and markers go out
// through a MarkerWriter the engine provides (in-process for partitions led
// here, WriteTxnMarkers to other brokers). Calls are plain functions that
// return Kafka error codes; the engine's handlers translate requests.
//
// # Lifecycle of coordinator state
//
// A transactional id belongs to partition abs(id.hashCode()) % partitions
// of __transaction_state, as in Kafka (PartitionFor). The coordinator
// serves it only while that partition is loaded here:
//
//   - LoadPartition(p, coordinatorEpoch, log) when this broker becomes its
//     leader; the epoch is the partition's leader epoch and goes on every
//     marker, so a partition refuses markers of a coordinator that lost
//     its place. The replay keeps the last record of each id (a tombstone
//     removes it). A transaction found in PrepareCommit or PrepareAbort has
//     its markers sent again and is then completed: a coordinator that
//     moves mid-commit finishes the commit on its new broker.
//   - UnloadPartition(p) when leadership moves away; its ids are dropped
//     and writes in flight are answered NOT_COORDINATOR. What was
//     acknowledged is already in the log.
//
// # One transaction
//
//	Empty ──AddPartitions──▶ Ongoing ──EndTxn──▶ PrepareCommit ──markers──▶ CompleteCommit
//	  ▲                         │                PrepareAbort  ──markers──▶ CompleteAbort
//	  └──────InitProducerId─────┴── (fence: epoch+1, abort) ───────────────────┘
//
// Every transition is written to the log before it takes effect; while a
// write (or a commit's markers) is in flight the id is pending and other
// calls for it answer CONCURRENT_TRANSACTIONS, which clients retry.
//
// Files:
//
//	coordinator.go  configuration, partition ownership, lookup
//	state.go        one transactional id's metadata and its transitions
//	ops.go          InitProducerId, AddPartitions, Verify, EndTxn
//	markers.go      the commit's second phase and its retries
//	expire.go       transaction timeouts and transactional.id expiration
//	admin.go        DescribeTransactions, ListTransactions
//	log.go          records of __transaction_state and the load replay
package txn
