package engine

// ListTransactions (key 66), versions 0-2.
//
// Lists the transactional ids this broker coordinates (admin clients ask
// every broker and merge), filtered by state names, producer ids, v1+'s
// minimum open duration (DurationFilterMillis, KIP-994) and v2+'s
// transactional id pattern (a regular expression, KIP-1152; RE2 syntax,
// which agrees with Java's for the patterns tools send). Unknown state
// names are returned in UnknownStateFilters and match nothing; an invalid
// pattern is INVALID_REQUEST.

import (
	"regexp"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/txn"
)

func init() { register(kmsg.ListTransactions, 0, 2, (*Broker).handleListTransactions) }

func (b *Broker) handleListTransactions(r *Request) {
	req := r.Msg.(*kmsg.ListTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	f := txn.ListFilter{ProducerIDs: req.ProducerIDFilters}
	if r.Version >= 1 {
		f.MinDurationMs = req.DurationFilterMillis
	}
	for _, name := range req.StateFilters {
		if s, ok := txn.ParseState(name); ok {
			f.States = append(f.States, s)
		} else {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, name)
		}
	}
	var pattern *regexp.Regexp
	if r.Version >= 2 && req.TransactionalIDPattern != nil && *req.TransactionalIDPattern != "" {
		var err error
		if pattern, err = regexp.Compile("^(?:" + *req.TransactionalIDPattern + ")$"); err != nil {
			resp.ErrorCode = kerr.InvalidRequest.Code
			r.Respond(resp)
			return
		}
	}
	if len(resp.UnknownStateFilters) > 0 && len(f.States) == 0 {
		r.Respond(resp) // only unknown states: nothing matches
		return
	}
	for _, l := range b.txns.List(f) {
		if pattern != nil && !pattern.MatchString(l.TransactionalID) {
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = l.TransactionalID, l.ProducerID, l.State.String()
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	r.Respond(resp)
}
