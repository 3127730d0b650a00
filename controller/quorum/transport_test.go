package quorum

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// member is one quorum member over real TCP on 127.0.0.1.
type member struct {
	id     uint64
	runner *Runner
	tr     *TCPTransport
	sm     *lockedMachine
}

// lockedMachine lets the test read what the runner's goroutine applied.
type lockedMachine struct {
	kvMachine
	applied chan string
}

func (m *lockedMachine) Apply(index uint64, data []byte) error {
	m.applied <- string(data)
	return m.kvMachine.Apply(index, data)
}

func startMembers(t *testing.T, clusterIDs []string) []*member {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var voters []uint64
	for i := range clusterIDs {
		voters = append(voters, uint64(i+1))
	}
	ms := make([]*member, len(clusterIDs))
	for i, cid := range clusterIDs {
		m := &member{id: uint64(i + 1), sm: &lockedMachine{applied: make(chan string, 100)}}
		var r *Runner
		tr, err := NewTCPTransport(m.id, cid, "127.0.0.1:0", quiet,
			func(msg *pb.Message) { r.Deliver(msg) },
			func(to uint64, u, s bool) { r.Report(to, u, s) })
		if err != nil {
			t.Fatal(err)
		}
		n, err := NewNode(Config{ID: m.id, Voters: voters, Dir: t.TempDir(), Logger: quiet}, m.sm, tr)
		if err != nil {
			t.Fatal(err)
		}
		r = NewRunner(n, 10*time.Millisecond, quiet)
		m.runner, m.tr = r, tr
		ms[i] = m
	}
	for _, a := range ms {
		for _, b := range ms {
			if a != b {
				a.tr.SetPeer(b.id, b.tr.Addr())
			}
		}
	}
	for _, m := range ms {
		m.runner.Start()
		t.Cleanup(func() { m.runner.Stop(); m.tr.Close(); m.runner.node.Close() })
	}
	return ms
}

func TestTCPQuorumCommitsAcrossMembers(t *testing.T) {
	ms := startMembers(t, []string{"c1", "c1", "c1"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// Any member may propose once a leader exists; retry until one does.
	var err error
	for i := 0; ; i++ {
		if err = ms[i%3].runner.Propose(ctx, []byte("hello")); err == nil || ctx.Err() != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("propose: %v", err)
	}
	for _, m := range ms {
		select {
		case got := <-m.sm.applied:
			if got != "hello" {
				t.Fatalf("member %d applied %q", m.id, got)
			}
		case <-ctx.Done():
			t.Fatalf("member %d never applied the entry", m.id)
		}
	}
}

func TestTCPQuorumRefusesMemberOfAnotherCluster(t *testing.T) {
	// Member 3 believes in another cluster: 1 and 2 drop its connections,
	// and it can never learn of, or vote in, their elections.
	ms := startMembers(t, []string{"c1", "c1", "other"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		if err := ms[0].runner.Propose(ctx, []byte("x")); err == nil {
			break
		} else if ctx.Err() != nil {
			t.Fatalf("majority of the right cluster could not commit: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case got := <-ms[2].sm.applied:
		t.Fatalf("member of another cluster applied %q", got)
	case <-time.After(300 * time.Millisecond):
	}
	if l, _ := leaderOf(ms[2]); l == 1 || l == 2 {
		t.Fatalf("member of another cluster follows leader %d", l)
	}
}

func leaderOf(m *member) (uint64, uint64) {
	res := make(chan [2]uint64, 1)
	m.runner.Do(func(n *Node) { l, term := n.Leader(); res <- [2]uint64{l, term} })
	r := <-res
	return r[0], r[1]
}
