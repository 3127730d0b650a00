package testcluster

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestLateFollowerRejoinsEveryISR: node 3 of a cluster holding N
// partitions of RF=3 (SLUICE_ISR_PARTITIONS, 300 by default) is killed,
// is dropped from every ISR, and comes back; its fetchers catch up and
// the leaders' ISR expansions reach the controller batched (one
// AlterPartition in flight per leader, engine/cluster_link.go) until
// every ISR holds three replicas again. The time that takes is logged.
func TestLateFollowerRejoinsEveryISR(t *testing.T) {
	n := int32(300)
	if v, err := strconv.Atoi(os.Getenv("SLUICE_ISR_PARTITIONS")); err == nil && v > 0 {
		n = int32(v)
	}
	c := Start(t, 3, Options{})
	adm := kadm.NewClient(c.Client())
	createTopic(t, adm, "late", n, 3)
	isrSizes := func() (full, without3 int) {
		_, isrs := topicLeaders(t, c, c.Nodes[0], "late")
		for _, isr := range isrs {
			if len(isr) == 3 {
				full++
			}
			if !containsID(isr, 3) {
				without3++
			}
		}
		return full, without3
	}
	c.WaitFor(60*time.Second, "every ISR full", func() bool { full, _ := isrSizes(); return full == int(n) })
	c.Node(3).Kill()
	c.WaitFor(60*time.Second, "node 3 out of every ISR", func() bool { _, w := isrSizes(); return w == int(n) })
	start := time.Now()
	c.Node(3).Restart()
	c.WaitFor(120*time.Second, "every ISR full again", func() bool { full, _ := isrSizes(); return full == int(n) })
	t.Logf("%d partitions: node 3 back in every ISR %v after its restart", n, time.Since(start).Round(time.Millisecond))
}

func containsID(ids []int32, id int32) bool {
	for _, v := range ids {
		if v == id {
			return true
		}
	}
	return false
}
