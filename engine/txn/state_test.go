package txn

import (
	"math"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestInitNewIDThenFence(t *testing.T) {
	h := newHarness(t)
	r := h.init("a")
	if r.ProducerID != 1001 || r.ProducerEpoch != 0 {
		t.Fatalf("first init: %+v", r)
	}
	r2 := h.init("a") // a second producer with the same id fences the first
	if r2.ProducerID != r.ProducerID || r2.ProducerEpoch != 1 {
		t.Fatalf("second init: %+v", r2)
	}
	wantCode(t, "old epoch adds", h.c.AddPartitions("a", r.ProducerID, r.ProducerEpoch, []TopicPartition{tp0}), kerr.ProducerFenced.Code)
	wantCode(t, "wrong pid adds", h.c.AddPartitions("a", 5, r2.ProducerEpoch, []TopicPartition{tp0}), kerr.InvalidProducerIDMapping.Code)
	wantCode(t, "unknown id adds", h.c.AddPartitions("b", 5, 0, []TopicPartition{tp0}), kerr.InvalidProducerIDMapping.Code)
	if got := h.log.states("a"); !reflect.DeepEqual(got, []State{Empty, Empty}) {
		t.Fatalf("log: %v", got)
	}
}

func TestInvalidTimeout(t *testing.T) {
	h := newHarness(t)
	for _, ms := range []int32{0, -1, int32((DefaultMaxTimeout + time.Millisecond).Milliseconds())} {
		r := h.c.InitProducerID(InitRequest{TransactionalID: "a", TimeoutMs: ms, ProducerID: -1, ProducerEpoch: -1})
		wantCode(t, "timeout", r.ErrorCode, kerr.InvalidTransactionTimeout.Code)
	}
}

func TestCommit(t *testing.T) {
	h := newHarness(t)
	p := h.init("a")
	wantCode(t, "add", h.c.AddPartitions("a", p.ProducerID, p.ProducerEpoch, []TopicPartition{tp1, tp0}), 0)
	wantCode(t, "add again", h.c.AddPartitions("a", p.ProducerID, p.ProducerEpoch, []TopicPartition{tp0}), 0)
	d, _ := h.c.Describe("a")
	if d.State != Ongoing || d.StartMs != t0.UnixMilli() || !reflect.DeepEqual(d.Partitions, []TopicPartition{tp0, tp1}) {
		t.Fatalf("describe: %+v", d)
	}
	r := h.c.EndTxn(EndRequest{TransactionalID: "a", ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch, Commit: true})
	wantCode(t, "end", r.ErrorCode, 0)
	round := h.markers.take(t)
	want := MarkerRequest{TransactionalID: "a", ProducerID: p.ProducerID, ProducerEpoch: 0, CoordinatorEpoch: 7, Commit: true, Partitions: []TopicPartition{tp0, tp1}}
	if !reflect.DeepEqual(round.req, want) {
		t.Fatalf("markers %+v, want %+v", round.req, want)
	}
	// While the markers are out, the producer's next calls wait.
	wantCode(t, "add while committing", h.c.AddPartitions("a", p.ProducerID, p.ProducerEpoch, []TopicPartition{tp0}), kerr.ConcurrentTransactions.Code)
	round.done(nil)
	if got := h.log.states("a"); !reflect.DeepEqual(got, []State{Empty, Ongoing, PrepareCommit, CompleteCommit}) {
		t.Fatalf("log: %v", got)
	}
	d, _ = h.c.Describe("a")
	if d.State != CompleteCommit || len(d.Partitions) != 0 {
		t.Fatalf("describe: %+v", d)
	}
	// The next transaction begins at the same epoch (transactions version 1).
	wantCode(t, "next add", h.c.AddPartitions("a", p.ProducerID, p.ProducerEpoch, []TopicPartition{tp1}), 0)
	d, _ = h.c.Describe("a")
	if !reflect.DeepEqual(d.Partitions, []TopicPartition{tp1}) {
		t.Fatalf("next transaction: %+v", d)
	}
}

// TestDescribeListsPartitionsStillAwaitingMarkers: in a Prepare state
// DescribeTransactions lists the partitions whose marker is not written
// yet, as Kafka does, not every partition of the transaction.
func TestDescribeListsPartitionsStillAwaitingMarkers(t *testing.T) {
	h := newHarness(t)
	p := h.init("a")
	wantCode(t, "add", h.c.AddPartitions("a", p.ProducerID, p.ProducerEpoch, []TopicPartition{tp1, tp0}), 0)
	wantCode(t, "end", h.c.EndTxn(EndRequest{TransactionalID: "a", ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch, Commit: true}).ErrorCode, 0)
	describe := func(name string, state State, want []TopicPartition) {
		t.Helper()
		d, code := h.c.Describe("a")
		if code != 0 || d.State != state || !reflect.DeepEqual(d.Partitions, want) {
			t.Fatalf("%s: %+v %s, want %v %v", name, d, codeName(code), state, want)
		}
	}
	round := h.markers.take(t)
	describe("markers out", PrepareCommit, []TopicPartition{tp0, tp1})
	round.done([]TopicPartition{tp1}) // tp0's marker is written, tp1's leader was away
	describe("one written", PrepareCommit, []TopicPartition{tp1})
	h.clock.Advance(DefaultMarkerRetryBackoff)
	h.markers.take(t).done(nil)
	describe("complete", CompleteCommit, []TopicPartition{})
}

func TestConcurrentEndTxnRetries(t *testing.T) {
	h := newHarness(t)
	p := h.init("a")
	wantCode(t, "add", h.c.AddPartitions("a", p.ProducerID, p.ProducerEpoch, []TopicPartition{tp0}), 0)
	end := EndRequest{TransactionalID: "a", ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch, Commit: true}
	codes := make([]int16, 8)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Add(1)
		go func() { defer wg.Done(); codes[i] = h.c.EndTxn(end).ErrorCode }()
	}
	wg.Wait()
	ok := 0
	for _, c := range codes {
		switch c {
		case 0:
			ok++
		case kerr.ConcurrentTransactions.Code:
		default:
			t.Fatalf("concurrent EndTxn answered %s", codeName(c))
		}
	}
	if ok != 1 || h.markers.len() != 1 {
		t.Fatalf("%d EndTxn succeeded, %d marker rounds; want one of each", ok, h.markers.len())
	}
	h.markers.take(t).done(nil)
	wantCode(t, "retry after completion", h.c.EndTxn(end).ErrorCode, 0)
	end.Commit = false
	wantCode(t, "abort after commit", h.c.EndTxn(end).ErrorCode, kerr.InvalidTxnState.Code)
	if h.markers.len() != 0 {
		t.Fatal("a retry sent markers again")
	}
	if got := h.log.states("a"); !reflect.DeepEqual(got, []State{Empty, Ongoing, PrepareCommit, CompleteCommit}) {
		t.Fatalf("log: %v", got)
	}
}

func TestEndTxnWithNothingOpen(t *testing.T) {
	h := newHarness(t)
	p := h.init("a")
	r := h.c.EndTxn(EndRequest{TransactionalID: "a", ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch, Commit: true})
	wantCode(t, "commit of Empty", r.ErrorCode, kerr.InvalidTxnState.Code)
}

func TestInitFencesOpenTransaction(t *testing.T) {
	h := newHarness(t)
	old := h.init("a")
	wantCode(t, "add", h.c.AddPartitions("a", old.ProducerID, old.ProducerEpoch, []TopicPartition{tp0}), 0)
	r := h.c.InitProducerID(InitRequest{TransactionalID: "a", TimeoutMs: 60000, ProducerID: -1, ProducerEpoch: -1})
	wantCode(t, "init over an open transaction", r.ErrorCode, kerr.ConcurrentTransactions.Code)
	round := h.markers.take(t)
	if round.req.Commit || round.req.ProducerEpoch != 1 {
		t.Fatalf("fencing markers: %+v; want an abort at epoch 1", round.req)
	}
	end := h.c.EndTxn(EndRequest{TransactionalID: "a", ProducerID: old.ProducerID, ProducerEpoch: old.ProducerEpoch, Commit: true})
	wantCode(t, "zombie commit", end.ErrorCode, kerr.ProducerFenced.Code)
	r = h.c.InitProducerID(InitRequest{TransactionalID: "a", TimeoutMs: 60000, ProducerID: -1, ProducerEpoch: -1})
	wantCode(t, "init while aborting", r.ErrorCode, kerr.ConcurrentTransactions.Code)
	round.done(nil)
	r = h.init("a")
	if r.ProducerEpoch != 2 {
		t.Fatalf("init after the abort: %+v, want epoch 2", r)
	}
	if got := h.log.states("a"); !reflect.DeepEqual(got, []State{Empty, Ongoing, PrepareAbort, CompleteAbort, Empty}) {
		t.Fatalf("log: %v", got)
	}
}

func TestKIP360Recovery(t *testing.T) {
	h := newHarness(t)
	p := h.init("a")
	req := InitRequest{TransactionalID: "a", TimeoutMs: 60000, ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch}
	r := h.c.InitProducerID(req)
	if r.ErrorCode != 0 || r.ProducerID != p.ProducerID || r.ProducerEpoch != 1 {
		t.Fatalf("bump: %+v", r)
	}
	r = h.c.InitProducerID(req) // the answer was lost: the retry gets the same epoch
	if r.ErrorCode != 0 || r.ProducerEpoch != 1 {
		t.Fatalf("retry: %+v", r)
	}
	req.ProducerEpoch = 9
	wantCode(t, "unknown epoch", h.c.InitProducerID(req).ErrorCode, kerr.ProducerFenced.Code)
	req.ProducerID, req.ProducerEpoch = 4242, 1
	wantCode(t, "unknown producer id", h.c.InitProducerID(req).ErrorCode, kerr.ProducerFenced.Code)
}

func TestEpochExhaustionRotatesProducerID(t *testing.T) {
	h := newHarness(t)
	p := h.init("a")
	h.c.mu.Lock()
	h.c.mu.txns["a"].epoch = math.MaxInt16 - 1
	h.c.mu.Unlock()
	r := h.init("a")
	if r.ProducerID == p.ProducerID || r.ProducerEpoch != 0 {
		t.Fatalf("after the last epoch: %+v, want a new producer id at epoch 0", r)
	}
	// The old producer's retry, knowing only its exhausted epoch, is
	// answered with the new id (KIP-360).
	retry := h.c.InitProducerID(InitRequest{TransactionalID: "a", TimeoutMs: 60000, ProducerID: p.ProducerID, ProducerEpoch: math.MaxInt16 - 1})
	if retry.ErrorCode != 0 || retry.ProducerID != r.ProducerID {
		t.Fatalf("retry after rotation: %+v", retry)
	}
}

func TestVerify(t *testing.T) {
	h := newHarness(t)
	p := h.init("a")
	codes, code := h.c.Verify("a", p.ProducerID, p.ProducerEpoch, []TopicPartition{tp0})
	if code != 0 || codes[0] != kerr.InvalidTxnState.Code {
		t.Fatalf("verify before add: %v %v", codes, code)
	}
	wantCode(t, "add", h.c.AddPartitions("a", p.ProducerID, p.ProducerEpoch, []TopicPartition{tp0}), 0)
	codes, code = h.c.Verify("a", p.ProducerID, p.ProducerEpoch, []TopicPartition{tp0, tp1})
	if code != 0 || codes[0] != 0 || codes[1] != kerr.InvalidTxnState.Code {
		t.Fatalf("verify after add: %v %v", codes, code)
	}
	_, code = h.c.Verify("a", p.ProducerID, p.ProducerEpoch+1, []TopicPartition{tp0})
	wantCode(t, "verify other epoch", code, kerr.ProducerFenced.Code)
	_, code = h.c.Verify("nope", p.ProducerID, p.ProducerEpoch, []TopicPartition{tp0})
	wantCode(t, "verify unknown id", code, kerr.InvalidProducerIDMapping.Code)
}

func TestTimedOutTransactionAborted(t *testing.T) {
	h := newHarness(t)
	p := h.c.InitProducerID(InitRequest{TransactionalID: "a", TimeoutMs: 1000, ProducerID: -1, ProducerEpoch: -1})
	wantCode(t, "add", h.c.AddPartitions("a", p.ProducerID, p.ProducerEpoch, []TopicPartition{tp0}), 0)
	h.clock.Advance(DefaultAbortCheckInterval)
	round := h.markers.take(t)
	if round.req.Commit || round.req.ProducerEpoch != p.ProducerEpoch+1 {
		t.Fatalf("timeout markers: %+v", round.req)
	}
	round.done(nil)
	end := h.c.EndTxn(EndRequest{TransactionalID: "a", ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch, Commit: true})
	wantCode(t, "commit after timeout", end.ErrorCode, kerr.ProducerFenced.Code)
	d, _ := h.c.Describe("a")
	if d.State != CompleteAbort {
		t.Fatalf("state %v", d.State)
	}
}

func TestTransactionNotTimedOutEarly(t *testing.T) {
	h := newHarness(t)
	p := h.init("a") // 60 s timeout
	wantCode(t, "add", h.c.AddPartitions("a", p.ProducerID, p.ProducerEpoch, []TopicPartition{tp0}), 0)
	h.clock.Advance(50 * time.Second)
	if h.markers.len() != 0 {
		t.Fatal("aborted before its timeout")
	}
	h.clock.Advance(10 * time.Second)
	if h.markers.len() != 1 {
		t.Fatal("not aborted after its timeout")
	}
}

func TestTransactionalIDExpires(t *testing.T) {
	h := newHarness(t)
	h.init("a")
	h.clock.Advance(DefaultIDExpiration - time.Hour)
	if _, code := h.c.Describe("a"); code != 0 {
		t.Fatalf("expired early: %s", codeName(code))
	}
	h.clock.Advance(2 * time.Hour)
	_, code := h.c.Describe("a")
	wantCode(t, "describe expired", code, kerr.TransactionalIDNotFound.Code)
	if got := h.log.states("a"); !reflect.DeepEqual(got, []State{Empty, -1}) {
		t.Fatalf("log: %v", got)
	}
	// Reloaded, the tombstone keeps it gone.
	h.c.UnloadPartition(0)
	if n, err := h.c.LoadPartition(0, 8, h.log); err != nil || n != 0 {
		t.Fatalf("reload: %d %v", n, err)
	}
}

func TestCoordinatorMovesMidCommit(t *testing.T) {
	h := newHarness(t)
	p := h.init("a")
	wantCode(t, "add", h.c.AddPartitions("a", p.ProducerID, p.ProducerEpoch, []TopicPartition{tp0, tp1}), 0)
	wantCode(t, "end", h.c.EndTxn(EndRequest{TransactionalID: "a", ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch, Commit: true}).ErrorCode, 0)
	stale := h.markers.take(t)
	h.c.UnloadPartition(0) // leadership moved before the markers finished

	c2 := h.newCoordinator()
	defer c2.Close()
	if _, err := c2.LoadPartition(0, 8, h.log); err != nil {
		t.Fatal(err)
	}
	resumed := h.markers.take(t)
	if !resumed.req.Commit || resumed.req.CoordinatorEpoch != 8 || !reflect.DeepEqual(resumed.req.Partitions, []TopicPartition{tp0, tp1}) {
		t.Fatalf("resumed markers: %+v", resumed.req)
	}
	stale.done(nil) // the old coordinator's answer comes late: ignored
	if got := h.log.states("a"); !reflect.DeepEqual(got, []State{Empty, Ongoing, PrepareCommit}) {
		t.Fatalf("stale completion wrote: %v", got)
	}
	resumed.done([]TopicPartition{tp1}) // one leader was not there yet
	h.clock.Advance(DefaultMarkerRetryBackoff)
	retry := h.markers.take(t)
	if !reflect.DeepEqual(retry.req.Partitions, []TopicPartition{tp1}) {
		t.Fatalf("retried %v", retry.req.Partitions)
	}
	retry.done(nil)
	d, code := c2.Describe("a")
	if code != 0 || d.State != CompleteCommit {
		t.Fatalf("after the move: %+v %s", d, codeName(code))
	}
	r := c2.EndTxn(EndRequest{TransactionalID: "a", ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch, Commit: true})
	wantCode(t, "the client's retry on the new coordinator", r.ErrorCode, 0)
	wantCode(t, "old coordinator", h.c.AddPartitions("a", p.ProducerID, p.ProducerEpoch, []TopicPartition{tp0}), kerr.NotCoordinator.Code)
}

func TestTransactionsVersion2BumpsEpochPerTransaction(t *testing.T) {
	h := newHarness(t)
	p := h.init("a")
	wantCode(t, "add", h.c.AddPartitions("a", p.ProducerID, p.ProducerEpoch, []TopicPartition{tp0}), 0)
	end := EndRequest{TransactionalID: "a", ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch, Commit: true, TV2: true}
	r := h.c.EndTxn(end)
	if r.ErrorCode != 0 || r.ProducerID != p.ProducerID || r.ProducerEpoch != p.ProducerEpoch+1 {
		t.Fatalf("end: %+v", r)
	}
	round := h.markers.take(t)
	if round.req.ProducerEpoch != p.ProducerEpoch+1 {
		t.Fatalf("markers at epoch %d, want the bumped one", round.req.ProducerEpoch)
	}
	wantCode(t, "retry while completing", h.c.EndTxn(end).ErrorCode, kerr.ConcurrentTransactions.Code)
	round.done(nil)
	r = h.c.EndTxn(end) // the answer was lost: the retry at the old epoch succeeds
	if r.ErrorCode != 0 || r.ProducerEpoch != p.ProducerEpoch+1 {
		t.Fatalf("retry: %+v", r)
	}
	// The zombie's next transaction at the old epoch is fenced.
	wantCode(t, "old epoch", h.c.AddPartitions("a", p.ProducerID, p.ProducerEpoch, []TopicPartition{tp0}), kerr.ProducerFenced.Code)
	// An abort with nothing open bumps again.
	r = h.c.EndTxn(EndRequest{TransactionalID: "a", ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch + 1, TV2: true})
	if r.ErrorCode != 0 || r.ProducerEpoch != p.ProducerEpoch+2 {
		t.Fatalf("empty abort: %+v", r)
	}
	if d, _ := h.c.Describe("a"); h.markers.len() != 0 || d.State != CompleteAbort {
		t.Fatalf("empty abort: %d marker rounds, state %v; want none, completed at once", h.markers.len(), d.State)
	}
}

func TestTransactionsVersion2RotatesAtLastEpoch(t *testing.T) {
	h := newHarness(t)
	p := h.init("a")
	h.c.mu.Lock()
	h.c.mu.txns["a"].epoch = math.MaxInt16 - 1
	h.c.mu.Unlock()
	wantCode(t, "add", h.c.AddPartitions("a", p.ProducerID, math.MaxInt16-1, []TopicPartition{tp0}), 0)
	r := h.c.EndTxn(EndRequest{TransactionalID: "a", ProducerID: p.ProducerID, ProducerEpoch: math.MaxInt16 - 1, Commit: true, TV2: true})
	if r.ErrorCode != 0 || r.ProducerID == p.ProducerID || r.ProducerEpoch != 0 {
		t.Fatalf("end at the last epoch: %+v", r)
	}
	round := h.markers.take(t)
	if round.req.ProducerID != p.ProducerID || round.req.ProducerEpoch != math.MaxInt16 {
		t.Fatalf("markers: %+v, want the old id at the last epoch", round.req)
	}
	round.done(nil)
	wantCode(t, "new id adds", h.c.AddPartitions("a", r.ProducerID, 0, []TopicPartition{tp0}), 0)
}

// TestFencedAtLastEpochMarkersKeepTheProducerID: an open transaction
// aborted at the last usable epoch — by another instance's InitProducerId
// or by its timeout — gets its markers under the producer id its records
// carry, at the largest epoch, and the id is replaced only once the abort
// is complete. Replacing it first (as a plain bump does) sent the markers
// under the new id, and the records' open transaction never ended: a
// hanging transaction holding the last stable offset back for good.
func TestFencedAtLastEpochMarkersKeepTheProducerID(t *testing.T) {
	for _, how := range []string{"init", "timeout"} {
		t.Run(how, func(t *testing.T) {
			h := newHarness(t)
			p := h.init("a")
			h.c.mu.Lock()
			h.c.mu.txns["a"].epoch = math.MaxInt16 - 1
			h.c.mu.Unlock()
			wantCode(t, "add", h.c.AddPartitions("a", p.ProducerID, math.MaxInt16-1, []TopicPartition{tp0}), 0)
			if how == "init" {
				r := h.c.InitProducerID(InitRequest{TransactionalID: "a", TimeoutMs: 60000, ProducerID: -1, ProducerEpoch: -1})
				wantCode(t, "init over an open transaction", r.ErrorCode, kerr.ConcurrentTransactions.Code)
			} else {
				h.clock.Advance(2 * time.Minute)
				h.c.AbortTimedOut()
			}
			round := h.markers.take(t)
			if round.req.Commit || round.req.ProducerID != p.ProducerID || round.req.ProducerEpoch != math.MaxInt16 {
				t.Fatalf("markers: %+v; want an abort under the old id %d at the largest epoch", round.req, p.ProducerID)
			}
			round.done(nil)
			r := h.init("a")
			if r.ErrorCode != 0 || r.ProducerID == p.ProducerID {
				t.Fatalf("init after the abort: %+v; want a new producer id", r)
			}
			wantCode(t, "the new id adds", h.c.AddPartitions("a", r.ProducerID, r.ProducerEpoch, []TopicPartition{tp0}), 0)
		})
	}
}

// TestEndTxnDecidesTheVersion: a transaction an implicit add marked
// version 2 but ended by a version 1 EndTxn gets no epoch bump, and its
// markers say version 1 (leaders refuse a version 2 marker at the
// records' epoch; TestTxnV1EndAfterV2OffsetCommit is the same end to end).
func TestEndTxnDecidesTheVersion(t *testing.T) {
	h := newHarness(t)
	p := h.init("a")
	wantCode(t, "implicit add", h.c.AddPartitionsImplicitly("a", p.ProducerID, p.ProducerEpoch, []TopicPartition{tp0}), 0)
	r := h.c.EndTxn(EndRequest{TransactionalID: "a", ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch, Commit: true})
	wantCode(t, "end v1", r.ErrorCode, 0)
	round := h.markers.take(t)
	if round.req.ProducerEpoch != p.ProducerEpoch || round.req.TransactionVersion != 0 {
		t.Fatalf("markers: %+v; want version 0 at the records' epoch %d", round.req, p.ProducerEpoch)
	}
	round.done(nil)
}

func TestLoadRestoresState(t *testing.T) {
	h := newHarness(t)
	p := h.init("a")
	wantCode(t, "add", h.c.AddPartitions("a", p.ProducerID, p.ProducerEpoch, []TopicPartition{tp0}), 0)
	h.init("b")
	h.c.UnloadPartition(0)
	wantCode(t, "unloaded", h.c.AddPartitions("a", p.ProducerID, p.ProducerEpoch, []TopicPartition{tp1}), kerr.NotCoordinator.Code)
	if n, err := h.c.LoadPartition(0, 9, h.log); err != nil || n != 2 {
		t.Fatalf("reload: %d %v", n, err)
	}
	d, _ := h.c.Describe("a")
	if d.State != Ongoing || d.ProducerID != p.ProducerID || !reflect.DeepEqual(d.Partitions, []TopicPartition{tp0}) {
		t.Fatalf("reloaded: %+v", d)
	}
	wantCode(t, "add after reload", h.c.AddPartitions("a", p.ProducerID, p.ProducerEpoch, []TopicPartition{tp1}), 0)
}

func TestListAndDescribe(t *testing.T) {
	h := newHarness(t)
	a, b := h.init("a"), h.init("b")
	wantCode(t, "add", h.c.AddPartitions("a", a.ProducerID, a.ProducerEpoch, []TopicPartition{tp0}), 0)
	h.clock.Advance(5 * time.Second)
	if got := h.c.List(ListFilter{}); len(got) != 2 || got[0].TransactionalID != "a" || got[1].ProducerID != b.ProducerID {
		t.Fatalf("list: %+v", got)
	}
	if got := h.c.List(ListFilter{States: []State{Ongoing}}); len(got) != 1 || got[0].TransactionalID != "a" {
		t.Fatalf("list ongoing: %+v", got)
	}
	if got := h.c.List(ListFilter{ProducerIDs: []int64{b.ProducerID}}); len(got) != 1 || got[0].TransactionalID != "b" {
		t.Fatalf("list by producer: %+v", got)
	}
	if got := h.c.List(ListFilter{MinDurationMs: 6000}); len(got) != 0 {
		t.Fatalf("list longer than 6 s: %+v", got)
	}
	if got := h.c.List(ListFilter{MinDurationMs: 5000}); len(got) != 1 {
		t.Fatalf("list longer than 5 s: %+v", got)
	}
	if _, code := h.c.Describe("zzz"); code != kerr.TransactionalIDNotFound.Code {
		t.Fatalf("describe unknown: %s", codeName(code))
	}
	if s, ok := ParseState("PrepareEpochFence"); !ok || s != PrepareEpochFence || s.String() != "PrepareEpochFence" {
		t.Fatal("state names")
	}
}

func TestFailedWriteChangesNothing(t *testing.T) {
	h := newHarness(t)
	p := h.init("a")
	h.log.fail = errWrite
	wantCode(t, "add with a broken log", h.c.AddPartitions("a", p.ProducerID, p.ProducerEpoch, []TopicPartition{tp0}), kerr.NotCoordinator.Code)
	h.log.fail = nil
	d, _ := h.c.Describe("a")
	if d.State != Empty || len(d.Partitions) != 0 {
		t.Fatalf("after the failed write: %+v", d)
	}
	wantCode(t, "add again", h.c.AddPartitions("a", p.ProducerID, p.ProducerEpoch, []TopicPartition{tp0}), 0)
}

func TestImplicitAddRecordsTransactionsVersion2(t *testing.T) {
	h := newHarness(t)
	p := h.init("a")
	wantCode(t, "implicit add", h.c.AddPartitionsImplicitly("a", p.ProducerID, p.ProducerEpoch, []TopicPartition{tp0}), 0)
	var v kmsg.TxnMetadataValue
	recs := h.log.records()
	if err := v.ReadFrom(recs[len(recs)-1].Value); err != nil || v.Version != 1 || v.ClientTransactionVersion != 2 {
		t.Fatalf("record after an implicit add: %+v %v", v, err)
	}
	wantCode(t, "implicit add again", h.c.AddPartitionsImplicitly("a", p.ProducerID, p.ProducerEpoch, []TopicPartition{tp0}), 0)
	if n := len(h.log.records()); n != len(recs) {
		t.Fatal("adding a partition already in the transaction wrote a record")
	}
}
