package testcluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-broker/sluice/tools/chaos/check"
	"github.com/sluice-broker/sluice/tools/chaos/copier"
)

// TestTransactionalCopierKilled: a consume-transform-produce copier (the
// chaos harness's, package copier) runs as its own process over a
// three-broker cluster while an idempotent producer fills the source
// topic. The copier is SIGKILLed mid-transaction again and again and
// started again with the same transactional.id, each kill at one of three
// points the child process stops at until the test answers: its
// transaction's records all acknowledged, End not begun; just after its
// TxnOffsetCommit went out (the group's offsets pending in the
// transaction); just after its EndTxn went out (the outcome in the
// coordinator's hands, the client gone). Each new process's
// InitProducerId fences the dead one and aborts what it left open; its
// group member replaces the dead one. A last copier drains the source.
// Exactly once: every partition of the copy, read at read_committed,
// holds the source's values below the group's committed offset (all of
// them), once each and in order, and no record of an aborted transaction
// is visible.
func TestTransactionalCopierKilled(t *testing.T) {
	const (
		src, dst, group, id = "ck-src", "ck-copy", "ck-copier", "ck-copier-tx"
		partitions, kills   = 3, 6
	)
	c := Start(t, 3, Options{Extra: []string{
		"transaction.state.log.num.partitions=3", "transaction.state.log.replication.factor=3",
		"offsets.topic.replication.factor=3", "min.insync.replicas=2", "group.min.session.timeout.ms=1000",
	}})
	adm := kadm.NewClient(c.Client())
	createTopic(t, adm, src, partitions, 3)
	createTopic(t, adm, dst, partitions, 3)
	stopFeed := feedSource(t, c, src, partitions)

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	killAt := []string{"OPEN", "SENT TxnOffsetCommit", "SENT EndTxn"}
	for round := range kills {
		p := startCopierProcess(t, c, src, dst, group, id)
		at, records := killAt[round%len(killAt)], 0
		for let := rng.IntN(4); ; { // let that many transactions end first
			ev := p.next(t)
			if n, ok := strings.CutPrefix(ev, "OPEN "); ok {
				records, _ = strconv.Atoi(n)
				let--
			}
			if let >= 0 || !strings.HasPrefix(ev, at) {
				p.release()
				continue
			}
			p.kill()
			d, _ := describeTxn(c, id)
			t.Logf("round %d: killed at %q in a transaction of %d records (then: %s)", round, ev, records, d.State)
			break
		}
	}
	sent := stopFeed()

	final := startCopierProcess(t, c, src, dst, group, id)
	go final.releaseAll()
	end := map[int32]int64{}
	for p := range int32(partitions) {
		end[p] = int64(sent[p])
	}
	committed := map[int32]int64{}
	c.WaitFor(120*time.Second, "the last copier to commit the whole source", func() bool {
		if fetchGroupOffsets(c, group, src, committed) != nil {
			return false
		}
		for p, n := range end {
			if committed[p] != n {
				return false
			}
		}
		return true
	})
	final.kill()

	ctx := ctxT(t, 60*time.Second)
	srcLogs, err := check.ReadCommitted(ctx, c.Bootstrap(), src, partitions)
	if err != nil {
		t.Fatal(err)
	}
	dstLogs, err := check.ReadCommitted(ctx, c.Bootstrap(), dst, partitions) // fails on a hanging transaction
	if err != nil {
		t.Fatal(err)
	}
	reportAnomalies(t, check.CheckCopy(srcLogs, dstLogs, committed))
	copied := 0
	for _, l := range dstLogs {
		copied += len(l.Values)
	}
	t.Logf("%d kills; %d values sent, %d copied exactly once", kills, sent[0]+sent[1]+sent[2], copied)
}

// feedSource produces increasing numbers to topic's partitions in turn
// with an idempotent acks=all producer until the returned stop is called,
// which returns how many each partition got.
func feedSource(t *testing.T, c *Cluster, topic string, partitions int) (stop func() []int) {
	cl := c.Client(kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	sent := make([]int, partitions)
	var halt atomic.Bool
	var wg sync.WaitGroup
	var ferr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for v := 0; !halt.Load(); {
			var batch []*kgo.Record
			for range 30 {
				batch = append(batch, &kgo.Record{Partition: int32(v % partitions), Value: []byte(strconv.Itoa(v))})
				v++
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := cl.ProduceSync(ctx, batch...).FirstErr()
			cancel()
			if err != nil {
				ferr = err
				return
			}
			for _, r := range batch {
				sent[r.Partition]++
			}
			time.Sleep(100 * time.Millisecond) // a steady trickle, not a flood
		}
	}()
	return func() []int {
		halt.Store(true)
		wg.Wait()
		if ferr != nil {
			t.Fatalf("source producer: %v", ferr)
		}
		return sent
	}
}

// copierProcess is TestTxnCopierProcess running in a child process.
type copierProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	events chan string // where it stopped, until release
	out    *lockedBuffer
}

// startCopierProcess re-runs this test binary as a copier from src to dst.
func startCopierProcess(t *testing.T, c *Cluster, src, dst, group, id string) *copierProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestTxnCopierProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "SLUICE_TXNCOPY="+strings.Join([]string{strings.Join(c.Bootstrap(), ","), src, dst, group, id}, " "))
	p := &copierProcess{cmd: cmd, events: make(chan string, 1), out: &lockedBuffer{}}
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("copier process %d:\n%s", cmd.Process.Pid, p.out)
		}
	})
	go func() {
		defer close(p.events)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(p.out, line)
			if ev, ok := strings.CutPrefix(line, "STOPPED "); ok {
				p.events <- ev
			}
		}
	}()
	return p
}

// next waits until the copier stops at one of its points (see
// TestTxnCopierProcess) and returns which.
func (p *copierProcess) next(t *testing.T) string {
	t.Helper()
	select {
	case ev, ok := <-p.events:
		if !ok {
			t.Fatalf("the copier process exited:\n%s", p.out)
		}
		return ev
	case <-time.After(60 * time.Second):
		t.Fatalf("the copier did not stop at any point for 60s:\n%s", p.out)
	}
	return ""
}

// release lets the stopped copier go on.
func (p *copierProcess) release() { io.WriteString(p.stdin, "go\n") }

// releaseAll lets the copier go on every time until the process is gone.
func (p *copierProcess) releaseAll() {
	for range p.events {
		p.release()
	}
}

// kill SIGKILLs the copier and waits for it to be gone.
func (p *copierProcess) kill() {
	if p.cmd.ProcessState != nil {
		return
	}
	p.cmd.Process.Kill()
	p.cmd.Wait()
}

// TestTxnCopierProcess is the copier process of
// TestTransactionalCopierKilled, run only as its child: a copier that
// prints "STOPPED <point>" and waits for a line on stdin at three points
// of every transaction: "OPEN n" once its n records are all acknowledged,
// before it ends; "SENT TxnOffsetCommit" and "SENT EndTxn" once its client
// has written that request to a broker (a franz-go write hook, which holds
// the client's next writes to that broker meanwhile).
func TestTxnCopierProcess(t *testing.T) {
	args := strings.Fields(os.Getenv("SLUICE_TXNCOPY"))
	if len(args) != 5 {
		t.Skip("the copier process of TestTransactionalCopierKilled")
	}
	in := bufio.NewScanner(os.Stdin)
	var mu sync.Mutex
	stop := func(point string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf("STOPPED %s\n", point)
		if !in.Scan() {
			os.Exit(0) // the test is gone
		}
	}
	o := copier.Options{Seeds: strings.Split(args[0], ","), Src: args[1], Dst: args[2], Group: args[3],
		TransactionalID: args[4], SessionTimeout: 2 * time.Second, HeartbeatInterval: 500 * time.Millisecond,
		BeforeEnd:  func(_ *kgo.GroupTransactSession, n int) { stop(fmt.Sprintf("OPEN %d", n)) },
		ClientOpts: []kgo.Opt{kgo.WithHooks(sentHook(stop))},
	}
	s, err := copier.Session(o)
	if err != nil {
		t.Fatal(err)
	}
	var st copier.Stats
	copier.Run(context.Background(), s, o, &st)
}

// sentHook calls stop once a TxnOffsetCommit or an EndTxn request was
// written to a broker.
type sentHook func(point string)

func (h sentHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	switch key {
	case 28:
		h("SENT TxnOffsetCommit")
	case 26:
		h("SENT EndTxn")
	}
}
