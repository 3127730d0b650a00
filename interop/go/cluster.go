package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// The cluster scenario, run against three brokers (interop/driver's
// cluster half): an RF=3 topic with min.insync.replicas=2, one group member
// consuming what acks=all producers write, before, while and after the
// driver restarts the group's coordinator with SIGTERM.

// partitionInfo is one partition as metadata shows it.
type partitionInfo struct {
	partition, leader int32
	replicas, isr     []int32
}

const (
	clusterPartitions = 3
	clusterRecords    = 100 // per phase
)

// driverIn reads the driver's replies to control requests.
var driverIn = bufio.NewReader(os.Stdin)

// askDriver prints a control request and returns the driver's reply.
func askDriver(req string) (string, error) {
	fmt.Printf("##interop broker %s\n", req)
	reply, err := driverIn.ReadString('\n')
	reply = strings.TrimSpace(reply)
	if err != nil {
		return "", fmt.Errorf("no reply from the driver to %q: %w", req, err)
	}
	if strings.HasPrefix(reply, "error ") {
		return "", fmt.Errorf("driver: %s", reply)
	}
	logf("driver: %s", reply)
	return reply, nil
}

func runClusterScenario(ctx context.Context, name string, c client) bool {
	defer c.close()
	rep := &reporter{}
	fmt.Printf("##interop version %s\n", c.version())
	topic, group := name+"-rf3", name+"-rf3-group"
	t0 := time.Now().Add(-5 * time.Minute).Truncate(time.Millisecond)

	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	detail, err := createRF3(sctx, c, topic)
	cancel()
	if !rep.check("rf3-topic", err, detail) {
		return false
	}

	cl := &collector{counts: map[string]int{}}
	m, err := c.newMember(ctx, group, topic, "eager")
	if err != nil {
		rep.fail("acks-all", fmt.Errorf("member: %w", err))
		return false
	}
	mctx, mcancel := context.WithCancel(ctx)
	memberDone := make(chan error, 1)
	go func() { memberDone <- m.run(mctx, cl.got) }()
	defer func() {
		mcancel()
		<-memberDone
		m.close()
	}()
	rm := &runningMember{done: memberDone}

	// phase produces 100 records tagged tag (idempotent where the client
	// can) and waits until the member has consumed them.
	phase := func(tag string) error {
		recs := makeRecords(topic+"-"+tag, clusterRecords, t0)
		done := cl.await(topic+"-"+tag, clusterRecords)
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := c.produce(pctx, topic, "none", c.canIdempotent(), recs); err != nil {
			return fmt.Errorf("produce: %w", err)
		}
		if err := awaitPhase(pctx, done, cl, topic+"-"+tag, rm); err != nil {
			return fmt.Errorf("consume: %w", err)
		}
		return nil
	}
	acks := "acks=all"
	if c.canIdempotent() {
		acks += ", idempotent"
	}
	if !rep.check("acks-all", phase("p1"), fmt.Sprintf("%d records, %s, consumed by the group member", clusterRecords, acks)) {
		return false
	}
	stopped, err := askDriver("stop " + group)
	if err == nil {
		err = phase("p2")
	}
	if !rep.check("broker-down", err, fmt.Sprintf("%s: %d more records, %s, consumed by the same member", stopped, clusterRecords, acks)) {
		return false
	}
	started, err := askDriver("start")
	if err == nil {
		err = phase("p3")
	}
	if err == nil {
		time.Sleep(500 * time.Millisecond) // let late duplicates show up
		err = exactlyOnceInOrder(cl, topic, 3*clusterRecords)
	}
	rep.check("broker-back", err, fmt.Sprintf("%s: %d more records; all %d consumed exactly once, in produce order per partition", started, clusterRecords, 3*clusterRecords))
	return !rep.failed
}

// createRF3 creates the topic and waits until every partition shows three
// replicas, all in the ISR, with a leader among them.
func createRF3(ctx context.Context, c client, topic string) (string, error) {
	if err := c.createReplicated(ctx, topic, clusterPartitions, 3, map[string]string{"min.insync.replicas": "2"}); err != nil {
		return "", fmt.Errorf("create %s: %w", topic, err)
	}
	var last string
	for {
		ps, err := c.replicas(ctx, topic)
		last = fmt.Sprintf("metadata: %v %+v", err, ps)
		if err == nil && len(ps) == clusterPartitions && allReplicated(ps) {
			leaders := map[int32]bool{}
			for _, p := range ps {
				leaders[p.leader] = true
			}
			return fmt.Sprintf("%d partitions, replicas %v, ISR %v, leaders on %d brokers", len(ps), ps[0].replicas, ps[0].isr, len(leaders)), nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("not three in-sync replicas per partition: %s", last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func allReplicated(ps []partitionInfo) bool {
	for _, p := range ps {
		distinct := map[int32]bool{}
		for _, r := range p.replicas {
			distinct[r] = true
		}
		if len(distinct) != 3 || len(p.isr) != 3 || !slices.Contains(p.replicas, p.leader) {
			return false
		}
		for _, r := range p.isr {
			if !distinct[r] {
				return false
			}
		}
	}
	return true
}

// exactlyOnceInOrder checks every record of the three phases arrived once,
// and within each partition in produce order (phase, then sequence).
func exactlyOnceInOrder(cl *collector, topic string, want int) error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	var problems []string
	if len(cl.counts) != want || len(cl.all) != want {
		problems = append(problems, fmt.Sprintf("%d deliveries of %d distinct records, produced %d", len(cl.all), len(cl.counts), want))
	}
	last := map[int32]string{}
	for _, r := range cl.all {
		id := strings.TrimPrefix(r.id(), topic+"-") // pN-NNNNN sorts in produce order
		if prev, ok := last[r.Partition]; ok && id <= prev && len(problems) < 5 {
			problems = append(problems, fmt.Sprintf("partition %d: %s after %s", r.Partition, id, prev))
		}
		last[r.Partition] = id
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}
