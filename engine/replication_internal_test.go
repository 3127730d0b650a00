package engine

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/metadata"
)

// These tests set a partition's role with hand-built images through
// applyImage, as the partition manager does with the controller's, and
// stand in for followers by calling followerFetched as the Fetch handler
// does for a replica's fetch.

// leadWith makes broker 1 lead bench-0 with the given ISR of replicas
// [1 2 3] at leader epoch 1 and partition epoch pe.
func leadWith(p *Partition, pe int32, isr ...int32) {
	p.applyImage(1, &metadata.PartitionImage{Replicas: []int32{1, 2, 3}, ISR: isr, Leader: 1, LeaderEpoch: 1, PartitionEpoch: pe})
}

// TestAcksAllAfterISRShrink: an acks=all produce waits for the in-sync
// followers; when the controller commits an ISR that drops one below
// min.insync.replicas the high watermark moves past the batch and the
// produce is answered NOT_ENOUGH_REPLICAS_AFTER_APPEND, as Kafka does;
// the next acks=all produce is refused NOT_ENOUGH_REPLICAS unwritten.
func TestAcksAllAfterISRShrink(t *testing.T) {
	br := benchBroker(t)
	if err := br.SetTopicConfigs(br.Topic("bench"), map[string]string{"min.insync.replicas": "2"}); err != nil {
		t.Fatal(err)
	}
	p := br.Topic("bench").Partition(0)
	leadWith(p, 1, 1, 2)
	answers := make(chan *Response, 2)
	br.Handle(&Session{}, produceFrame(t, -1, 600_000), func(r *Response) { answers <- r })
	if answered(answers) != nil {
		t.Fatal("acks=all answered before the follower fetched")
	}
	p.followerFetched(2, 1, wallMs()) // follower 2 has offset 0 only
	if answered(answers) != nil || p.HighWatermark() != 1 {
		t.Fatalf("answered at high watermark %d", p.HighWatermark())
	}
	leadWith(p, 2, 1) // the controller committed ISR [1]
	r := answered(answers)
	if r == nil {
		t.Fatal("not answered once the ISR shrank")
	}
	if a := produceAnswer(t, r); a.ErrorCode != kerr.NotEnoughReplicasAfterAppend.Code {
		t.Fatalf("%+v", a)
	}
	leo := p.LogEndOffset()
	br.Handle(&Session{}, produceFrame(t, -1, 600_000), func(r *Response) { answers <- r })
	if a := produceAnswer(t, <-answers); a.ErrorCode != kerr.NotEnoughReplicas.Code || p.LogEndOffset() != leo {
		t.Fatalf("%+v, log end %d -> %d", a, leo, p.LogEndOffset())
	}
}

// TestFollowerFetchMovesHighWatermark: the high watermark is the smallest
// log end over the ISR; a follower outside the ISR does not hold it back,
// and catching up proposes it back into the ISR (pending until the image
// says so).
func TestFollowerFetchMovesHighWatermark(t *testing.T) {
	br := benchBroker(t)
	br.SetClusterLink(acceptingLink{})
	p := br.Topic("bench").Partition(0)
	leadWith(p, 1, 1, 2)
	answers := make(chan *Response, 1)
	br.Handle(&Session{}, produceFrame(t, 1, 600_000), func(r *Response) { answers <- r })
	<-answers
	if hw := p.HighWatermark(); hw != 0 {
		t.Fatalf("high watermark %d before follower 2 fetched", hw)
	}
	p.followerFetched(2, 2, wallMs())
	if hw := p.HighWatermark(); hw != 2 {
		t.Fatalf("high watermark %d after follower 2 fetched at 2", hw)
	}
	p.followerFetched(3, 0, wallMs()) // behind and not in the ISR: no effect
	if hw := p.HighWatermark(); hw != 2 {
		t.Fatalf("high watermark %d after follower 3 fetched at 0", hw)
	}
	p.followerFetched(3, 2, wallMs())
	p.mu.Lock()
	pending := p.mu.leader.Pending()
	p.mu.Unlock()
	if pending == nil || len(pending.ISR) != 3 {
		t.Fatalf("no ISR expansion proposed for follower 3: %+v", pending)
	}
	leadWith(p, 2, 1, 2, 3)
	if isr := p.ISR(); len(isr) != 3 {
		t.Fatalf("ISR %v after the commit", isr)
	}
}

// acceptingLink accepts every ISR change and never delivers it: the
// proposal stays pending.
type acceptingLink struct{}

func (acceptingLink) AlterPartition(c []ISRChange) ([]error, error) {
	return make([]error, len(c)), nil
}
func (acceptingLink) BrokerAddr(int32) (string, bool) { return "", false }
