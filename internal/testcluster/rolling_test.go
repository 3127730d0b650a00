package testcluster

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-broker/sluice/tools/chaos/check"
)

// TestRollingRestart is issue 10's controlled-shutdown claim: every node
// of a three-node cluster is restarted in turn with SIGTERM (controlled
// shutdown: its leaderships move and it leaves the ISRs before it exits),
// the next one only once every replica is back in the ISR, while an
// idempotent acks=all producer writes a counter over three partitions of
// an RF=3, min.insync.replicas=2 topic. No produce may fail, and the
// checker of TestDurability must find no anomaly: every acknowledged
// value consumed once, at its offset, in order. Stop and heal times are
// logged, not asserted.
func TestRollingRestart(t *testing.T) {
	const (
		topic      = "rolling"
		partitions = 3
	)
	c := Start(t, 3, Options{Extra: []string{"min.insync.replicas=2"}})
	adm := kadm.NewClient(c.Client())
	resp, err := adm.CreateTopic(ctxT(t, 20*time.Second), partitions, 3,
		map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
	waitHealed(t, c, topic, partitions, 30*time.Second)

	h := check.NewHistory()
	stopProducing := produceRoundRobin(c, topic, partitions, h)

	time.Sleep(time.Second)
	for _, nd := range c.Nodes {
		start := time.Now()
		if err := nd.Stop(); err != nil {
			t.Errorf("node %d exited with %v after SIGTERM", nd.ID, err)
		}
		stopped := time.Since(start)
		other := c.Node(nd.ID%3 + 1)
		var leaders map[int32]int32
		var isrs map[int32][]int32
		c.WaitFor(10*time.Second, "metadata from another node", func() bool {
			leaders, isrs = topicLeaders(t, c, other, topic)
			return len(leaders) == partitions
		})
		for p := range int32(partitions) {
			if leaders[p] == nd.ID || slices.Contains(isrs[p], nd.ID) {
				t.Errorf("after the controlled shutdown of node %d, %s-%d has leader %d isr %v", nd.ID, topic, p, leaders[p], isrs[p])
			}
		}
		nd.Restart()
		waitHealed(t, c, topic, partitions, 60*time.Second)
		t.Logf("node %d: SIGTERM to exit %v, restart to a full ISR %v", nd.ID,
			stopped.Round(time.Millisecond), (time.Since(start) - stopped).Round(time.Millisecond))
		time.Sleep(500 * time.Millisecond) // produce against the healed cluster before the next
	}
	stopProducing()

	logs := consumeAll(t, c, topic, partitions)
	an := h.Check(logs, nil)
	sent, acked, failed := h.Counts()
	t.Logf("sent %d, acked %d, failed %d", sent, acked, failed)
	if failed > 0 || acked != sent {
		t.Errorf("%d of %d produces failed, %d acknowledged: a rolling restart must fail none", failed, sent, acked)
	}
	reportAnomalies(t, an)
}
