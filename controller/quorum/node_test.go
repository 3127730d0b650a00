package quorum

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	pb "go.etcd.io/raft/v3/raftpb"
)

// kvMachine is a state machine that records every applied payload, so
// tests can compare what each member applied.
type kvMachine struct {
	applied [][]byte
	index   uint64
}

func (m *kvMachine) Apply(index uint64, data []byte) error {
	m.applied = append(m.applied, append([]byte(nil), data...))
	m.index = index
	return nil
}

func (m *kvMachine) Snapshot() ([]byte, error) {
	var b []byte
	for _, a := range m.applied {
		b = binary.AppendUvarint(b, uint64(len(a)))
		b = append(b, a...)
	}
	return b, nil
}

func (m *kvMachine) Restore(index uint64, data []byte) error {
	m.applied, m.index = nil, index
	for len(data) > 0 {
		n, k := binary.Uvarint(data)
		if k <= 0 || uint64(len(data)-k) < n {
			return errors.New("bad snapshot")
		}
		m.applied = append(m.applied, append([]byte(nil), data[k:k+int(n)]...))
		data = data[k+int(n):]
	}
	return nil
}

// cluster is an in-memory network of members, driven one step at a time:
// no goroutines, no sleeping, every run the same.
type cluster struct {
	t      *testing.T
	dirs   map[uint64]string
	nodes  map[uint64]*Node
	sms    map[uint64]*kvMachine
	queue  []*pb.Message
	down   map[uint64]bool    // stopped: neither ticks nor receives
	cut    map[[2]uint64]bool // dropped links, both directions
	voters []uint64
}

type clusterTransport struct{ c *cluster }

func (t clusterTransport) Send(msgs []*pb.Message) { t.c.queue = append(t.c.queue, msgs...) }

func newCluster(t *testing.T, n int) *cluster {
	c := &cluster{t: t, dirs: map[uint64]string{}, nodes: map[uint64]*Node{}, sms: map[uint64]*kvMachine{},
		down: map[uint64]bool{}, cut: map[[2]uint64]bool{}}
	for i := 1; i <= n; i++ {
		c.voters = append(c.voters, uint64(i))
	}
	for _, id := range c.voters {
		c.dirs[id] = t.TempDir()
		c.start(id)
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			n.Close()
		}
	})
	return c
}

func (c *cluster) start(id uint64) {
	sm := &kvMachine{}
	n, err := NewNode(Config{ID: id, Voters: c.voters, Dir: c.dirs[id], SnapshotEvery: 50,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, sm, clusterTransport{c})
	if err != nil {
		c.t.Fatalf("start %d: %v", id, err)
	}
	c.nodes[id], c.sms[id] = n, sm
	delete(c.down, id)
}

// crash stops a member as SIGKILL would: its in-memory state is gone and
// only what it synced to disk remains.
func (c *cluster) crash(id uint64) {
	c.nodes[id].Close()
	delete(c.nodes, id)
	c.down[id] = true
}

func (c *cluster) linked(a, b uint64) bool {
	return !c.cut[[2]uint64{a, b}] && !c.cut[[2]uint64{b, a}]
}

// settle processes and delivers until nothing moves.
func (c *cluster) settle() {
	for round := 0; round < 1000; round++ {
		moved := false
		for _, id := range c.voters {
			if n := c.nodes[id]; n != nil {
				did, err := n.Process()
				if err != nil {
					c.t.Fatalf("node %d: %v", id, err)
				}
				moved = moved || did
			}
		}
		q := c.queue
		c.queue = nil
		for _, m := range q {
			to, from := m.GetTo(), m.GetFrom()
			if n := c.nodes[to]; n != nil && c.linked(from, to) {
				_ = n.Step(m)
				moved = true
			}
		}
		if !moved {
			return
		}
	}
	c.t.Fatal("cluster did not settle")
}

// tick advances every running member's clock k ticks, settling after each.
func (c *cluster) tick(k int) {
	for i := 0; i < k; i++ {
		for _, id := range c.voters {
			if n := c.nodes[id]; n != nil {
				n.Tick()
			}
		}
		c.settle()
	}
}

// leader ticks until the running members agree on one leader.
func (c *cluster) leader() uint64 {
	for i := 0; i < 100; i++ {
		c.tick(1)
		var lead uint64
		agree := true
		for id, n := range c.nodes {
			l, _ := n.Leader()
			if l == 0 || (lead != 0 && l != lead) || c.down[l] {
				agree = false
			}
			lead = l
			_ = id
		}
		if agree && lead != 0 {
			return lead
		}
	}
	c.t.Fatal("no leader elected")
	return 0
}

func (c *cluster) propose(on uint64, data string) error {
	var got error = errors.New("not applied")
	c.nodes[on].Propose([]byte(data), func(err error) { got = err })
	c.settle()
	return got
}

func (c *cluster) checkSame(want int) {
	c.t.Helper()
	var ref [][]byte
	for _, id := range c.voters {
		sm := c.sms[id]
		if c.nodes[id] == nil {
			continue
		}
		if len(sm.applied) != want {
			c.t.Fatalf("node %d applied %d entries, want %d", id, len(sm.applied), want)
		}
		if ref == nil {
			ref = sm.applied
			continue
		}
		for i := range ref {
			if !bytes.Equal(ref[i], sm.applied[i]) {
				c.t.Fatalf("node %d entry %d = %q, another member has %q", id, i, sm.applied[i], ref[i])
			}
		}
	}
}

func TestQuorumReplicatesInOrder(t *testing.T) {
	c := newCluster(t, 3)
	lead := c.leader()
	for i := 0; i < 20; i++ {
		if err := c.propose(lead, fmt.Sprintf("r%d", i)); err != nil {
			t.Fatalf("propose %d: %v", i, err)
		}
	}
	c.tick(2)
	c.checkSame(20)
}

func TestQuorumLeaderCrashElectsAnotherAndKeepsCommitted(t *testing.T) {
	c := newCluster(t, 3)
	lead := c.leader()
	for i := 0; i < 5; i++ {
		if err := c.propose(lead, fmt.Sprintf("a%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	c.crash(lead)
	next := c.leader()
	if next == lead {
		t.Fatalf("crashed member %d still leads", lead)
	}
	for i := 0; i < 5; i++ {
		if err := c.propose(next, fmt.Sprintf("b%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	c.start(lead) // restarts from its own disk and catches up
	c.tick(5)
	c.checkSame(10)
}

func TestQuorumMinorityCannotCommit(t *testing.T) {
	c := newCluster(t, 3)
	lead := c.leader()
	if err := c.propose(lead, "before"); err != nil {
		t.Fatal(err)
	}
	for _, id := range c.voters {
		if id != lead {
			c.cut[[2]uint64{lead, id}] = true
		}
	}
	// The isolated leader cannot commit; CheckQuorum makes it step down.
	var got error = errors.New("pending")
	c.nodes[lead].Propose([]byte("isolated"), func(err error) { got = err })
	c.tick(30)
	if got == nil {
		t.Fatal("a leader cut off from the majority committed a proposal")
	}
	if l, _ := c.nodes[lead].Leader(); l == lead {
		t.Fatal("isolated leader did not step down")
	}
	// The majority elected a leader of its own and commits.
	var other uint64
	for _, id := range c.voters {
		if id != lead {
			other = id
		}
	}
	var majLead uint64
	for i := 0; i < 50 && majLead == 0; i++ {
		c.tick(1)
		if l, _ := c.nodes[other].Leader(); l != 0 && l != lead {
			majLead = l
		}
	}
	if majLead == 0 {
		t.Fatal("majority elected no leader")
	}
	if err := c.propose(majLead, "after"); err != nil {
		t.Fatal(err)
	}
	// Healed: the old leader converges on the majority's log, without
	// "isolated" in it.
	c.cut = map[[2]uint64]bool{}
	c.tick(10)
	c.checkSame(2)
	for _, id := range c.voters {
		if string(c.sms[id].applied[1]) != "after" {
			t.Fatalf("node %d applied %q", id, c.sms[id].applied[1])
		}
	}
}

func TestQuorumSnapshotCatchesUpLaggingMember(t *testing.T) {
	c := newCluster(t, 3)
	lead := c.leader()
	var lag uint64
	for _, id := range c.voters {
		if id != lead {
			lag = id
			break
		}
	}
	c.crash(lag)
	for i := 0; i < 120; i++ { // past SnapshotEvery=50: the log is compacted twice
		if err := c.propose(lead, fmt.Sprintf("s%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if first, _ := c.nodes[lead].storage.FirstIndex(); first <= 2 {
		t.Fatalf("leader log not compacted (first index %d)", first)
	}
	c.start(lag)
	c.tick(10)
	c.checkSame(120)
	// Every member restarts from its snapshot plus log to the same state.
	for _, id := range c.voters {
		c.crash(id)
		c.start(id)
	}
	c.leader()
	c.checkSame(120)
}

func TestDiskStorageTruncatesTornTail(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenDiskStorage(dir)
	if err != nil {
		t.Fatal(err)
	}
	ents := []*pb.Entry{{Index: new(uint64(1)), Term: new(uint64(1)), Data: []byte("a")},
		{Index: new(uint64(2)), Term: new(uint64(1)), Data: []byte("b")}}
	if err := s.Save(&pb.HardState{Term: new(uint64(1)), Commit: new(uint64(2))}, ents, nil, true); err != nil {
		t.Fatal(err)
	}
	s.Close()
	wals, _ := listFiles(dir, "wal-", ".log")
	path := filepath.Join(dir, wals[len(wals)-1])
	f, _ := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	f.Write([]byte{0, 0, 0, 40, 1, 2, 3}) // a frame cut short by a crash
	f.Close()
	s, err = OpenDiskStorage(dir)
	if err != nil {
		t.Fatalf("torn tail not recovered: %v", err)
	}
	defer s.Close()
	if last, _ := s.LastIndex(); last != 2 {
		t.Fatalf("last index %d after recovery, want 2", last)
	}
	hs, _, _ := s.InitialState()
	if hs.GetCommit() != 2 {
		t.Fatalf("commit %d after recovery, want 2", hs.GetCommit())
	}
}

func TestDiskStorageRefusesCorruptOlderSegment(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenDiskStorage(dir)
	if err != nil {
		t.Fatal(err)
	}
	e := []*pb.Entry{{Index: new(uint64(1)), Term: new(uint64(1)), Data: []byte("a")}}
	if err := s.Save(&pb.HardState{Term: new(uint64(1))}, e, nil, true); err != nil {
		t.Fatal(err)
	}
	s.Close()
	wals, _ := listFiles(dir, "wal-", ".log")
	old := filepath.Join(dir, wals[0])
	data, _ := os.ReadFile(old)
	data[len(data)-1] ^= 0xff
	os.WriteFile(old, data, 0o644)
	// A newer segment makes the damaged one "older", so the damage cannot
	// be a torn tail.
	os.WriteFile(filepath.Join(dir, fmt.Sprintf("wal-%016x.log", 99)), nil, 0o644)
	if _, err := OpenDiskStorage(dir); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open = %v, want ErrCorrupt", err)
	}
}

// TestWholeQuorumRestartsBeforeASnapshot: every member is killed before
// any snapshot was taken (the membership lives only in the bootstrap
// snapshot at index 0, which is never written) and restarted from its
// WAL; the members still know the voters, elect a leader and keep what
// was committed. Found by restarting a three-node cluster: no member
// campaigned.
func TestWholeQuorumRestartsBeforeASnapshot(t *testing.T) {
	c := newCluster(t, 3)
	lead := c.leader()
	for i := range 3 {
		if err := c.propose(lead, fmt.Sprintf("r%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range c.voters {
		c.crash(id)
	}
	for _, id := range c.voters {
		c.start(id)
	}
	lead = c.leader()
	if err := c.propose(lead, "after"); err != nil {
		t.Fatal(err)
	}
	c.checkSame(4)
}
