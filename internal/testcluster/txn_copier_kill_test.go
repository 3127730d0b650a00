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
// started again with the same transactional.id: half the kills land with a
// transaction's records written and acknowledged but EndTxn not sent (the
// copier holds there until the test answers), the others just after the
// test lets EndTxn go. Each new process's InitProducerId fences the dead
// one and aborts what it left open; its group member replaces the dead
// one. A last copier drains the source. Exactly once: every partition of
// the copy, read at read_committed, holds the source's values below the
// group's committed offset (all of them), once each and in order, and no
// record of a killed transaction is visible.
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
	heldRecords := 0
	for round := range kills {
		p := startCopierProcess(t, c, src, dst, group, id)
		for let := rng.IntN(4); ; let-- {
			n := p.nextOpen(t)
			if let > 0 {
				p.release()
				continue
			}
			if round%2 == 0 {
				heldRecords += n
				p.kill()
				t.Logf("round %d: killed with a transaction of %d records written, EndTxn not sent", round, n)
			} else {
				p.release()
				time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond) // somewhere in End
				p.kill()
				d, _ := describeTxn(c, id)
				t.Logf("round %d: killed as it ended a transaction of %d records (%s)", round, n, d.State)
			}
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
	t.Logf("%d kills; %d records of transactions held open at a kill, none visible; %d values sent, %d copied exactly once",
		kills, heldRecords, sent[0]+sent[1]+sent[2], copied)
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
	cmd   *exec.Cmd
	stdin io.WriteCloser
	opens chan int // records of each transaction held before EndTxn
	out   *lockedBuffer
}

// startCopierProcess re-runs this test binary as a copier from src to dst.
func startCopierProcess(t *testing.T, c *Cluster, src, dst, group, id string) *copierProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestTxnCopierProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "SLUICE_TXNCOPY="+strings.Join([]string{strings.Join(c.Bootstrap(), ","), src, dst, group, id}, " "))
	p := &copierProcess{cmd: cmd, opens: make(chan int, 1), out: &lockedBuffer{}}
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
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(p.out, line)
			if n, ok := strings.CutPrefix(line, "OPEN "); ok {
				v, _ := strconv.Atoi(n)
				p.opens <- v
			}
		}
		close(p.opens)
	}()
	return p
}

// nextOpen waits until the copier holds a transaction open before EndTxn
// and returns how many records it wrote in it.
func (p *copierProcess) nextOpen(t *testing.T) int {
	t.Helper()
	select {
	case n, ok := <-p.opens:
		if !ok {
			t.Fatalf("the copier process exited:\n%s", p.out)
		}
		return n
	case <-time.After(60 * time.Second):
		t.Fatalf("the copier held no transaction for 60s:\n%s", p.out)
	}
	return 0
}

// release lets the held transaction end.
func (p *copierProcess) release() { io.WriteString(p.stdin, "go\n") }

// releaseAll lets every transaction end until the process is gone.
func (p *copierProcess) releaseAll() {
	for range p.opens {
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
// TestTransactionalCopierKilled, run only as its child: a copier whose
// every transaction, once its records are all acknowledged, prints "OPEN n"
// and waits for a line on stdin before ending.
func TestTxnCopierProcess(t *testing.T) {
	args := strings.Fields(os.Getenv("SLUICE_TXNCOPY"))
	if len(args) != 5 {
		t.Skip("the copier process of TestTransactionalCopierKilled")
	}
	in := bufio.NewScanner(os.Stdin)
	o := copier.Options{Seeds: strings.Split(args[0], ","), Src: args[1], Dst: args[2], Group: args[3],
		TransactionalID: args[4], SessionTimeout: 2 * time.Second, HeartbeatInterval: 500 * time.Millisecond,
		BeforeEnd: func(_ *kgo.GroupTransactSession, n int) {
			fmt.Printf("OPEN %d\n", n)
			if !in.Scan() {
				os.Exit(0) // the test is gone
			}
		}}
	s, err := copier.Session(o)
	if err != nil {
		t.Fatal(err)
	}
	var st copier.Stats
	copier.Run(context.Background(), s, o, &st)
}
