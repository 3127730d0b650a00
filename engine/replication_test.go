package engine_test

// Replication across real in-process brokers (internal/testbroker): real
// listeners, real logs, real replica fetchers over TCP. The controller is
// played by testController, which keeps the metadata log the brokers
// would follow and delivers its records to each broker's own store (the
// real controller quorum arrives with the cluster work; its image reaches
// Partition.applyImage through the same partition manager path). Tests
// assert on state (ISR, log end offsets, high watermarks, bytes), polling
// where a fetcher must have made progress; none asserts a duration.

import (
	"bytes"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
	"github.com/sluice-broker/sluice/metadata"
)

// testController stands in for the controller: the metadata log, the
// partitions' leader and partition epochs, AlterPartition.
type testController struct {
	t       testing.TB
	brokers map[int32]*testbroker.Broker

	mu      sync.Mutex
	log     []metadata.Record
	applied map[int32]int  // records of log each broker's store has
	down    map[int32]bool // stopped brokers get nothing
	closed  bool           // the test is over: nothing more is committed
	parts   map[ctlKey]*ctlPart
	// alterRequests and alterCommits count AlterPartition requests and
	// the commits they made.
	alterRequests, alterCommits int
}

type ctlKey struct {
	topic     [16]byte
	partition int32
}

type ctlPart struct{ leaderEpoch, partitionEpoch int32 }

// startCluster starts n brokers with ids 1..n.
func startCluster(t testing.TB, n int, mutators ...func(*engine.Config)) *testController {
	c := &testController{t: t, brokers: map[int32]*testbroker.Broker{}, applied: map[int32]int{},
		down: map[int32]bool{}, parts: map[ctlKey]*ctlPart{}}
	for id := int32(1); id <= int32(n); id++ {
		muts := append([]func(*engine.Config){func(cfg *engine.Config) { cfg.NodeID = id }}, mutators...)
		tb := testbroker.Start(t, muts...)
		tb.Broker.SetClusterLink(c)
		c.brokers[id] = tb
	}
	// Cleanups run last-registered first: the controller stops delivering
	// before the brokers stop.
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.closed = true
	})
	return c
}

// BrokerAddr is the inter-broker address of a running broker.
func (c *testController) BrokerAddr(id int32) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	tb := c.brokers[id]
	if tb == nil || c.down[id] {
		return "", false
	}
	return tb.Addr, true
}

// AlterPartition commits ISR changes based on the current epochs, as the
// controller does (INVALID_UPDATE_VERSION / FENCED_LEADER_EPOCH per
// partition otherwise): the accepted ones as one commit, delivered once.
func (c *testController) AlterPartition(changes []engine.ISRChange) ([]error, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("controller stopped")
	}
	c.alterRequests++
	errs := make([]error, len(changes))
	var recs []metadata.Record
	for i, ch := range changes {
		p := c.parts[ctlKey{ch.TopicID, ch.Partition}]
		switch {
		case p == nil:
			errs[i] = kerr.UnknownTopicOrPartition
		case ch.LeaderEpoch != p.leaderEpoch:
			errs[i] = kerr.FencedLeaderEpoch
		case ch.PartitionEpoch != p.partitionEpoch:
			errs[i] = kerr.InvalidUpdateVersion
		default:
			recs = append(recs, metadata.PartitionChangeRecord{TopicID: ch.TopicID, Partition: ch.Partition,
				Leader: metadata.NoLeaderChange, ISR: slices.Clone(ch.ISR)})
		}
	}
	if len(recs) > 0 {
		c.alterCommits++
		c.appendLocked(recs...)
		c.deliverAllLocked()
	}
	return errs, nil
}

// alterCounts is how many AlterPartition requests came and how many
// commits they made.
func (c *testController) alterCounts() (requests, commits int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.alterRequests, c.alterCommits
}

// appendLocked adds records to the log and tracks the epochs they set.
func (c *testController) appendLocked(recs ...metadata.Record) {
	for _, r := range recs {
		switch r := r.(type) {
		case metadata.PartitionRecord:
			c.parts[ctlKey{r.TopicID, r.Partition}] = &ctlPart{r.LeaderEpoch, r.PartitionEpoch}
		case metadata.PartitionChangeRecord:
			p := c.parts[ctlKey{r.TopicID, r.Partition}]
			p.partitionEpoch++
			if r.Leader != metadata.NoLeaderChange {
				p.leaderEpoch++
			}
		}
		c.log = append(c.log, r)
	}
}

func (c *testController) deliverAllLocked() {
	for id := range c.brokers {
		c.deliverLocked(id)
	}
}

func (c *testController) deliverLocked(id int32) {
	if c.closed || c.down[id] || c.applied[id] == len(c.log) {
		return
	}
	if err := engine.CommitRecords(c.brokers[id].Broker, c.log[c.applied[id]:]...); err != nil {
		c.t.Errorf("broker %d: commit: %v", id, err)
	}
	c.applied[id] = len(c.log)
}

// commit appends records and delivers them to every running broker.
func (c *testController) commit(recs ...metadata.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.appendLocked(recs...)
	c.deliverAllLocked()
}

// commitOnly appends records without delivering them: brokers see them
// when deliver is called, one at a time (hand-built images that differ).
func (c *testController) commitOnly(recs ...metadata.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.appendLocked(recs...)
}

func (c *testController) deliver(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deliverLocked(id)
}

// createTopic creates a topic on every broker with the same id: every
// partition on replicas, led by replicas[0] at epoch 0, all in sync.
func (c *testController) createTopic(name string, partitions int32, replicas []int32, configs map[string]string) [16]byte {
	return c.createTopicOn(name, partitions, replicas, nil, configs)
}

// createTopicOn is createTopic delivering to the brokers in the order
// given (then to the rest).
func (c *testController) createTopicOn(name string, partitions int32, replicas []int32, order []int32, configs map[string]string) [16]byte {
	id := [16]byte{1, byte(len(name)), name[0], name[len(name)-1]}
	recs := []metadata.Record{metadata.TopicRecord{Name: name, TopicID: id}}
	for i := range partitions {
		recs = append(recs, metadata.PartitionRecord{TopicID: id, Partition: i, Replicas: replicas,
			ISR: replicas, Leader: replicas[0]})
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range configs {
			if !yield(k) {
				return
			}
		}
	}) {
		v := configs[k]
		recs = append(recs, metadata.ConfigRecord{ResourceType: metadata.ResourceTopic, ResourceName: name, Name: k, Value: &v})
	}
	c.commitOnly(recs...)
	for _, b := range order {
		c.deliver(b)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deliverAllLocked()
	return id
}

// stop stops broker id; restart brings it back, delivers what it missed
// and gives it the controller's link again.
func (c *testController) stop(id int32) {
	c.mu.Lock()
	c.down[id] = true
	c.mu.Unlock()
	c.brokers[id].Stop(c.t)
}

func (c *testController) restart(id int32) {
	c.brokers[id].Restart(c.t)
	c.brokers[id].Broker.SetClusterLink(c)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.down, id)
	c.deliverLocked(id)
}

func (c *testController) partition(id int32, topic string) *engine.Partition {
	return c.brokers[id].Broker.Topic(topic).Partition(0)
}

// waitFor polls cond until it holds (state, not time: the deadline only
// bounds a hang).
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// produceWithTimeout is produceRaw with the request's timeout.
func produceWithTimeout(rc *rawConn, acks int16, timeoutMs int32, topic string, batch []byte) kmsg.ProduceResponseTopicPartition {
	rc.t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = acks, timeoutMs
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: topic, Partitions: []kmsg.ProduceRequestTopicPartition{{Records: slices.Clone(batch)}}}}
	return do[*kmsg.ProduceResponse](rc, req, 9).Topics[0].Partitions[0]
}

// logBytes is every segment of the partition's log, concatenated in
// offset order.
func logBytes(t testing.TB, tb *testbroker.Broker, topic string) []byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(tb.Config.DataDir, topic+"-0", "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(files)
	var all []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	return all
}

// inSync waits until every replica's log ends where the leader's does
// and holds the same bytes.
func (c *testController) assertIdentical(t *testing.T, topic string, leader int32, replicas []int32) {
	t.Helper()
	lp := c.partition(leader, topic)
	for _, id := range replicas {
		if id == leader {
			continue
		}
		fp := c.partition(id, topic)
		waitFor(t, fmt.Sprintf("broker %d to reach the leader's log end", id), func() bool {
			return fp.LogEndOffset() == lp.LogEndOffset()
		})
		if a, b := logBytes(t, c.brokers[leader], topic), logBytes(t, c.brokers[id], topic); !bytes.Equal(a, b) {
			t.Fatalf("broker %d's log (%d bytes) differs from the leader's (%d bytes)", id, len(b), len(a))
		}
	}
}

// TestReplicationAcksAll: with RF=2 and RF=3 an acks=all produce is
// answered only once every in-sync follower has the batch (their log ends
// are past it when the answer arrives), and the replicas end
// byte-identical. With a follower stopped (and still in the ISR), acks=all
// is not answered before its timeout while acks=1 is.
func TestReplicationAcksAll(t *testing.T) {
	for _, rf := range []int{2, 3} {
		t.Run(fmt.Sprintf("rf=%d", rf), func(t *testing.T) {
			c := startCluster(t, rf)
			replicas := []int32{1, 2, 3}[:rf]
			c.createTopic("r", 1, replicas, nil)
			rc := dialRaw(t, c.brokers[1].Addr)
			for i := range 20 {
				a := produceWithTimeout(rc, -1, 10_000, "r", smallBatch(t, "a", "b", fmt.Sprint(i)))
				if a.ErrorCode != 0 {
					t.Fatalf("produce %d: %v", i, kerr.ErrorForCode(a.ErrorCode))
				}
				end := a.BaseOffset + 3
				for _, id := range replicas[1:] {
					if leo := c.partition(id, "r").LogEndOffset(); leo < end {
						t.Fatalf("acks=all answered with follower %d at %d, before the batch's end %d", id, leo, end)
					}
				}
				if hw := c.partition(1, "r").HighWatermark(); hw < end {
					t.Fatalf("acks=all answered with the high watermark at %d < %d", hw, end)
				}
			}
			c.assertIdentical(t, "r", 1, replicas)

			c.stop(int32(rf))
			if a := produceWithTimeout(rc, -1, 300, "r", smallBatch(t, "x")); a.ErrorCode != kerr.RequestTimedOut.Code {
				t.Fatalf("acks=all with an in-sync follower stopped: %+v", a)
			}
			if a := produceWithTimeout(rc, 1, 300, "r", smallBatch(t, "y")); a.ErrorCode != 0 {
				t.Fatalf("acks=1 with a follower stopped: %+v", a)
			}
		})
	}
}

// TestReplicationConsumersStopAtHighWatermark: records a stopped in-sync
// follower has not fetched are not returned to consumers (the high
// watermark stays below them); once it is back and has fetched them they
// are.
func TestReplicationConsumersStopAtHighWatermark(t *testing.T) {
	c := startCluster(t, 2)
	id := c.createTopic("h", 1, []int32{1, 2}, nil)
	rc := dialRaw(t, c.brokers[1].Addr)
	if a := produceWithTimeout(rc, -1, 10_000, "h", smallBatch(t, "a", "b")); a.ErrorCode != 0 {
		t.Fatalf("%+v", a)
	}
	c.stop(2)
	for range 3 {
		if a := produceWithTimeout(rc, 1, 1000, "h", smallBatch(t, "c")); a.ErrorCode != 0 {
			t.Fatalf("%+v", a)
		}
	}
	lp := c.partition(1, "h")
	if hw, leo := lp.HighWatermark(), lp.LogEndOffset(); hw != 2 || leo != 5 {
		t.Fatalf("high watermark %d, log end %d; want 2, 5", hw, leo)
	}
	consumed := func() (hw int64, last int64) {
		resp := do[*kmsg.FetchResponse](rc, fetchReq("h", id, map[int32]int64{0: 0}), 12)
		p := resp.Topics[0].Partitions[0]
		if p.ErrorCode != 0 {
			t.Fatalf("fetch: %v", kerr.ErrorForCode(p.ErrorCode))
		}
		return p.HighWatermark, lastOffset(t, p.RecordBatches)
	}
	if hw, last := consumed(); hw != 2 || last != 1 {
		t.Fatalf("consumer saw up to offset %d with high watermark %d; want 1, 2", last, hw)
	}
	if resp := do[*kmsg.FetchResponse](rc, fetchReq("h", id, map[int32]int64{0: 2}), 12); len(resp.Topics[0].Partitions[0].RecordBatches) != 0 {
		t.Fatal("a consumer read past the high watermark")
	}
	c.restart(2)
	waitFor(t, "the high watermark to reach the log end", func() bool { return lp.HighWatermark() == 5 })
	if hw, last := consumed(); hw != 5 || last != 4 {
		t.Fatalf("consumer saw up to offset %d with high watermark %d; want 4, 5", last, hw)
	}
	c.assertIdentical(t, "h", 1, []int32{1, 2})
}

// requestsServed is how many requests of API key b has served, read from
// its /metrics as a scraper would.
func requestsServed(t testing.TB, b *engine.Broker, key kmsg.Key) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	b.Metrics().Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	prefix := fmt.Sprintf("sluice_requests_total{api=%q} ", kmsg.NameForKey(key.Int16()))
	for line := range strings.Lines(rec.Body.String()) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	return 0
}

// lastOffset is the last offset of the batches (-1 for none).
func lastOffset(t testing.TB, b []byte) int64 {
	last := int64(-1)
	for len(b) >= 61 {
		base := int64(beUint64(b))
		size := 12 + int(int32(beUint32(b[8:])))
		last = base + int64(int32(beUint32(b[23:])))
		if size > len(b) {
			t.Fatalf("partial batch")
		}
		b = b[size:]
	}
	return last
}

func beUint64(b []byte) uint64 { return uint64(beUint32(b))<<32 | uint64(beUint32(b[4:])) }
func beUint32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// TestReplicationISRShrinkAndRejoin: a stopped follower leaves the ISR
// once replica.lag.time.max.ms has passed without it catching up (the
// leader proposes, the controller commits, the leader acts on the image);
// with min.insync.replicas=3 acks=all is then refused with
// NOT_ENOUGH_REPLICAS before anything is written while acks=1 goes on;
// the follower, restarted, catches up, rejoins the ISR and acks=all works
// again.
func TestReplicationISRShrinkAndRejoin(t *testing.T) {
	c := startCluster(t, 3, func(cfg *engine.Config) { cfg.ReplicaLagTimeMax = 200 * time.Millisecond })
	c.createTopic("s", 1, []int32{1, 2, 3}, map[string]string{"min.insync.replicas": "3"})
	rc := dialRaw(t, c.brokers[1].Addr)
	if a := produceWithTimeout(rc, -1, 10_000, "s", smallBatch(t, "a")); a.ErrorCode != 0 {
		t.Fatalf("%+v", a)
	}
	lp := c.partition(1, "s")
	c.stop(3)
	waitFor(t, "broker 3 to leave the ISR", func() bool { return slices.Equal(lp.ISR(), []int32{1, 2}) })
	leo := lp.LogEndOffset()
	if a := produceWithTimeout(rc, -1, 10_000, "s", smallBatch(t, "b")); a.ErrorCode != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all with ISR [1 2] < min.insync.replicas 3: %+v", a)
	}
	if lp.LogEndOffset() != leo {
		t.Fatal("a refused acks=all produce was written")
	}
	for range 5 {
		if a := produceWithTimeout(rc, 1, 10_000, "s", smallBatch(t, "c")); a.ErrorCode != 0 {
			t.Fatalf("acks=1: %+v", a)
		}
	}
	waitFor(t, "the high watermark to pass broker 3", func() bool { return lp.HighWatermark() == lp.LogEndOffset() })
	c.restart(3)
	waitFor(t, "broker 3 to rejoin the ISR", func() bool { return slices.Equal(lp.ISR(), []int32{1, 2, 3}) })
	if got := c.partition(3, "s").LogEndOffset(); got < lp.HighWatermark() {
		t.Fatalf("broker 3 rejoined at %d, below the high watermark %d", got, lp.HighWatermark())
	}
	if a := produceWithTimeout(rc, -1, 10_000, "s", smallBatch(t, "d")); a.ErrorCode != 0 {
		t.Fatalf("acks=all after the rejoin: %+v", a)
	}
	c.assertIdentical(t, "s", 1, []int32{1, 2, 3})
}

// TestReplicationDivergentTailTruncated: broker 1 leads at epoch 0 and
// writes records no follower fetches (its image still says it leads, while
// broker 2's says broker 2 leads at epoch 1); broker 2 writes its own. When
// broker 1 learns it follows broker 2 at epoch 1 it fetches from its log
// end naming epoch 0 (LastFetchedEpoch); broker 2 answers where its epoch
// 0 ends (DivergingEpoch), and broker 1 cuts its tail there — with no
// OffsetForLeaderEpoch round trip — fetches broker 2's records and ends
// byte-identical to broker 2.
func TestReplicationDivergentTailTruncated(t *testing.T) {
	c := startCluster(t, 2)
	id := c.createTopic("d", 1, []int32{1, 2}, nil)
	rc1 := dialRaw(t, c.brokers[1].Addr)
	for range 2 {
		if a := produceWithTimeout(rc1, -1, 10_000, "d", smallBatch(t, "a", "b")); a.ErrorCode != 0 {
			t.Fatalf("%+v", a)
		}
	}
	// The controller moves leadership to broker 2 (epoch 1); only broker 2
	// hears of it for now.
	c.commitOnly(metadata.PartitionChangeRecord{TopicID: id, Partition: 0, Leader: 2, ISR: []int32{2}})
	c.deliver(2)
	p1, p2 := c.partition(1, "d"), c.partition(2, "d")
	waitFor(t, "broker 2 to lead", func() bool { return p2.LeaderEpoch() == 1 })
	for range 3 {
		if a := produceWithTimeout(rc1, 1, 10_000, "d", smallBatch(t, "stale", "tail")); a.ErrorCode != 0 {
			t.Fatalf("old leader's write: %+v", a)
		}
	}
	rc2 := dialRaw(t, c.brokers[2].Addr)
	if a := produceWithTimeout(rc2, 1, 10_000, "d", smallBatch(t, "new", "leader", "x")); a.ErrorCode != 0 || a.BaseOffset != 4 {
		t.Fatalf("new leader's write: %+v", a)
	}
	if p1.LogEndOffset() != 10 || p2.LogEndOffset() != 7 {
		t.Fatalf("log ends %d and %d, want 10 and 7", p1.LogEndOffset(), p2.LogEndOffset())
	}
	c.deliver(1)
	waitFor(t, "broker 1 to truncate and catch up", func() bool {
		return p1.LogEndOffset() == 7 && p1.HighWatermark() == p2.HighWatermark()
	})
	if n := requestsServed(t, c.brokers[2].Broker, kmsg.OffsetForLeaderEpoch); n != 0 {
		t.Errorf("broker 2 answered %v OffsetForLeaderEpoch requests; the fetch's DivergingEpoch should have settled it", n)
	}
	c.assertIdentical(t, "d", 2, []int32{1, 2})
	waitFor(t, "broker 1 to rejoin the ISR", func() bool { return slices.Equal(p2.ISR(), []int32{1, 2}) })
	if a := produceWithTimeout(rc2, -1, 10_000, "d", smallBatch(t, "after")); a.ErrorCode != 0 {
		t.Fatalf("acks=all on the new leader: %+v", a)
	}
	c.assertIdentical(t, "d", 2, []int32{1, 2})
}

// TestReplicationLeaderChange: leadership moves from broker 1 to broker 2
// (epoch 1). Broker 3's partition moves from its fetcher of broker 1 to
// its fetcher of broker 2, broker 1 starts following broker 2, and an
// acks=all produce to the new leader reaches all three, which end
// byte-identical.
func TestReplicationLeaderChange(t *testing.T) {
	c := startCluster(t, 3)
	id := c.createTopic("m", 1, []int32{1, 2, 3}, nil)
	rc1 := dialRaw(t, c.brokers[1].Addr)
	if a := produceWithTimeout(rc1, -1, 10_000, "m", smallBatch(t, "a", "b")); a.ErrorCode != 0 {
		t.Fatalf("%+v", a)
	}
	c.commit(metadata.PartitionChangeRecord{TopicID: id, Partition: 0, Leader: 2, ISR: []int32{1, 2, 3}})
	if a := produceWithTimeout(rc1, 1, 10_000, "m", smallBatch(t, "c")); a.ErrorCode != kerr.NotLeaderForPartition.Code {
		t.Fatalf("the old leader took a write: %+v", a)
	}
	rc2 := dialRaw(t, c.brokers[2].Addr)
	for range 5 {
		if a := produceWithTimeout(rc2, -1, 10_000, "m", smallBatch(t, "d")); a.ErrorCode != 0 {
			t.Fatalf("%+v", a)
		}
	}
	p2 := c.partition(2, "m")
	for _, id := range []int32{1, 3} {
		if leo := c.partition(id, "m").LogEndOffset(); leo < p2.HighWatermark() {
			t.Fatalf("broker %d at %d, below the new leader's high watermark %d", id, leo, p2.HighWatermark())
		}
	}
	c.assertIdentical(t, "m", 2, []int32{1, 2, 3})

	// Records the leader deletes (DeleteRecords) leave the followers too:
	// fetch answers carry the leader's log start.
	if _, err := engine.PartitionLog(p2).DeleteRecordsBefore(3); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int32{1, 3} {
		fp := c.partition(id, "m")
		waitFor(t, fmt.Sprintf("broker %d's log start to follow the leader's", id), func() bool { return fp.LogStartOffset() == 3 })
	}
}

// TestReplicationIdempotentRetryAfterFailover: the follower rebuilds the
// idempotent producer's state from the replicated log, so after the
// leader moves to it, a retry of a batch the old leader acknowledged gets
// its original offset and is not written twice.
func TestReplicationIdempotentRetryAfterFailover(t *testing.T) {
	c := startCluster(t, 2)
	id := c.createTopic("i", 1, []int32{1, 2}, nil)
	batch := engine.BuildTestBatch(t, engine.TestBatchOpts{ProducerID: 7, BaseSequence: 0, FirstTimestamp: 100},
		engine.TestRecord{Value: []byte("once")})
	rc1 := dialRaw(t, c.brokers[1].Addr)
	if a := produceWithTimeout(rc1, -1, 10_000, "i", smallBatch(t, "before")); a.ErrorCode != 0 {
		t.Fatalf("%+v", a)
	}
	first := produceWithTimeout(rc1, -1, 10_000, "i", batch)
	if first.ErrorCode != 0 || first.BaseOffset != 1 {
		t.Fatalf("%+v", first)
	}
	c.commit(metadata.PartitionChangeRecord{TopicID: id, Partition: 0, Leader: 2, ISR: []int32{1, 2}})
	p2 := c.partition(2, "i")
	leo := p2.LogEndOffset()
	rc2 := dialRaw(t, c.brokers[2].Addr)
	retry := produceWithTimeout(rc2, -1, 10_000, "i", batch)
	if retry.ErrorCode != 0 || retry.BaseOffset != first.BaseOffset || p2.LogEndOffset() != leo {
		t.Fatalf("retry on the new leader: %+v, log end %d -> %d", retry, leo, p2.LogEndOffset())
	}
}

// TestReplicationFollowerResetsPastLogStart: a follower that comes back
// after the leader deleted the records it would fetch next gets
// OFFSET_OUT_OF_RANGE, asks the leader's log start (ListOffsets) and
// restarts its log there (TruncateFullyAndStartAt), then rejoins the ISR.
func TestReplicationFollowerResetsPastLogStart(t *testing.T) {
	c := startCluster(t, 2, func(cfg *engine.Config) { cfg.ReplicaLagTimeMax = 200 * time.Millisecond })
	c.createTopic("o", 1, []int32{1, 2}, nil)
	rc := dialRaw(t, c.brokers[1].Addr)
	if a := produceWithTimeout(rc, -1, 10_000, "o", smallBatch(t, "a", "b")); a.ErrorCode != 0 {
		t.Fatalf("%+v", a)
	}
	lp := c.partition(1, "o")
	c.stop(2)
	waitFor(t, "broker 2 to leave the ISR", func() bool { return slices.Equal(lp.ISR(), []int32{1}) })
	for range 5 {
		if a := produceWithTimeout(rc, 1, 10_000, "o", smallBatch(t, "c", "d")); a.ErrorCode != 0 {
			t.Fatalf("%+v", a)
		}
	}
	if _, err := engine.PartitionLog(lp).DeleteRecordsBefore(lp.HighWatermark()); err != nil {
		t.Fatal(err)
	}
	start := lp.LogStartOffset()
	if start != 12 {
		t.Fatalf("leader's log start %d, want 12", start)
	}
	c.restart(2)
	fp := c.partition(2, "o")
	waitFor(t, "broker 2 to rejoin the ISR", func() bool { return slices.Equal(lp.ISR(), []int32{1, 2}) })
	if fp.LogStartOffset() != start || fp.LogEndOffset() != lp.LogEndOffset() {
		t.Fatalf("follower log [%d, %d), leader [%d, %d)", fp.LogStartOffset(), fp.LogEndOffset(), start, lp.LogEndOffset())
	}
	if a := produceWithTimeout(rc, -1, 10_000, "o", smallBatch(t, "e")); a.ErrorCode != 0 || a.BaseOffset != 12 {
		t.Fatalf("%+v", a)
	}
	waitFor(t, "broker 2 to fetch the new batch", func() bool { return fp.LogEndOffset() == 13 })
}
