package compare

// benchcompare rebalance: how long a consumer group takes to take in one
// more member, on the classic protocol (franz-go's cooperative-sticky
// balancer, client-side) and on KIP-848's consumer protocol (the broker
// assigns), against Sluice and Apache Kafka in one run.
//
// Each round, each broker starts fresh; per protocol, members of one
// group (franz-go, defaults: classic heartbeats every 3 s, consumer-protocol
// heartbeats as the broker says, 5 s on both) split a topic until every
// partition has one owner and every member some; then one more member is
// started and the clock runs until every partition again has exactly one
// owner and every member at least partitions/members of them, as the
// members' own assignment callbacks report it.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/bench"
)

// rebalanceOptions configure a rebalance run.
type rebalanceOptions struct {
	brokers    []BrokerKind
	rounds     int
	members    int
	partitions int32
	timeout    time.Duration
	env        brokerEnv
}

// RebalanceMain is `benchcompare rebalance`.
func RebalanceMain(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("benchcompare rebalance", flag.ContinueOnError)
	o := rebalanceOptions{}
	brokers := fs.String("brokers", "kafka,sluice", "brokers to compare")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds (a fresh broker per broker per round)")
	fs.IntVar(&o.members, "members", 10, "members before the one that joins")
	partitions := fs.Int("partitions", 100, "partitions of the group's topic")
	fs.DurationVar(&o.timeout, "timeout", 2*time.Minute, "give up on one rebalance after this long")
	home, _ := os.UserHomeDir()
	fs.StringVar(&o.env.kafkaLibs, "kafka-libs", filepath.Join(home, ".cache", "sluice-bench", "kafka-"+KafkaVersion, "libs"), "directory of Apache Kafka's jars")
	fs.StringVar(&o.env.java, "java", "java", "java binary for Kafka")
	fs.StringVar(&o.env.sluice, "sluice-bin", "", "sluice binary (default: beside this binary, else on $PATH)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	o.partitions = int32(*partitions)
	for _, b := range bench.SplitList(*brokers) {
		o.brokers = append(o.brokers, BrokerKind(b))
	}
	if o.env.sluice == "" {
		self, err := os.Executable()
		if err != nil {
			return err
		}
		if o.env.sluice, err = findSluice(self); err != nil {
			return err
		}
	}
	work, err := os.MkdirTemp("", "sluice-rebalance-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	o.env.workDir, o.env.logDir = work, filepath.Join(work, "logs")
	if err := os.MkdirAll(o.env.logDir, 0o755); err != nil {
		return err
	}
	results, err := runRebalance(ctx, o, os.Stderr)
	writeRebalance(os.Stdout, o, results)
	return err
}

// rebalanceKey names one series: a broker and a protocol.
type rebalanceKey struct {
	broker   BrokerKind
	protocol string
}

var rebalanceProtocols = []string{"classic", "consumer"}

func runRebalance(ctx context.Context, o rebalanceOptions, log io.Writer) (map[rebalanceKey][]time.Duration, error) {
	out := map[rebalanceKey][]time.Duration{}
	for round := 1; round <= o.rounds; round++ {
		for _, kind := range o.brokers {
			b, err := o.env.startBroker(ctx, kind, fmt.Sprintf("rebalance-%d", round))
			if err != nil {
				return out, err
			}
			for _, proto := range rebalanceProtocols {
				d, err := measureJoin(ctx, b.addr, proto, fmt.Sprintf("rb-%s-%d", proto, round), o)
				if err != nil {
					b.stop()
					return out, fmt.Errorf("%s %s round %d: %w", kind, proto, round, err)
				}
				k := rebalanceKey{kind, proto}
				out[k] = append(out[k], d)
				fmt.Fprintf(log, "rebalance: round %d %s %s: %v\n", round, kind.Title(), proto, d.Round(time.Millisecond))
			}
			b.stop()
		}
	}
	return out, nil
}

// owners tracks which member owns each partition, from the members'
// callbacks.
type owners struct {
	mu    sync.Mutex
	owner map[int32]map[int]bool // partition → members that say they own it
}

func (w *owners) set(member int, ps []int32, own bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range ps {
		if w.owner[p] == nil {
			w.owner[p] = map[int]bool{}
		}
		if own {
			w.owner[p][member] = true
		} else {
			delete(w.owner[p], member)
		}
	}
}

// settled reports whether every partition has exactly one owner and each
// of the members owns at least min partitions.
func (w *owners) settled(partitions int32, members, min int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	counts := make([]int, members)
	for p := int32(0); p < partitions; p++ {
		if len(w.owner[p]) != 1 {
			return false
		}
		for m := range w.owner[p] {
			if m < members {
				counts[m]++
			}
		}
	}
	for _, n := range counts {
		if n < min {
			return false
		}
	}
	return true
}

func measureJoin(ctx context.Context, addr, proto, name string, o rebalanceOptions) (time.Duration, error) {
	adm, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return 0, err
	}
	defer adm.Close()
	if _, err := kadm.NewClient(adm).CreateTopic(ctx, o.partitions, 1, nil, name); err != nil {
		return 0, err
	}
	w := &owners{owner: map[int32]map[int]bool{}}
	var clients []*kgo.Client
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	start := func(i int) error {
		opts := []kgo.Opt{
			kgo.SeedBrokers(addr), kgo.ConsumerGroup(name), kgo.ConsumeTopics(name),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { w.set(i, m[name], true) }),
			kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { w.set(i, m[name], false) }),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) { w.set(i, m[name], false) }),
		}
		if proto == "consumer" {
			opts = append(opts, kgo.ServerSideBalancer())
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return err
		}
		clients = append(clients, cl)
		go func() {
			for cl.PollFetches(ctx).Err0() == nil {
			}
		}()
		return nil
	}
	for i := range o.members {
		if err := start(i); err != nil {
			return 0, err
		}
	}
	if err := waitSettled(ctx, w, o.partitions, o.members, 1, o.timeout); err != nil {
		return 0, fmt.Errorf("the first %d members: %w", o.members, err)
	}
	t0 := time.Now()
	if err := start(o.members); err != nil {
		return 0, err
	}
	n := o.members + 1
	if err := waitSettled(ctx, w, o.partitions, n, int(o.partitions)/n, o.timeout); err != nil {
		return 0, fmt.Errorf("member %d joining: %w", n, err)
	}
	return time.Since(t0), nil
}

func waitSettled(ctx context.Context, w *owners, partitions int32, members, min int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for !w.settled(partitions, members, min) {
		if time.Now().After(deadline) {
			return fmt.Errorf("not settled within %v", limit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// writeRebalance prints the medians as a Markdown table.
func writeRebalance(w io.Writer, o rebalanceOptions, results map[rebalanceKey][]time.Duration) {
	fmt.Fprintf(w, "Time for member %d to join a group of %d on %d partitions (median of %d rounds, min–max):\n\n",
		o.members+1, o.members, o.partitions, o.rounds)
	fmt.Fprintln(w, "| broker | classic (cooperative-sticky) | consumer (KIP-848) |")
	fmt.Fprintln(w, "|---|---|---|")
	for _, b := range o.brokers {
		fmt.Fprintf(w, "| %s |", b.Title())
		for _, p := range rebalanceProtocols {
			ds := results[rebalanceKey{b, p}]
			if len(ds) == 0 {
				fmt.Fprint(w, " — |")
				continue
			}
			sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
			fmt.Fprintf(w, " %.2f s (%.2f–%.2f) |", ds[len(ds)/2].Seconds(), ds[0].Seconds(), ds[len(ds)-1].Seconds())
		}
		fmt.Fprintln(w)
	}
}
