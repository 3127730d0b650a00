package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

// client is one Kafka client library, driven through its own API only.
type client interface {
	version() string
	codecs() []string // of none, gzip, snappy, lz4, zstd
	canIdempotent() bool
	// createTopics creates topics with the given partition count.
	createTopics(ctx context.Context, topics []string, partitions int32) error
	// createReplicated creates one topic with a replication factor and
	// topic configs.
	createReplicated(ctx context.Context, topic string, partitions int32, rf int16, configs map[string]string) error
	// replicas is what metadata says of each partition of a topic.
	replicas(ctx context.Context, topic string) ([]partitionInfo, error)
	// partitionCount is what metadata says of a topic.
	partitionCount(ctx context.Context, topic string) (int, error)
	// produce sends recs in order with acks=all and fills in the partition
	// and offset the broker assigned, where the client reports them (else -1).
	produce(ctx context.Context, topic, codec string, idempotent bool, recs []record) error
	// consume reads every partition from the earliest offset until it has n
	// records (or ctx ends).
	consume(ctx context.Context, topic string, n int) ([]record, error)
	// strategies are the assignment-strategy families the client's group
	// consumer offers: "eager", "cooperative".
	strategies() []string
	// newMember joins group with an assignor of the given family.
	newMember(ctx context.Context, group, topic, strategy string) (member, error)
	// listOffsets returns earliest and latest offsets per partition.
	listOffsets(ctx context.Context, topic string) (earliest, latest map[int32]int64, err error)
	// offsetForTime is the first offset of a partition whose timestamp is
	// at or after ts.
	offsetForTime(ctx context.Context, topic string, partition int32, ts time.Time) (int64, error)
	describeConfig(ctx context.Context, topic, key string) (string, error)
	alterConfig(ctx context.Context, topic, key, value string) error
	close()
}

// member is one consumer-group member.
type member interface {
	// run consumes until ctx ends, committing synchronously, and calls got
	// for each record only once its offset is committed.
	run(ctx context.Context, got func(record)) error
	// close leaves the group.
	close() error
}

type header struct{ Key, Value string }

type record struct {
	Key, Value []byte
	Headers    []header
	Timestamp  time.Time
	Partition  int32
	Offset     int64
}

func (r record) id() string { return string(r.Value[:bytes.IndexByte(r.Value, '|')]) }

// makeRecords builds n keyed records with headers and explicit timestamps;
// values are unique and compress well.
func makeRecords(tag string, n int, t0 time.Time) []record {
	recs := make([]record, n)
	for i := range recs {
		recs[i] = record{
			Key:       []byte(fmt.Sprintf("key-%02d", i%13)),
			Value:     []byte(fmt.Sprintf("%s-%05d|%s", tag, i, strings.Repeat("sluice interop payload ", 8))),
			Headers:   []header{{"seq", fmt.Sprint(i)}, {"tag", tag}},
			Timestamp: t0.Add(time.Duration(i) * time.Millisecond),
			Partition: -1,
			Offset:    -1,
		}
	}
	return recs
}

// verifyExact checks that got is exactly sent: same count, every record
// once with its key, value, headers and timestamp, at the partition and
// offset the producer was told, in produce order within each partition.
func verifyExact(sent, got []record) error {
	byID := map[string]record{}
	for _, r := range sent {
		byID[r.id()] = r
	}
	seen := map[string]bool{}
	last := map[int32]int{} // partition → produce index of the last record read
	var problems []string
	add := func(format string, args ...any) {
		if len(problems) < 5 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	index := map[string]int{}
	for i, r := range sent {
		index[r.id()] = i
	}
	keyPartition := map[string]int32{}
	for _, g := range got {
		id := g.id()
		want, ok := byID[id]
		if !ok {
			add("unexpected record %q at %d/%d", id, g.Partition, g.Offset)
			continue
		}
		if seen[id] {
			add("record %s read twice (at %d/%d)", id, g.Partition, g.Offset)
		}
		seen[id] = true
		if !bytes.Equal(g.Key, want.Key) {
			add("record %s: key %q, want %q", id, g.Key, want.Key)
		}
		if !bytes.Equal(g.Value, want.Value) {
			add("record %s: value differs (%d bytes, want %d)", id, len(g.Value), len(want.Value))
		}
		if !headersEqual(g.Headers, want.Headers) {
			add("record %s: headers %v, want %v", id, g.Headers, want.Headers)
		}
		if !g.Timestamp.Equal(want.Timestamp) {
			add("record %s: timestamp %d, want %d", id, g.Timestamp.UnixMilli(), want.Timestamp.UnixMilli())
		}
		if want.Partition >= 0 && (g.Partition != want.Partition || g.Offset != want.Offset) {
			add("record %s read at %d/%d, producer was told %d/%d", id, g.Partition, g.Offset, want.Partition, want.Offset)
		}
		if p, ok := keyPartition[string(g.Key)]; ok && p != g.Partition {
			add("key %q in partitions %d and %d", g.Key, p, g.Partition)
		}
		keyPartition[string(g.Key)] = g.Partition
		if prev, ok := last[g.Partition]; ok && index[id] < prev {
			add("partition %d: record %s read after a later-produced one", g.Partition, id)
		}
		last[g.Partition] = index[id]
	}
	if len(got) != len(sent) || len(seen) != len(sent) {
		add("read %d records (%d distinct), produced %d", len(got), len(seen), len(sent))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

func headersEqual(a, b []header) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// reporter prints the result lines interop/driver reads.
type reporter struct {
	mu     sync.Mutex
	failed bool
	last   time.Time // when the previous step ended, for the step timings
}

func (r *reporter) pass(capID, format string, args ...any) {
	fmt.Printf("##interop pass %s %s\n", capID, oneLine(fmt.Sprintf(format, args...)))
}

func (r *reporter) skip(capID, format string, args ...any) {
	fmt.Printf("##interop skip %s %s\n", capID, oneLine(fmt.Sprintf(format, args...)))
}

func (r *reporter) fail(capID string, err error) {
	r.mu.Lock()
	r.failed = true
	r.mu.Unlock()
	fmt.Printf("##interop fail %s %s\n", capID, oneLine(err.Error()))
}

// check reports err (or a pass) and returns whether it passed.
func (r *reporter) check(capID string, err error, detail string) bool {
	now := time.Now()
	if !r.last.IsZero() {
		logf("step %s took %v", capID, now.Sub(r.last).Round(time.Millisecond))
	}
	r.last = now
	if err != nil {
		r.fail(capID, err)
		return false
	}
	r.pass(capID, "%s", detail)
	return true
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05.000 ")+format+"\n", args...)
}

const (
	codecPartitions = 3
	groupPartitions = 4
	codecRecords    = 120
	groupRecords    = 100
	// rejoinWait gives a restarted member time to join before the rest of
	// phase 2 is produced.
	rejoinWait = 4 * time.Second
)

func runScenario(ctx context.Context, name string, c client) bool {
	defer c.close()
	rep := &reporter{}
	fmt.Printf("##interop version %s\n", c.version())
	t0 := time.Now().Add(-5 * time.Minute).Truncate(time.Millisecond)

	codecTopic := func(codec string) string { return name + "-codec-" + codec }
	groupTopic := func(strategy string) string { return name + "-group-" + strategy }
	var topics []string
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd", "idempotent"} {
		topics = append(topics, codecTopic(codec))
	}
	step := func(d time.Duration) (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, d) }

	sctx, cancel := step(30 * time.Second)
	err := c.createTopics(sctx, topics, codecPartitions)
	if err == nil {
		err = c.createTopics(sctx, []string{groupTopic("eager"), groupTopic("cooperative"), groupTopic("kip848")}, groupPartitions)
	}
	if err == nil {
		err = expectPartitions(sctx, c, topics, codecPartitions)
	}
	if err == nil {
		err = expectPartitions(sctx, c, []string{groupTopic("eager"), groupTopic("cooperative"), groupTopic("kip848")}, groupPartitions)
	}
	cancel()
	rep.check("create-topic", err, fmt.Sprintf("%d topics, metadata shows their partitions", len(topics)+3))

	supported := map[string]bool{}
	for _, codec := range c.codecs() {
		supported[codec] = true
	}
	var noneSent []record
	for _, codec := range []string{"none", "gzip", "snappy", "lz4", "zstd"} {
		capID := "codec-" + codec
		if !supported[codec] {
			rep.skip(capID, "client has no %s codec", codec)
			continue
		}
		sctx, cancel := step(60 * time.Second)
		sent, err := produceConsume(sctx, c, codecTopic(codec), codec, false, t0)
		cancel()
		rep.check(capID, err, fmt.Sprintf("%d records, acks=all, read back exactly", len(sent)))
		if codec == "none" && err == nil {
			noneSent = sent
		}
	}
	if c.canIdempotent() {
		sctx, cancel := step(60 * time.Second)
		sent, err := produceConsume(sctx, c, codecTopic("idempotent"), "none", true, t0)
		cancel()
		rep.check("idempotence", err, fmt.Sprintf("%d records, idempotent producer, read back exactly", len(sent)))
	} else {
		rep.skip("idempotence", "client has no idempotent producer")
	}

	offered := map[string]bool{}
	for _, st := range c.strategies() {
		offered[st] = true
	}
	// kip848 is Kafka 4's consumer protocol (group.protocol=consumer):
	// the broker assigns.
	for _, st := range []string{"eager", "cooperative", "kip848"} {
		if !offered[st] && st == "kip848" {
			rep.skip("group-"+st, "the client has no KIP-848 consumer protocol")
			continue
		}
		if !offered[st] {
			rep.skip("group-"+st, "the client's group consumer has no %s assignor", st)
			continue
		}
		sctx, cancel := step(150 * time.Second)
		detail, err := groupScenario(sctx, c, groupTopic(st), name+"-"+st, st, t0)
		cancel()
		rep.check("group-"+st, err, detail)
	}

	if noneSent == nil {
		rep.fail("list-offsets", errors.New("not run: the uncompressed produce step failed"))
	} else {
		sctx, cancel = step(30 * time.Second)
		err := checkOffsets(sctx, c, codecTopic("none"), noneSent, t0)
		cancel()
		rep.check("list-offsets", err, "earliest, latest and by-time offsets of every partition")
	}

	sctx, cancel = step(30 * time.Second)
	v, err := c.describeConfig(sctx, codecTopic("none"), "retention.ms")
	if err == nil && v == "" {
		err = errors.New("retention.ms missing from DescribeConfigs")
	}
	rep.check("describe-config", err, "retention.ms="+v)
	const newRetention = "86400000"
	err = c.alterConfig(sctx, codecTopic("none"), "retention.ms", newRetention)
	if err == nil {
		v, err = c.describeConfig(sctx, codecTopic("none"), "retention.ms")
		if err == nil && v != newRetention {
			err = fmt.Errorf("after altering retention.ms to %s, DescribeConfigs says %q", newRetention, v)
		}
	}
	cancel()
	rep.check("alter-config", err, "retention.ms="+newRetention+" read back")

	sctx, cancel = step(60 * time.Second)
	detail, err := txnScenario(sctx, c, name)
	cancel()
	if errors.Is(err, errNoTxn) {
		rep.skip("transactions", "%v", err)
	} else {
		rep.check("transactions", err, detail)
	}
	return !rep.failed
}

func expectPartitions(ctx context.Context, c client, topics []string, want int) error {
	for _, t := range topics {
		n, err := c.partitionCount(ctx, t)
		if err != nil {
			return fmt.Errorf("metadata of %s: %w", t, err)
		}
		if n != want {
			return fmt.Errorf("metadata of %s: %d partitions, created with %d", t, n, want)
		}
	}
	return nil
}

func produceConsume(ctx context.Context, c client, topic, codec string, idempotent bool, t0 time.Time) ([]record, error) {
	sent := makeRecords(topic, codecRecords, t0)
	if err := c.produce(ctx, topic, codec, idempotent, sent); err != nil {
		return nil, fmt.Errorf("produce: %w", err)
	}
	got, err := c.consume(ctx, topic, len(sent))
	if err != nil {
		return nil, fmt.Errorf("consume (%d of %d read): %w", len(got), len(sent), err)
	}
	if err := verifyExact(sent, got); err != nil {
		return nil, err
	}
	// Fill in where each record went, for the offsets step.
	at := map[string]record{}
	for _, g := range got {
		at[g.id()] = g
	}
	for i := range sent {
		g := at[sent[i].id()]
		sent[i].Partition, sent[i].Offset = g.Partition, g.Offset
	}
	return sent, nil
}

// collector gathers what group members report, keyed by record id.
type collector struct {
	mu     sync.Mutex
	counts map[string]int
	phase  string // id prefix of the phase being awaited
	want   int
	done   chan struct{}
	extra  []string // records of an earlier phase delivered again
	all    []record // every delivery, in the order they came
}

func (cl *collector) await(phase string, want int) chan struct{} {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.phase, cl.want, cl.done = phase, want, make(chan struct{})
	return cl.done
}

func (cl *collector) got(r record) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	id := r.id()
	cl.counts[id]++
	cl.all = append(cl.all, r)
	if !strings.HasPrefix(id, cl.phase) {
		cl.extra = append(cl.extra, fmt.Sprintf("%s at %d/%d", id, r.Partition, r.Offset))
		return
	}
	n := 0
	for k := range cl.counts {
		if strings.HasPrefix(k, cl.phase) {
			n++
		}
	}
	if n == cl.want && cl.done != nil {
		close(cl.done)
		cl.done = nil
	}
}

func (cl *collector) summary(prefix string) (distinct, dups int) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for k, n := range cl.counts {
		if strings.HasPrefix(k, prefix) {
			distinct++
			dups += n - 1
		}
	}
	return distinct, dups
}

// runningMember is a member consuming in its own goroutine.
type runningMember struct {
	m      member
	cancel context.CancelFunc
	done   chan error
	count  int
	mu     sync.Mutex
}

func startMember(ctx context.Context, c client, group, topic, strategy string, cl *collector) (*runningMember, error) {
	m, err := c.newMember(ctx, group, topic, strategy)
	if err != nil {
		return nil, err
	}
	mctx, cancel := context.WithCancel(ctx)
	rm := &runningMember{m: m, cancel: cancel, done: make(chan error, 1)}
	go func() {
		rm.done <- m.run(mctx, func(r record) {
			rm.mu.Lock()
			rm.count++
			rm.mu.Unlock()
			cl.got(r)
		})
	}()
	return rm, nil
}

func (rm *runningMember) stop() error {
	rm.cancel()
	err := <-rm.done
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	if cerr := rm.m.close(); err == nil {
		err = cerr
	}
	return err
}

func (rm *runningMember) consumed() int {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	return rm.count
}

// groupScenario: two members split the topic and consume phase 1 once,
// committing; one leaves; phase 2 is produced; a new member joins; the
// group must deliver exactly phase 2, resuming from the committed offsets.
func groupScenario(ctx context.Context, c client, topic, group, strategy string, t0 time.Time) (string, error) {
	cl := &collector{counts: map[string]int{}}
	phase1 := makeRecords(topic+"-p1", groupRecords, t0)
	if err := c.produce(ctx, topic, "none", false, phase1); err != nil {
		return "", fmt.Errorf("produce phase 1: %w", err)
	}
	wait1 := cl.await(topic+"-p1", groupRecords)
	a, err := startMember(ctx, c, group, topic, strategy, cl)
	if err != nil {
		return "", fmt.Errorf("member A: %w", err)
	}
	b, err := startMember(ctx, c, group, topic, strategy, cl)
	if err != nil {
		a.stop()
		return "", fmt.Errorf("member B: %w", err)
	}
	defer b.stop()
	if err := awaitPhase(ctx, wait1, cl, topic+"-p1", a, b); err != nil {
		a.stop()
		return "", fmt.Errorf("phase 1 (two members): %w", err)
	}
	split := fmt.Sprintf("phase 1 split %d/%d", a.consumed(), b.consumed())
	bBefore := b.consumed()
	if err := a.stop(); err != nil {
		return "", fmt.Errorf("member A leaving: %w", err)
	}
	phase2 := makeRecords(topic+"-p2", groupRecords, t0.Add(time.Second))
	wait2 := cl.await(topic+"-p2", groupRecords)
	// Half of phase 2 before the restarted member joins (the survivor takes
	// over the leaver's partitions from their committed offsets), half once
	// it has had time to get partitions of its own (it resumes from the
	// survivor's commits).
	if err := c.produce(ctx, topic, "none", false, phase2[:groupRecords/2]); err != nil {
		return "", fmt.Errorf("produce phase 2: %w", err)
	}
	a2, err := startMember(ctx, c, group, topic, strategy, cl)
	if err != nil {
		return "", fmt.Errorf("member A restarted: %w", err)
	}
	time.Sleep(rejoinWait)
	if err := c.produce(ctx, topic, "none", false, phase2[groupRecords/2:]); err != nil {
		a2.stop()
		return "", fmt.Errorf("produce phase 2: %w", err)
	}
	err = awaitPhase(ctx, wait2, cl, topic+"-p2", a2, b)
	// Give late duplicates a moment to show up before judging.
	time.Sleep(500 * time.Millisecond)
	if stopErr := a2.stop(); err == nil && stopErr != nil {
		err = fmt.Errorf("restarted member leaving: %w", stopErr)
	}
	if err != nil {
		return "", fmt.Errorf("phase 2 (after restart): %w", err)
	}
	if len(cl.extra) > 0 {
		return "", fmt.Errorf("did not resume from the committed offsets: %d phase-1 records delivered again after restart, e.g. %s", len(cl.extra), cl.extra[0])
	}
	for _, p := range []string{topic + "-p1", topic + "-p2"} {
		if _, dups := cl.summary(p); dups > 0 {
			return "", fmt.Errorf("%d records of %s delivered twice though every delivery was committed first", dups, p)
		}
	}
	return fmt.Sprintf("%s; phase 2 split %d/%d after restart", split, a2.consumed(), b.consumed()-bBefore), nil
}

func awaitPhase(ctx context.Context, done chan struct{}, cl *collector, prefix string, ms ...*runningMember) error {
	for {
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			n, _ := cl.summary(prefix)
			return fmt.Errorf("only %d of %d records consumed before the deadline", n, groupRecords)
		default:
		}
		for _, m := range ms {
			select {
			case err := <-m.done:
				m.done <- err
				return fmt.Errorf("member stopped: %w", err)
			default:
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func checkOffsets(ctx context.Context, c client, topic string, sent []record, t0 time.Time) error {
	wantLatest := map[int32]int64{}
	for _, r := range sent {
		if r.Offset+1 > wantLatest[r.Partition] {
			wantLatest[r.Partition] = r.Offset + 1
		}
	}
	earliest, latest, err := c.listOffsets(ctx, topic)
	if err != nil {
		return err
	}
	for p := int32(0); p < codecPartitions; p++ {
		if earliest[p] != 0 {
			return fmt.Errorf("partition %d: earliest %d, want 0", p, earliest[p])
		}
		if latest[p] != wantLatest[p] {
			return fmt.Errorf("partition %d: latest %d, want %d", p, latest[p], wantLatest[p])
		}
	}
	// By time: the first record of each partition, and one in the middle.
	byPart := map[int32][]record{}
	for _, r := range sent {
		byPart[r.Partition] = append(byPart[r.Partition], r)
	}
	parts := make([]int32, 0, len(byPart))
	for p := range byPart {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	for _, p := range parts {
		rs := byPart[p]
		for _, probe := range []struct {
			ts   time.Time
			want int64
		}{
			{t0.Add(-time.Hour), rs[0].Offset},
			{rs[len(rs)/2].Timestamp, rs[len(rs)/2].Offset},
		} {
			got, err := c.offsetForTime(ctx, topic, p, probe.ts)
			if err != nil {
				return fmt.Errorf("partition %d by time %d: %w", p, probe.ts.UnixMilli(), err)
			}
			if got != probe.want {
				return fmt.Errorf("partition %d by time %d: offset %d, want %d", p, probe.ts.UnixMilli(), got, probe.want)
			}
		}
	}
	return nil
}
