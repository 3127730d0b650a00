package bench

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// drainTimeout bounds how long consumers may lag behind the last produced
// record (or a catch-up read may take) before the run gives up on them.
const drainTimeout = 60 * time.Second

// run is the shared state of one Run.
type run struct {
	cfg   Config
	runID uint64
	start time.Time // first send

	produced, producedBytes atomic.Int64 // acknowledged
	consumed, consumedBytes atomic.Int64
	claimed                 atomic.Int64 // records handed to producers (--records)
	errs                    atomic.Int64
	firstErr                atomic.Pointer[string]

	ack, e2e *Recorder
	commit   *Recorder // transactional producers: EndTransaction(commit)
	lag      *Recorder // raw-produce at a fixed rate: send time - scheduled time
	rtt      *Recorder // raw-produce: response time - send time
	hooks    Hooks
	tls      *tls.Config    // nil: plaintext
	reqs     requestCounter // the run's clients' produce and fetch requests
}

// requestCounter counts the produce and fetch requests the run's clients
// write (a kgo hook): records per request is what a client pays for, and
// it depends on the broker (a slower acknowledgement lets the producer
// gather a bigger batch).
type requestCounter struct{ produce, fetch atomic.Int64 }

func (c *requestCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	switch {
	case err != nil:
	case key == 0:
		c.produce.Add(1)
	case key == 1:
		c.fetch.Add(1)
	}
}

// reset starts the count over (when the measured span starts).
func (c *requestCounter) reset() { c.produce.Store(0); c.fetch.Store(0) }

// Hooks let a caller act between a run's phases.
type Hooks struct {
	// BeforeRead is called when a catch-up or raw-fetch run has produced
	// everything and is about to read it back.
	BeforeRead func()
}

// Run executes one load-generator run against cfg.Brokers. Progress lines go
// to progress (nil for none).
func Run(ctx context.Context, cfg Config, progress io.Writer) (*Result, error) {
	return RunWith(ctx, cfg, progress, Hooks{})
}

// RunWith is Run with hooks.
func RunWith(ctx context.Context, cfg Config, progress io.Writer, hooks Hooks) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.BrokerMetrics == "" {
		return runWith(ctx, cfg, progress, hooks)
	}
	bl := NewBrokerLatency(cfg.BrokerMetrics)
	before, err := bl.Read(ctx)
	if err != nil {
		return nil, fmt.Errorf("--broker-metrics: %w", err)
	}
	res, err := runWith(ctx, cfg, progress, hooks)
	if res != nil {
		after, lerr := bl.Read(context.WithoutCancel(ctx))
		if lerr != nil {
			return res, errors.Join(err, fmt.Errorf("--broker-metrics: %w", lerr))
		}
		res.BrokerLatency = BrokerLatencyDelta(before, after)
	}
	return res, err
}

func runWith(ctx context.Context, cfg Config, progress io.Writer, hooks Hooks) (*Result, error) {
	r := &run{cfg: cfg, runID: rand.Uint64(), ack: NewRecorder(), e2e: NewRecorder(), commit: NewRecorder(), lag: NewRecorder(), rtt: NewRecorder(), hooks: hooks}
	res := &Result{Config: cfg, Started: time.Now()}
	var err error
	if r.tls, err = cfg.tlsConfig(); err != nil {
		return nil, err
	}

	admin, err := kgo.NewClient(r.clientOpts()...)
	if err != nil {
		return nil, err
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	if !cfg.KeepTopic {
		if err := createTopic(ctx, adm, cfg); err != nil {
			return nil, err
		}
	}
	if cfg.Mode == ModeRawProduce {
		return r.rawProduceRun(ctx, res, progress)
	}
	producers, err := r.newProducers(ctx)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, p := range producers {
			p.cl.Close()
		}
	}()
	startOffsets, err := endOffsets(ctx, adm, cfg.Topic)
	if err != nil {
		return nil, err
	}

	var stopProgress func()
	if progress != nil && cfg.Progress > 0 {
		stopProgress = r.startProgress(progress, cfg.Progress)
	}
	defer func() {
		if stopProgress != nil {
			stopProgress()
		}
	}()

	switch cfg.Mode {
	case ModeProduceConsume:
		err = r.produceAndConsume(ctx, producers, startOffsets, res)
	case ModeCatchUp, ModeRawFetch:
		r.start = time.Now()
		err = r.produceThenRead(ctx, adm, producers, startOffsets, res)
	}
	if stopProgress != nil {
		stopProgress()
		stopProgress = nil
	}
	res.ProduceLatency = r.ack.Summary()
	res.EndToEnd = r.e2e.Summary()
	if cfg.TxnRecords > 0 {
		res.CommitLatency = r.commit.Summary()
	}
	res.ProduceRequests, res.FetchRequests = r.reqs.produce.Load(), r.reqs.fetch.Load()
	res.ProduceErrors = r.errs.Load()
	if p := r.firstErr.Load(); p != nil {
		res.FirstError = *p
	}
	return res, err
}

// rawProduceRun is a run of ModeRawProduce: no franz-go producer, no
// consumer.
func (r *run) rawProduceRun(ctx context.Context, res *Result, progress io.Writer) (*Result, error) {
	ps, err := r.rawProducers(ctx)
	if err != nil {
		return nil, err
	}
	r.start = time.Now()
	if progress != nil && r.cfg.Progress > 0 {
		stop := r.startProgress(progress, r.cfg.Progress)
		defer stop()
	}
	tp, err := r.rawProduce(ctx, ps)
	res.Produce = tp
	res.ProduceLatency = r.ack.Summary()
	res.ProduceRequests = r.reqs.produce.Load()
	res.SendLag, res.RoundTrip = r.lag.Summary(), r.rtt.Summary()
	res.ProduceErrors = r.errs.Load()
	if p := r.firstErr.Load(); p != nil {
		res.FirstError = *p
	}
	return res, err
}

func (r *run) produceAndConsume(ctx context.Context, producers []producer, start map[int32]int64, res *Result) error {
	var produceDone atomic.Bool
	var wg, ready sync.WaitGroup
	consErr := make(chan error, r.cfg.Consumers)
	var lastConsume atomic.Int64 // unix ns of the newest consumed record
	for i := 0; i < r.cfg.Consumers; i++ {
		parts := assign(start, i, r.cfg.Consumers)
		if len(parts) == 0 {
			continue
		}
		wg.Add(1)
		ready.Add(1)
		go func() {
			defer wg.Done()
			consErr <- r.consume(ctx, parts, func() bool {
				return produceDone.Load() && r.consumed.Load() >= r.produced.Load()
			}, &lastConsume, ready.Done)
		}()
	}
	// Consumers have polled once (connected, fetching) before the clock
	// starts, so end-to-end latency does not include their start-up.
	ready.Wait()
	r.reqs.reset()
	r.start = time.Now()
	perr := r.produceAll(ctx, producers)
	pEnd := time.Now()
	res.Produce = newThroughput(r.produced.Load(), r.producedBytes.Load(), pEnd.Sub(r.start))
	produceDone.Store(true)
	wg.Wait()
	close(consErr)
	if r.cfg.Consumers > 0 {
		end := time.Unix(0, lastConsume.Load())
		if end.Before(r.start) {
			end = r.start
		}
		res.Consume = newThroughput(r.consumed.Load(), r.consumedBytes.Load(), end.Sub(r.start))
	}
	for err := range consErr {
		if err != nil && perr == nil {
			perr = err
		}
	}
	return perr
}

func (r *run) produceThenRead(ctx context.Context, adm *kadm.Client, producers []producer, start map[int32]int64, res *Result) error {
	if err := r.produceAll(ctx, producers); err != nil {
		return err
	}
	res.Produce = newThroughput(r.produced.Load(), r.producedBytes.Load(), time.Since(r.start))
	end, err := endOffsets(ctx, adm, r.cfg.Topic)
	if err != nil {
		return err
	}
	var want int64
	for p, e := range end {
		want += e - start[p]
	}
	if r.cfg.TxnRecords > 0 {
		want = r.produced.Load() // the offsets count the markers too
	}
	if r.hooks.BeforeRead != nil {
		r.hooks.BeforeRead()
	}
	readStart := time.Now()
	if r.cfg.Mode == ModeRawFetch {
		tp, err := RawFetch(ctx, r.cfg.Brokers, r.tls, r.cfg.Topic, r.cfg.Consumers, start, end, &r.consumed, &r.consumedBytes)
		if err != nil {
			return err
		}
		res.Consume = tp
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, r.cfg.Consumers)
	var last atomic.Int64
	for i := 0; i < r.cfg.Consumers; i++ {
		parts := assign(start, i, r.cfg.Consumers)
		if len(parts) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- r.consume(ctx, parts, func() bool { return r.consumed.Load() >= want }, &last, nil)
		}()
	}
	wg.Wait()
	close(errs)
	res.Consume = newThroughput(r.consumed.Load(), r.consumedBytes.Load(), time.Unix(0, last.Load()).Sub(readStart))
	for err := range errs {
		if err != nil {
			return err
		}
	}
	if got := r.consumed.Load(); got < want {
		return fmt.Errorf("catch-up read %d of %d records", got, want)
	}
	return nil
}

// assign gives consumer i of n every n-th partition, at its start offset.
func assign(start map[int32]int64, i, n int) map[int32]kgo.Offset {
	out := make(map[int32]kgo.Offset)
	for p, off := range start {
		if int(p)%n == i {
			out[p] = kgo.NewOffset().At(off)
		}
	}
	return out
}

// newProducers makes the producer clients and sends one record through each
// (outside the measurement: metadata, connections and producer ids are then
// in place before the clock starts).
func (r *run) newProducers(ctx context.Context) ([]producer, error) {
	acks, _ := r.cfg.acks()
	codec, _ := r.cfg.codec()
	opts := append(r.clientOpts(),
		kgo.DefaultProduceTopic(r.cfg.Topic),
		kgo.RequiredAcks(acks),
		kgo.ProducerLinger(r.cfg.Linger),
		kgo.ProducerBatchMaxBytes(int32(r.cfg.BatchBytes)),
		kgo.ProducerBatchCompression(codec),
		kgo.RecordDeliveryTimeout(drainTimeout),
		kgo.WithHooks(&r.reqs),
	)
	if r.cfg.Acks != "all" && r.cfg.Acks != "-1" {
		// Idempotence needs acks=all. Without it franz-go keeps one
		// produce request in flight per broker; allow the Java producer's
		// default (and franz-go's idempotent one) of 5.
		opts = append(opts, kgo.DisableIdempotentWrite(), kgo.MaxProduceRequestsInflightPerBroker(5))
	}
	clients := make([]*kgo.Client, r.cfg.Producers)
	closeAll := func() {
		for _, c := range clients {
			if c != nil {
				c.Close()
			}
		}
	}
	for i := range clients {
		copts := opts
		if r.cfg.TxnRecords > 0 {
			copts = append(copts[:len(copts):len(copts)], kgo.TransactionalID(fmt.Sprintf("sluice-bench-%x-%d", r.runID, i)))
		}
		cl, err := kgo.NewClient(copts...)
		if err != nil {
			closeAll()
			return nil, err
		}
		clients[i] = cl
	}
	// Warm all clients at once (100 of them one by one would take a while).
	errs := make(chan error, len(clients))
	for _, cl := range clients {
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			errs <- r.warmUp(wctx, cl)
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			closeAll()
			return nil, fmt.Errorf("producer warm-up: %w", err)
		}
	}
	ps := make([]producer, len(clients))
	for i, cl := range clients {
		ps[i] = producer{cl, newPayloads(r.cfg.RecordSize, r.runID, r.cfg.Compressible, uint64(i))}
	}
	return ps, nil
}

// warmUp sends one record (in a committed transaction for transactional
// producers).
func (r *run) warmUp(ctx context.Context, cl *kgo.Client) error {
	rec := &kgo.Record{Value: make([]byte, r.cfg.RecordSize)}
	if r.cfg.TxnRecords <= 0 {
		return cl.ProduceSync(ctx, rec).FirstErr()
	}
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
		return err
	}
	return cl.EndTransaction(ctx, kgo.TryCommit)
}

// producer is a producer client and its value source.
type producer struct {
	cl *kgo.Client
	pl *payloads
}

// produceAll runs the producers until Duration passes or Records are sent,
// then waits for every acknowledgement.
func (r *run) produceAll(ctx context.Context, producers []producer) error {
	var wg sync.WaitGroup
	for _, p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.produce(ctx, p.cl, p.pl)
		}()
	}
	wg.Wait()
	return ctx.Err()
}

// produce is one producer's loop.
func (r *run) produce(ctx context.Context, cl *kgo.Client, pl *payloads) {
	rate := r.cfg.Rate / float64(r.cfg.Producers)
	deadline := r.start.Add(r.cfg.Duration)
	promise := func(rec *kgo.Record, err error) {
		if err != nil {
			r.fail(err)
			return
		}
		if sent, ok := sentAt(rec.Value, r.runID); ok {
			r.ack.Record(time.Since(sent))
		}
		r.produced.Add(1)
		r.producedBytes.Add(int64(len(rec.Value)))
	}
	var sent int64
	for ctx.Err() == nil {
		now := time.Now()
		if r.cfg.Records <= 0 && now.After(deadline) {
			break
		}
		intended := now
		if rate > 0 {
			// The schedule says when record `sent` was due; sleep until
			// then, or send at once if behind (its latency still counts
			// from when it was due).
			intended = r.start.Add(time.Duration(float64(sent) / rate * float64(time.Second)))
			if wait := intended.Sub(now); wait > 0 {
				if r.cfg.Records <= 0 && intended.After(deadline) {
					break
				}
				time.Sleep(wait)
			}
		}
		if r.cfg.Records > 0 && r.claimed.Add(1) > r.cfg.Records {
			break
		}
		if r.cfg.TxnRecords > 0 && sent%int64(r.cfg.TxnRecords) == 0 && !r.nextTxn(ctx, cl, sent > 0) {
			return
		}
		cl.Produce(ctx, &kgo.Record{Value: pl.next(intended)}, promise)
		sent++
	}
	if r.cfg.TxnRecords > 0 {
		r.endTxn(ctx, cl)
		return
	}
	fctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	if err := cl.Flush(fctx); err != nil {
		r.fail(fmt.Errorf("flush: %w", err))
	}
}

// nextTxn commits the open transaction (if any) and begins the next; false
// if the producer cannot go on.
func (r *run) nextTxn(ctx context.Context, cl *kgo.Client, open bool) bool {
	if open && !r.endTxn(ctx, cl) {
		return false
	}
	if err := cl.BeginTransaction(); err != nil {
		r.fail(err)
		return false
	}
	return true
}

// endTxn flushes the open transaction's records and commits it, timing
// the commit alone.
func (r *run) endTxn(ctx context.Context, cl *kgo.Client) bool {
	fctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	if err := cl.Flush(fctx); err != nil {
		r.fail(fmt.Errorf("flush: %w", err))
		return false
	}
	start := time.Now()
	if err := cl.EndTransaction(fctx, kgo.TryCommit); err != nil {
		r.fail(fmt.Errorf("commit: %w", err))
		return false
	}
	r.commit.Record(time.Since(start))
	return true
}

func (r *run) fail(err error) {
	r.errs.Add(1)
	s := err.Error()
	r.firstErr.CompareAndSwap(nil, &s)
}

// consume reads parts until done() holds or it has waited drainTimeout with
// nothing new after producers stopped. last is raised to the time of the
// newest record seen; ready (if not nil) is called after the first poll.
func (r *run) consume(ctx context.Context, parts map[int32]kgo.Offset, done func() bool, last *atomic.Int64, ready func()) error {
	if ready != nil {
		defer func() {
			if ready != nil {
				ready()
			}
		}()
	}
	opts := append(r.clientOpts(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{r.cfg.Topic: parts}),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.WithHooks(&r.reqs),
	)
	if r.cfg.TxnRecords > 0 {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	// End-to-end latency means something only while producing; a
	// catch-up read measures how old the data is.
	live := r.cfg.Mode == ModeProduceConsume
	idleSince := time.Now()
	for !done() {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		if ready != nil {
			ready()
			ready = nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		now := time.Now()
		var n, b int64
		fs.EachRecord(func(rec *kgo.Record) {
			n++
			b += int64(len(rec.Value))
			if !live {
				return
			}
			if sent, ok := sentAt(rec.Value, r.runID); ok {
				r.e2e.Record(now.Sub(sent))
			}
		})
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) && !kerr.IsRetriable(fe.Err) {
				return fmt.Errorf("fetch %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
			}
		}
		if n > 0 {
			r.consumed.Add(n)
			r.consumedBytes.Add(b)
			storeMax(last, now.UnixNano())
			idleSince = now
		} else if now.Sub(idleSince) > drainTimeout {
			return fmt.Errorf("consumer: nothing read for %v (have %d of %d records)", drainTimeout, r.consumed.Load(), r.produced.Load())
		}
	}
	return nil
}

func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// createTopic creates cfg's topic with its partitions, replication factor
// and min.insync.replicas, and waits until every partition has a leader.
func createTopic(ctx context.Context, adm *kadm.Client, cfg Config) error {
	topic, n := cfg.Topic, cfg.Partitions
	rf := int16(max(cfg.ReplicationFactor, 1))
	var configs map[string]*string
	if cfg.MinInsyncReplicas > 0 {
		v := strconv.Itoa(cfg.MinInsyncReplicas)
		configs = map[string]*string{"min.insync.replicas": &v}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := adm.CreateTopic(ctx, int32(n), rf, configs, topic)
		if err == nil {
			err = resp.Err
		}
		if errors.Is(err, kerr.TopicAlreadyExists) {
			n = 1 // use it as it is
			break
		}
		if err == nil {
			break
		}
		if !kerr.IsRetriable(err) || time.Now().After(deadline) {
			return fmt.Errorf("create topic %s: %w", topic, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for {
		offs, err := endOffsets(ctx, adm, topic)
		if err == nil && len(offs) >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("topic %s: partitions not ready after 30s (%v)", topic, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// endOffsets returns every partition's log end offset.
func endOffsets(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	lo, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return nil, err
	}
	out := make(map[int32]int64)
	var firstErr error
	lo.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			if firstErr == nil {
				firstErr = o.Err
			}
			return
		}
		out[o.Partition] = o.Offset
	})
	if len(out) == 0 {
		if firstErr == nil {
			firstErr = fmt.Errorf("topic %s has no partitions", topic)
		}
		return nil, firstErr
	}
	return out, firstErr
}
