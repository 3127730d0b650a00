package compare

// The share-group benchmark (`benchcompare share`): ten franz-go share
// consumers of one group on one partition, each acknowledging every
// record, against Sluice and Apache Kafka 4.4 on fresh brokers, rounds
// alternating. Records are produced first (share.auto.offset.reset =
// earliest), then consumed:
//
//   - records/s: distinct records delivered over the time from the first
//     delivery to the last;
//   - redelivery: every --release-every'th record is released (AckRelease)
//     on its first delivery instead of accepted; the time from the poll
//     that released it to its next delivery, p50 and p99 (the release goes
//     to the broker with the consumer's next fetch, on both brokers alike).
//
// A record delivered again that was accepted is counted and reported: it
// must be 0.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/bench"
)

// ShareOptions configures the share-group benchmark.
type ShareOptions struct {
	Brokers      []BrokerKind
	Rounds       int
	Records      int
	Consumers    int
	ReleaseEvery int
	ValueBytes   int
	KafkaLibs    string
	Java         string
	SluiceBin    string
	WorkDir      string
}

// ShareResult is one run.
type ShareResult struct {
	Broker        BrokerKind
	Round         int
	RecordsPerSec float64
	Redelivered   int
	RedeliveryP50 time.Duration
	RedeliveryP99 time.Duration
	AcceptedAgain int // accepted records delivered again: must be 0
	AckErrors     map[string]int
	Err           error
}

// ShareMain runs `benchcompare share`.
func ShareMain(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("benchcompare share", flag.ContinueOnError)
	o := ShareOptions{}
	home, _ := os.UserHomeDir()
	brokers := "kafka,sluice"
	fs.StringVar(&brokers, "brokers", brokers, "brokers to compare, alternating")
	fs.IntVar(&o.Rounds, "rounds", 3, "rounds; each broker runs once per round on a fresh data dir")
	fs.IntVar(&o.Records, "records", 100_000, "records produced, then consumed by the share group")
	fs.IntVar(&o.Consumers, "consumers", 10, "share consumers in the group (one partition)")
	fs.IntVar(&o.ReleaseEvery, "release-every", 100, "release every Nth record on its first delivery (0: none)")
	fs.IntVar(&o.ValueBytes, "value-bytes", 100, "record value size")
	fs.StringVar(&o.KafkaLibs, "kafka-libs", filepath.Join(home, ".cache", "sluice-bench", "kafka-"+KafkaVersion, "libs"), "directory of Apache Kafka's jars")
	fs.StringVar(&o.Java, "java", "java", "java binary for Kafka")
	fs.StringVar(&o.SluiceBin, "sluice-bin", "", "sluice binary (default: beside this binary, else on $PATH)")
	fs.StringVar(&o.WorkDir, "work-dir", "", "where data dirs and logs go (default: a new temp dir)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	for _, b := range bench.SplitList(brokers) {
		o.Brokers = append(o.Brokers, BrokerKind(b))
	}
	res, err := RunShare(ctx, o, os.Stderr)
	WriteShareSummary(os.Stdout, o, res)
	return err
}

// RunShare runs every broker once per round.
func RunShare(ctx context.Context, o ShareOptions, log io.Writer) ([]ShareResult, error) {
	env := brokerEnv{sluice: o.SluiceBin, java: o.Java, kafkaLibs: o.KafkaLibs, workDir: o.WorkDir}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if env.sluice == "" {
		if env.sluice, err = findSluice(self); err != nil {
			return nil, err
		}
	}
	if env.workDir == "" {
		if env.workDir, err = os.MkdirTemp("", "sluice-share-bench-"); err != nil {
			return nil, err
		}
	}
	env.logDir = filepath.Join(env.workDir, "logs")
	if err := os.MkdirAll(env.logDir, 0o755); err != nil {
		return nil, err
	}
	var out []ShareResult
	for round := 1; round <= o.Rounds; round++ {
		for _, kind := range o.Brokers {
			fmt.Fprintf(log, "share: round %d, %s\n", round, kind)
			r := runShareOnce(ctx, env, kind, round, o)
			if r.Err != nil {
				fmt.Fprintf(log, "share: %s round %d: %v\n", kind, round, r.Err)
			} else {
				fmt.Fprintf(log, "share: %s round %d: %.0f records/s, %d redelivered (p50 %v, p99 %v), %d accepted delivered again, ack errors %v\n",
					kind, round, r.RecordsPerSec, r.Redelivered, r.RedeliveryP50, r.RedeliveryP99, r.AcceptedAgain, r.AckErrors)
			}
			out = append(out, r)
			if ctx.Err() != nil {
				return out, ctx.Err()
			}
		}
	}
	return out, nil
}

func runShareOnce(ctx context.Context, env brokerEnv, kind BrokerKind, round int, o ShareOptions) ShareResult {
	res := ShareResult{Broker: kind, Round: round}
	b, err := env.startBroker(ctx, kind, fmt.Sprintf("share-r%d", round))
	if err != nil {
		res.Err = err
		return res
	}
	defer func() {
		b.stop()
		os.RemoveAll(b.dataDir)
	}()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := prepareShareTopic(ctx, b.addr, o); err != nil {
		res.Err = err
		return res
	}
	consumeShare(ctx, b.addr, o, &res)
	return res
}

const shareBenchTopic, shareBenchGroup = "share-bench", "share-bench-group"

// prepareShareTopic creates the topic, points the group at its start and
// produces the records.
func prepareShareTopic(ctx context.Context, addr string, o ShareOptions) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.DefaultProduceTopic(shareBenchTopic),
		kgo.ProducerLinger(5*time.Millisecond), kgo.AllowAutoTopicCreation())
	if err != nil {
		return err
	}
	defer cl.Close()
	create := kmsg.NewPtrCreateTopicsRequest()
	ct := kmsg.NewCreateTopicsRequestTopic()
	ct.Topic, ct.NumPartitions, ct.ReplicationFactor = shareBenchTopic, 1, 1
	create.Topics = []kmsg.CreateTopicsRequestTopic{ct}
	if _, err := create.RequestWith(ctx, cl); err != nil {
		return fmt.Errorf("create topic: %w", err)
	}
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, shareBenchGroup
	res.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "share.auto.offset.reset", Value: kmsg.StringPtr("earliest")}}
	alter.Resources = []kmsg.IncrementalAlterConfigsRequestResource{res}
	if resp, err := alter.RequestWith(ctx, cl); err != nil || resp.Resources[0].ErrorCode != 0 {
		return fmt.Errorf("group config: %v %+v", err, resp)
	}
	value := make([]byte, o.ValueBytes)
	var wg sync.WaitGroup
	var perr error
	var mu sync.Mutex
	for i := range o.Records {
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Key: []byte(strconv.Itoa(i)), Value: value}, func(_ *kgo.Record, err error) {
			defer wg.Done()
			if err != nil {
				mu.Lock()
				perr = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return perr
}

// shareTally is what the consumers saw.
type shareTally struct {
	mu        sync.Mutex
	seen      map[int64]int       // deliveries per offset
	released  map[int64]time.Time // released offsets, when
	redeliver []time.Duration
	accepted  map[int64]bool
	again     int
	ackErrs   map[string]int // acknowledgement errors the client reported
	first     time.Time
	last      time.Time
}

// consumeShare runs the consumers until every record was delivered and
// every released one redelivered.
func consumeShare(ctx context.Context, addr string, o ShareOptions, res *ShareResult) {
	t := &shareTally{seen: map[int64]int{}, released: map[int64]time.Time{}, accepted: map[int64]bool{}, ackErrs: map[string]int{}}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wantRedeliveries := 0
	if o.ReleaseEvery > 0 {
		wantRedeliveries = (o.Records + o.ReleaseEvery - 1) / o.ReleaseEvery
	}
	done := func() bool { return len(t.seen) >= o.Records && len(t.redeliver) >= wantRedeliveries }
	var wg sync.WaitGroup
	for range o.Consumers {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ShareGroup(shareBenchGroup), kgo.ConsumeTopics(shareBenchTopic),
			kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
				if err := rs.Error(); err != nil {
					t.mu.Lock()
					t.ackErrs[err.Error()]++
					t.mu.Unlock()
				}
			}))
		if err != nil {
			res.Err = err
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			for ctx.Err() == nil {
				fs := cl.PollFetches(ctx)
				now := time.Now()
				var release []*kgo.Record
				t.mu.Lock()
				fs.EachRecord(func(r *kgo.Record) {
					// Once everything arrived, consumers closing release
					// what they hold unacknowledged: not counted.
					if !done() && t.record(r, now, o.ReleaseEvery) {
						release = append(release, r)
					}
				})
				finished := done()
				t.mu.Unlock()
				if len(release) > 0 { // with no records MarkAcks marks the whole poll
					cl.MarkAcks(kgo.AckRelease, release...)
				}
				cl.MarkAcks(kgo.AckAccept)
				if finished {
					cancel()
				}
			}
		}()
	}
	wg.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !done() {
		res.Err = fmt.Errorf("consumed %d of %d records, %d of %d redeliveries before the deadline", len(t.seen), o.Records, len(t.redeliver), wantRedeliveries)
		return
	}
	res.RecordsPerSec = float64(len(t.seen)) / t.last.Sub(t.first).Seconds()
	res.Redelivered = len(t.redeliver)
	slices.Sort(t.redeliver)
	res.RedeliveryP50 = percentile(t.redeliver, 0.50)
	res.RedeliveryP99 = percentile(t.redeliver, 0.99)
	res.AcceptedAgain = t.again
	res.AckErrors = t.ackErrs
}

// record counts one delivery; it reports whether the record is to be
// released (its first delivery, every releaseEvery'th offset). t.mu is
// held.
func (t *shareTally) record(r *kgo.Record, now time.Time, releaseEvery int) bool {
	if t.first.IsZero() {
		t.first = now
	}
	t.last = now
	n := t.seen[r.Offset] + 1
	t.seen[r.Offset] = n
	if t.accepted[r.Offset] {
		t.again++
	}
	if at, ok := t.released[r.Offset]; ok && n == 2 {
		t.redeliver = append(t.redeliver, now.Sub(at))
	}
	if n == 1 && releaseEvery > 0 && r.Offset%int64(releaseEvery) == 0 {
		t.released[r.Offset] = now
		return true
	}
	t.accepted[r.Offset] = true
	return false
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.5) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// WriteShareSummary prints the medians per broker and Sluice ÷ Kafka.
func WriteShareSummary(w io.Writer, o ShareOptions, res []ShareResult) {
	fmt.Fprintf(w, "\nshare groups: %d consumers, one partition, %d records of %d bytes, every %dth released once; median of %d rounds\n\n",
		o.Consumers, o.Records, o.ValueBytes, o.ReleaseEvery, o.Rounds)
	fmt.Fprintln(w, "| broker | records/s | redelivery p50 | redelivery p99 | accepted delivered again | runs |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	med := map[BrokerKind]float64{}
	for _, kind := range o.Brokers {
		var rates []float64
		var p50, p99 []time.Duration
		again := 0
		for _, r := range res {
			if r.Broker != kind || r.Err != nil {
				continue
			}
			rates, p50, p99 = append(rates, r.RecordsPerSec), append(p50, r.RedeliveryP50), append(p99, r.RedeliveryP99)
			again += r.AcceptedAgain
		}
		if len(rates) == 0 {
			fmt.Fprintf(w, "| %s | failed | | | | 0 |\n", kind.Title())
			continue
		}
		sort.Float64s(rates)
		slices.Sort(p50)
		slices.Sort(p99)
		med[kind] = rates[len(rates)/2]
		fmt.Fprintf(w, "| %s | %.0f (%.0f-%.0f) | %v | %v | %d | %d |\n", kind.Title(), med[kind], rates[0], rates[len(rates)-1],
			p50[len(p50)/2].Round(time.Millisecond), p99[len(p99)/2].Round(time.Millisecond), again, len(rates))
	}
	if k, s := med[Kafka], med[Sluice]; k > 0 && s > 0 {
		fmt.Fprintf(w, "\nSluice ÷ Kafka records/s: %.2f\n", s/k)
	}
}
