package engine

import (
	"github.com/sluice-broker/sluice/metadata"
	"github.com/sluice-broker/sluice/storage"
)

// Hooks for the external tests (package engine_test) into Partition's
// unexported state.

// PartitionLog is p's log, for tests that flush or compact it directly.
func PartitionLog(p *Partition) *storage.Log { return p.log }

// BecomeLeader makes this broker p's leader at epoch, as a leader change
// of the replication work will.
func BecomeLeader(p *Partition, epoch int32) { p.becomeLeader(epoch) }

// CommitRecords commits metadata records to b's own store and applies the
// image they lead to, as the cluster's metadata log will: the replication
// tests stand in for the controller with it (the real one arrives with the
// cluster work).
func CommitRecords(b *Broker, recs ...metadata.Record) error {
	b.meta.mu.Lock()
	defer b.meta.mu.Unlock()
	return b.commitLocked(recs...)
}

// SetTestPrincipal makes every connection's principal "User:" + the
// client id of its requests (User:ANONYMOUS without one), for tests of
// the authorizer before listeners authenticate; the cleanup undoes it.
func SetTestPrincipal(t interface{ Cleanup(func()) }) {
	testPrincipal = func(clientID string) string {
		if clientID == "" {
			return AnonymousPrincipal
		}
		return "User:" + clientID
	}
	t.Cleanup(func() { testPrincipal = nil })
}
