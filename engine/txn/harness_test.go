package txn

import (
	"bytes"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/group"
)

// The coordinator's tests drive it as a state machine: calls in, codes
// out, time moved by a FakeClock, markers answered by the test. Nothing
// sleeps.

// memLog is a PartitionLog in memory; Replay decodes with kmsg's own
// RecordBatch and Record readers, independent of the writer.
type memLog struct {
	mu      sync.Mutex
	batches [][]byte
	fail    error
}

func (l *memLog) Append(batch []byte) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return -1, l.fail
	}
	l.batches = append(l.batches, bytes.Clone(batch))
	return int64(len(l.batches) - 1), nil
}

func (l *memLog) Replay(fn func(key, value []byte) error) error {
	for _, r := range l.records() {
		if err := fn(r.Key, r.Value); err != nil {
			return err
		}
	}
	return nil
}

func (l *memLog) records() []kmsg.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []kmsg.Record
	for _, b := range l.batches {
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			panic(err)
		}
		raw := rb.Records
		for i := int32(0); i < rb.NumRecords; i++ {
			var r kmsg.Record
			n, _ := readVarint(raw)
			if err := r.ReadFrom(raw[:n]); err != nil {
				panic(err)
			}
			raw = raw[n:]
			out = append(out, r)
		}
	}
	return out
}

// readVarint is the length of the next record, its length prefix included.
func readVarint(b []byte) (int, error) {
	var x uint64
	var s uint
	for i, c := range b {
		x |= uint64(c&0x7f) << s
		if c < 0x80 {
			v := int64(x>>1) ^ -int64(x&1)
			return i + 1 + int(v), nil
		}
		s += 7
	}
	return 0, io.ErrUnexpectedEOF
}

// states lists the transaction states the log holds for id, in order (-1
// for a tombstone).
func (l *memLog) states(id string) []State {
	var out []State
	for _, r := range l.records() {
		var k kmsg.TxnMetadataKey
		if k.ReadFrom(r.Key) != nil || k.TransactionalID != id {
			continue
		}
		if r.Value == nil {
			out = append(out, -1)
			continue
		}
		var v kmsg.TxnMetadataValue
		if err := v.ReadFrom(r.Value); err != nil {
			panic(err)
		}
		out = append(out, State(v.State))
	}
	return out
}

// markerQueue is the MarkerWriter of the tests: rounds wait until the test
// answers them.
type markerQueue struct {
	mu     sync.Mutex
	rounds []markerRound
}

type markerRound struct {
	req  MarkerRequest
	done func([]TopicPartition)
}

func (q *markerQueue) Write(req MarkerRequest, done func([]TopicPartition)) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.rounds = append(q.rounds, markerRound{req, done})
}

// take removes and returns the oldest round; it fails the test if none.
func (q *markerQueue) take(t *testing.T) markerRound {
	t.Helper()
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.rounds) == 0 {
		t.Fatal("no markers were sent")
	}
	r := q.rounds[0]
	q.rounds = q.rounds[1:]
	return r
}

func (q *markerQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.rounds)
}

type harness struct {
	t       *testing.T
	clock   *group.FakeClock
	log     *memLog
	markers *markerQueue
	c       *Coordinator
	nextPid int64
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// newHarness is a coordinator of one partition, loaded at coordinator
// epoch 7.
func newHarness(t *testing.T) *harness {
	h := &harness{t: t, clock: group.NewFakeClock(t0), log: &memLog{}, markers: &markerQueue{}, nextPid: 1000}
	h.c = h.newCoordinator()
	if _, err := h.c.LoadPartition(0, 7, h.log); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.c.Close)
	return h
}

func (h *harness) newCoordinator() *Coordinator {
	return New(Config{
		Partitions: 1, Clock: h.clock, Markers: h.markers,
		NewProducerID: func() (int64, error) { h.nextPid++; return h.nextPid, nil },
		Log:           slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
}

func (h *harness) init(id string) ProducerResult {
	h.t.Helper()
	r := h.c.InitProducerID(InitRequest{TransactionalID: id, TimeoutMs: 60000, ProducerID: -1, ProducerEpoch: -1})
	if r.ErrorCode != 0 {
		h.t.Fatalf("InitProducerId(%s): %v", id, codeName(r.ErrorCode))
	}
	return r
}

var tp0, tp1 = TopicPartition{"t", 0}, TopicPartition{"t", 1}

func wantCode(t *testing.T, what string, got, want int16) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %s, want %s", what, codeName(got), codeName(want))
	}
}
