package engine

import "github.com/sluice-broker/sluice/storage"

// Hooks for the external tests (package engine_test) into Partition's
// unexported state.

// PartitionLog is p's log, for tests that flush or compact it directly.
func PartitionLog(p *Partition) *storage.Log { return p.log }

// BecomeLeader makes this broker p's leader at epoch, as a leader change
// of the replication work will.
func BecomeLeader(p *Partition, epoch int32) { p.becomeLeader(epoch) }
