package testcluster

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-broker/sluice/tools/chaos/check"
)

// TestDurability is issue 11's durability claim, checked Jepsen-style: RF=3,
// min.insync.replicas=2, acks=all and an idempotent producer writing a
// counter round-robin over three partitions while leaders are SIGKILLed
// and restarted (first a non-controller, then the active controller's node)
// and one leader is SIGSTOPped past broker.session.timeout.ms. When the
// cluster has healed (every replica back in the ISR), a fresh consumer reads
// every partition to its high watermark and the checker asks: is every
// acknowledged value there, at the offset it was acknowledged with (lost,
// moved)? Is any value there twice (duplicate)? Are acknowledged values in
// produce order (reordered)? Are offsets dense (gap)? Then the replicas'
// .log bytes below the HW are compared: batches keep the leader's offsets
// and epochs, so they must be identical (diverged).
//
// Timings are not asserted: a fault's effect shows only as anomalies.
func TestDurability(t *testing.T) {
	const (
		topic      = "durable"
		partitions = 3
	)
	c := Start(t, 3, Options{Extra: []string{
		"broker.session.timeout.ms=3000",
		"broker.heartbeat.interval.ms=500",
		"min.insync.replicas=2",
		"replica.lag.time.max.ms=5000",
	}})
	adm := kadm.NewClient(c.Client())
	resp, err := adm.CreateTopic(ctxT(t, 20*time.Second), partitions, 3,
		map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
	waitHealed(t, c, topic, partitions, 30*time.Second)

	h := check.NewHistory()
	stopProducing := produceRoundRobin(c, topic, partitions, h)

	faults := injectFaults(t, c, topic, partitions)
	stopProducing()
	waitHealed(t, c, topic, partitions, 60*time.Second)

	logs := consumeAll(t, c, topic, partitions)
	an := h.Check(logs, nil)
	for p := int32(0); p < partitions; p++ {
		dirs := map[int32]string{}
		for _, nd := range c.Nodes {
			dirs[nd.ID] = filepath.Join(nd.DataDir, fmt.Sprintf("%s-%d", topic, p))
		}
		an.Add(check.Diverged, check.Replicas(p, logs[p].HW, dirs)...)
	}

	if cp := os.Getenv("SLUICE_KAFKA_CLASSPATH"); cp != "" {
		an.Add(check.DumpLog, dumpLogAfterStop(t, c, cp, topic, partitions)...)
	} else {
		t.Log("kafka-dump-log not run: set SLUICE_KAFKA_CLASSPATH to Kafka's jars")
	}

	sent, acked, failed := h.Counts()
	consumed := 0
	for _, l := range logs {
		consumed += len(l.Values)
	}
	t.Logf("faults: %s", strings.Join(faults, ", "))
	t.Logf("%-16s %8s", "records", "count")
	t.Logf("%-16s %8d", "sent", sent)
	t.Logf("%-16s %8d", "acked", acked)
	t.Logf("%-16s %8d", "failed", failed)
	t.Logf("%-16s %8d", "consumed", consumed)
	for _, k := range check.Kinds {
		t.Logf("%-16s %8d", k, len(an[k]))
	}
	reportAnomalies(t, an)
	if acked == 0 {
		t.Fatal("nothing was acknowledged")
	}
}

// injectFaults kills and restarts partition leaders — one that is not the
// active controller, then the controller's node, then a leader and, right
// after its restart and before anything has healed, the partition's next
// leader — and pauses one past the session timeout, waiting for a full ISR
// after each round; it returns what it did.
func injectFaults(t *testing.T, c *Cluster, topic string, partitions int) []string {
	var faults []string
	kill := func(controller bool) (int32, int32) {
		victim, part := pickLeader(t, c, topic, controller)
		faults = append(faults, fmt.Sprintf("kill %d (leader of %d%s)", victim, part, map[bool]string{true: ", controller"}[controller]))
		c.Node(victim).Kill()
		return victim, part
	}
	restart := func(victim int32) {
		c.Node(victim).Restart()
		c.WaitBrokers(3, 30*time.Second)
	}
	heal := func() {
		waitHealed(t, c, topic, partitions, 45*time.Second)
		time.Sleep(time.Second)
	}
	time.Sleep(2 * time.Second)
	for _, controller := range []bool{false, true} {
		victim, _ := kill(controller)
		time.Sleep(2 * time.Second)
		restart(victim)
		heal()
	}

	// Two leaders of one partition in a row: the second dies while the
	// first is still catching up, so the ISR is down to one replica and
	// acks=all must be refused until a second one is back.
	first, part := kill(false)
	time.Sleep(time.Second)
	restart(first)
	var second int32
	c.WaitFor(20*time.Second, "a new leader", func() bool {
		l, _ := topicLeaders(t, c, c.Node(first), topic)
		leader, ok := l[part]
		second = leader
		return ok && second >= 0 && second != first
	})
	faults = append(faults, fmt.Sprintf("kill %d (next leader of %d)", second, part))
	c.Node(second).Kill()
	time.Sleep(2 * time.Second)
	restart(second)
	heal()

	victim, part := pickLeader(t, c, topic, false)
	faults = append(faults, fmt.Sprintf("pause %d (leader of %d) 4.5s", victim, part))
	c.Node(victim).Pause()
	time.Sleep(4500 * time.Millisecond) // session timeout 3 s
	c.Node(victim).Resume()
	c.WaitBrokers(3, 30*time.Second)
	heal()
	return faults
}

// pickLeader returns a partition leader: the active controller's node if
// controller, else a node that is not the active controller.
func pickLeader(t *testing.T, c *Cluster, topic string, controller bool) (int32, int32) {
	t.Helper()
	var victim, part int32 = -1, -1
	var elected time.Time
	c.WaitFor(20*time.Second, "a leader to fault", func() bool {
		active := c.ActiveController()
		if active < 0 {
			return false
		}
		leaders, _ := topicLeaders(t, c, c.Node(active), topic)
		for p := int32(0); p < int32(len(leaders)); p++ {
			if l := leaders[p]; l >= 0 && (l == active) == controller {
				victim, part = l, p
				return true
			}
		}
		if controller { // the controller leads nothing: kill it anyway
			victim, part = active, -1
			return true
		}
		// Every partition is led by the controller's node (the others
		// were killed in turn): move leadership back to the preferred
		// replicas, which are spread over the three nodes.
		if time.Since(elected) > time.Second {
			set := kadm.TopicsSet{}
			set.Add(topic, 0, 1, 2)
			kadm.NewClient(c.clientOf(t, c.Node(active))).ElectLeaders(ctxT(t, 5*time.Second), kadm.ElectPreferredReplica, set)
			elected = time.Now()
		}
		return false
	})
	return victim, part
}

// waitHealed waits until every running node's Metadata shows each
// partition with a leader and all three replicas in the ISR.
func waitHealed(t *testing.T, c *Cluster, topic string, partitions int, d time.Duration) {
	t.Helper()
	c.WaitFor(d, "every replica in the ISR", func() bool {
		for _, nd := range c.Nodes {
			leaders, isrs := topicLeaders(t, c, nd, topic)
			if len(leaders) != partitions {
				return false
			}
			for p, l := range leaders {
				if l < 0 || len(isrs[p]) != 3 {
					return false
				}
			}
		}
		return true
	})
}

// TestDurabilityChecker: the checker of TestDurability names each kind of
// anomaly it is shown, and none in a clean history.
func TestDurabilityChecker(t *testing.T) {
	h := check.NewHistory()
	// Values 0..5 to partition 0, all acked at offsets 0..5; value 6 to
	// partition 1, never answered.
	for range 6 {
		v := h.Send(0, 0)
		h.Done(v, int64(v), nil)
	}
	h.Send(0, 1)
	log := func(offsets []int64, values []int) map[int32]*check.Log {
		return map[int32]*check.Log{0: {HW: 10, Offsets: offsets, Values: values}, 1: {HW: 0}}
	}
	for _, tc := range []struct {
		name    string
		offsets []int64
		values  []int
		want    map[string]int
	}{
		{"clean", []int64{0, 1, 2, 3, 4, 5}, []int{0, 1, 2, 3, 4, 5}, map[string]int{}},
		{"lost", []int64{0, 1, 2, 3, 4}, []int{0, 1, 2, 3, 4}, map[string]int{"lost": 1}},
		{"duplicate", []int64{0, 1, 2, 3, 4, 5, 6}, []int{0, 1, 2, 3, 4, 5, 5}, map[string]int{"duplicate": 1}},
		{"reordered", []int64{0, 1, 2, 3, 4, 5}, []int{0, 1, 3, 2, 4, 5}, map[string]int{"reordered": 1, "moved": 2}},
		{"gap", []int64{0, 1, 2, 4, 5, 6}, []int{0, 1, 2, 3, 4, 5}, map[string]int{"gap": 1, "moved": 3}},
		{"foreign", []int64{0, 1, 2, 3, 4, 5, 6}, []int{0, 1, 2, 3, 4, 5, 6}, map[string]int{"foreign": 1}},
	} {
		an := h.Check(log(tc.offsets, tc.values), nil)
		got := map[string]int{}
		for k, v := range an {
			got[string(k)] = len(v)
		}
		if !maps.Equal(got, tc.want) {
			t.Errorf("%s: anomalies %v, want %v", tc.name, an, tc.want)
		}
	}

	// Replica comparison: identical batches below the HW pass; a byte
	// that differs, or a log that stops short of the HW, does not.
	dir := t.TempDir()
	batch := func(base int64, fill byte) []byte {
		b := make([]byte, 61)
		binary.BigEndian.PutUint64(b, uint64(base))
		binary.BigEndian.PutUint32(b[8:], 49)
		b[60] = fill
		return b
	}
	write := func(name string, bs ...[]byte) string {
		d := filepath.Join(dir, name)
		os.MkdirAll(d, 0o755)
		os.WriteFile(filepath.Join(d, "00000000000000000000.log"), bytes.Join(bs, nil), 0o644)
		return d
	}
	a, _ := check.BatchesBelow(write("a", batch(0, 1), batch(1, 2), batch(2, 3)), 2)
	b, _ := check.BatchesBelow(write("b", batch(0, 1), batch(1, 2), batch(2, 9)), 2)
	if !bytes.Equal(a, b) || len(a) != 122 {
		t.Errorf("batches below hw 2: %d and %d bytes, equal %v; want 122, equal", len(a), len(b), bytes.Equal(a, b))
	}
	if d, _ := check.BatchesBelow(write("c", batch(0, 1), batch(1, 7)), 2); bytes.Equal(a, d) {
		t.Error("a differing batch below the hw compared equal")
	}
	if _, err := check.BatchesBelow(write("d", batch(0, 1)), 2); err == nil {
		t.Error("a log ending below the hw was not reported")
	}
}

// dumpLogAfterStop shuts every node down (SIGTERM, so the active
// segments' indexes are trimmed as kafka-dump-log expects) and runs
// Kafka's DumpLogSegments over every replica's segments and indexes, as
// storage's TestKafkaDumpLogReadsOurSegments does; it needs Java and
// Kafka's jars in SLUICE_KAFKA_CLASSPATH.
func dumpLogAfterStop(t *testing.T, c *Cluster, cp, topic string, partitions int) []string {
	var wg sync.WaitGroup
	for _, nd := range c.Nodes {
		wg.Add(1)
		go func() { defer wg.Done(); nd.signal(syscall.SIGTERM); nd.wait(30 * time.Second) }()
	}
	wg.Wait()
	var out []string
	for _, nd := range c.Nodes {
		if nd.Running() {
			out = append(out, fmt.Sprintf("node %d still running 30 s after SIGTERM", nd.ID))
			nd.Kill()
		}
	}
	for _, nd := range c.Nodes {
		for p := range partitions {
			dir := filepath.Join(nd.DataDir, fmt.Sprintf("%s-%d", topic, p))
			var files []string
			for _, pat := range []string{"*.log", "*.index", "*.timeindex"} {
				m, _ := filepath.Glob(filepath.Join(dir, pat))
				files = append(files, m...)
			}
			for _, mode := range []string{"--index-sanity-check", "--verify-index-only", "--deep-iteration"} {
				res, err := exec.Command("java", "-cp", cp, "org.apache.kafka.tools.DumpLogSegments",
					"--files", strings.Join(files, ","), mode).CombinedOutput()
				text := string(res)
				if err != nil {
					out = append(out, fmt.Sprintf("node %d %s-%d %s: %v", nd.ID, topic, p, mode, err))
					continue
				}
				if mode == "--deep-iteration" && !strings.Contains(text, "isvalid: true") {
					out = append(out, fmt.Sprintf("node %d %s-%d: no valid batch: %.300s", nd.ID, topic, p, text))
				}
				for _, bad := range []string{"isvalid: false", "Mismatches", "failed sanity", "Exception", "out of order", "not found"} {
					if strings.Contains(text, bad) {
						i := strings.Index(text, bad)
						out = append(out, fmt.Sprintf("node %d %s-%d %s: %q …%s", nd.ID, topic, p, mode, bad, text[max(0, i-200):min(len(text), i+200)]))
					}
				}
			}
		}
	}
	return out
}

// consumeAll reads every partition of topic from its start to its high
// watermark (check.ReadLogs), failing the test when it cannot.
func consumeAll(t *testing.T, c *Cluster, topic string, partitions int) map[int32]*check.Log {
	t.Helper()
	logs, err := check.ReadLogs(ctxT(t, 60*time.Second), c.Bootstrap(), topic, partitions)
	if err != nil {
		t.Fatal(err)
	}
	return logs
}

// reportAnomalies fails t with the checker's findings, up to ten of each
// kind.
func reportAnomalies(t *testing.T, an check.Anomalies) {
	t.Helper()
	for _, k := range check.Kinds {
		for i, s := range an[k] {
			if i == 10 {
				t.Errorf("%s: … %d more", k, len(an[k])-10)
				break
			}
			t.Errorf("%s: %s", k, s)
		}
	}
}
