package engine

import (
	"testing"
	"time"
)

// TestOffsetsAppendWaitsForInSyncReplicas is the chaos harness's first
// finding (commit-backwards): the group coordinator's writes to
// __consumer_offsets were answered after the local append, so a
// coordinator cut off from its followers acknowledged offset commits that
// the leader elected on the other side never had, and the group's
// committed offsets went backwards. Its writes now wait, as an acks=all
// produce does, until the in-sync followers have them.
func TestOffsetsAppendWaitsForInSyncReplicas(t *testing.T) {
	br := benchBroker(t)
	p := br.Topic("bench").Partition(0)
	leadWith(p, 1, 1, 2)
	batch := BuildTestBatch(t, TestBatchOpts{ProducerID: -1}, TestRecord{Key: []byte("k"), Value: []byte("v")})

	done := make(chan error, 1)
	go func() { _, err := (groupLog{p: p}).Append(batch); done <- err }()
	waitUntil(t, "the local append", func() bool { return p.LogEndOffset() == 1 })
	select {
	case err := <-done:
		t.Fatalf("answered (%v) before follower 2 had the record", err)
	case <-time.After(50 * time.Millisecond): // a bounded look for a wrong early answer, not a timing assertion
	}
	p.followerFetched(2, 1, wallMs())
	if err := <-done; err != nil {
		t.Fatalf("after follower 2 fetched: %v", err)
	}

	// min.insync.replicas is not the coordinator's to apply: with the ISR
	// down to the leader (committed by the controller) a write is
	// answered, so an offsets topic of one replica keeps working under a
	// broker default of 2, as it did before.
	if err := br.SetTopicConfigs(br.Topic("bench"), map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	leadWith(p, 2, 1)
	if _, err := (groupLog{p: p}).Append(batch); err != nil {
		t.Fatalf("with ISR [1] and min.insync.replicas 2: %v", err)
	}
	leadWith(p, 3, 1, 2)

}

// waitUntil polls cond for up to 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
