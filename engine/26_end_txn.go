package engine

// EndTxn (key 26), versions 0-5.
//
// Commits or aborts the transactional id's open transaction: the
// coordinator writes PrepareCommit/PrepareAbort, which decides it; the
// markers on every partition of the transaction and the Complete record
// follow (txn_markers.go). Kafka answers at the Prepare record and lets
// the producer's next call find CONCURRENT_TRANSACTIONS until the markers
// are written; Sluice answers once they are (up to endTxnWait), which
// spares the producer that backoff. A retry of an end already done answers
// success; ending the other way, or with nothing open, is
// INVALID_TXN_STATE. PRODUCER_FENCED from v2 (INVALID_PRODUCER_EPOCH
// before).
//
// v5 is transactions version 2 (KIP-890 part 2): the epoch goes up with
// every transaction (the markers carry the new one), the answer carries the
// producer id and epoch to use next, and an abort with nothing open is
// allowed. Clients use v5 only when the broker advertises the
// transaction.version feature at 2 (txns.go); transactions
// version 2 is what ApiVersions finalizes unless sluice.transaction.version
// is 1.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/txn"
)

func init() { register(kmsg.EndTxn, 0, 5, (*Broker).handleEndTxn) }

// endTxnWait bounds how long EndTxn waits for the transaction's markers.
const endTxnWait = 2 * time.Second

func (b *Broker) handleEndTxn(r *Request) {
	req := r.Msg.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	res := b.txns.EndTxn(txn.EndRequest{
		TransactionalID: req.TransactionalID, ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch,
		Commit: req.Commit, TV2: r.Version >= 5,
	})
	if res.Completed != nil {
		// Answer once the markers are written (bounded): the producer's
		// next transaction then does not find this one still completing
		// and back off on CONCURRENT_TRANSACTIONS. The outcome is decided
		// either way.
		select {
		case <-res.Completed:
		case <-time.After(endTxnWait):
		}
	}
	resp.ErrorCode = fencedCode(res.ErrorCode, r.Version, 2)
	resp.ProducerID, resp.ProducerEpoch = res.ProducerID, res.ProducerEpoch
	r.Respond(resp)
}
