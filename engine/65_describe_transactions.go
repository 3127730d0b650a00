package engine

// DescribeTransactions (key 65), version 0.
//
// Describes transactional ids coordinated by this broker: state (Kafka's
// names: Empty, Ongoing, PrepareCommit, ...), timeout, start time (-1 with
// no transaction open), producer id and epoch, and the partitions of the
// open transaction (in a Prepare state, those whose marker is not written
// yet, as Kafka lists them). Per id: NOT_COORDINATOR when another broker
// coordinates it, TRANSACTIONAL_ID_NOT_FOUND when unknown. Kafka's
// kafka-transactions describe sends it.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.DescribeTransactions, 0, 0, (*Broker).handleDescribeTransactions) }

func (b *Broker) handleDescribeTransactions(r *Request) {
	req := r.Msg.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		d, code := b.txns.Describe(id)
		st.ErrorCode = code
		if code == 0 {
			st.State, st.TimeoutMillis, st.StartTimestamp = d.State.String(), d.TimeoutMs, d.StartMs
			st.ProducerID, st.ProducerEpoch = d.ProducerID, d.ProducerEpoch
			for _, tp := range d.Partitions {
				if n := len(st.Topics); n == 0 || st.Topics[n-1].Topic != tp.Topic {
					st.Topics = append(st.Topics, kmsg.DescribeTransactionsResponseTransactionStateTopic{Topic: tp.Topic})
				}
				t := &st.Topics[len(st.Topics)-1]
				t.Partitions = append(t.Partitions, tp.Partition)
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	r.Respond(resp)
}
