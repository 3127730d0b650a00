package engine

import "github.com/sluice-broker/sluice/storage"

// Hooks for the transaction tests of package engine_test: until the
// transaction coordinator serves transactional producers, they append
// transactional batches and markers through the partition directly.

// AppendBatchForTest appends one record set to p as a produce with acks=1
// would, and returns its outcome.
func AppendBatchForTest(p *Partition, batch []byte) (storage.AppendResult, error) {
	e := []storage.AppendEntry{{Records: batch}}
	if err := p.append(e, 1, 0); err != nil {
		return storage.AppendResult{}, err
	}
	return e[0].Result, e[0].Err
}

// WriteTxnMarkerForTest is p.writeTxnMarker.
func WriteTxnMarkerForTest(p *Partition, pid int64, epoch int16, coordinatorEpoch int32, commit bool) error {
	return p.writeTxnMarker(pid, epoch, coordinatorEpoch, commit, 0, 0)
}
