package quorum

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// StateMachine is what the quorum replicates into: the metadata image.
// Apply sees every committed entry's payload once, in log order, on the
// node's goroutine; Snapshot and Restore move the whole state when the log
// is compacted or a lagging member is caught up from a snapshot.
type StateMachine interface {
	Apply(index uint64, data []byte) error
	Snapshot() ([]byte, error)
	Restore(index uint64, data []byte) error
}

// Transport sends raft messages to other members. Send must not block for
// long: a slow or dead peer loses messages, which raft tolerates.
type Transport interface {
	Send(msgs []*pb.Message)
}

// Config configures one member.
type Config struct {
	ID uint64
	// Voters are the initial voters (every member's ID, this one included);
	// used only when Dir holds no raft state yet.
	Voters []uint64
	Dir    string
	// ElectionTicks and HeartbeatTicks count calls of Tick. With a 50 ms
	// tick, 10 and 1 give elections after 0.5–1 s of silence.
	ElectionTicks  int
	HeartbeatTicks int
	// SnapshotEvery compacts the log after this many applied entries.
	SnapshotEvery uint64
	Logger        *slog.Logger
}

// Node is one quorum member: raft's RawNode (the pure consensus core) and
// the I/O it asks for. It is not safe for concurrent use; Runner owns it
// on one goroutine, and tests drive it directly, step by step, so every
// scenario is deterministic.
type Node struct {
	cfg     Config
	rn      *raft.RawNode
	storage *DiskStorage
	sm      StateMachine
	tr      Transport
	log     *slog.Logger

	confState *pb.ConfState
	// applied is the index of the last entry given to the state machine.
	// Invariant: snapshotIndex <= applied <= raft's committed index.
	applied       uint64
	snapshotIndex uint64

	// nextProposal numbers this node's proposals; waiting holds the
	// callbacks of those not yet applied, keyed by number.
	nextProposal uint64
	waiting      map[uint64]func(error)
	// leader is the last leader raft reported (0: none known).
	leader uint64
	// onLeader is called on the node's goroutine when leadership changes.
	onLeader func(leader uint64, term uint64)
}

// ErrDropped answers a proposal that raft did not take (no leader known,
// or this member is being removed).
var ErrDropped = errors.New("quorum: proposal dropped")

// NewNode opens the member's storage and restores the state machine from
// its latest snapshot.
func NewNode(cfg Config, sm StateMachine, tr Transport) (*Node, error) {
	if cfg.ElectionTicks == 0 {
		cfg.ElectionTicks = 10
	}
	if cfg.HeartbeatTicks == 0 {
		cfg.HeartbeatTicks = 1
	}
	if cfg.SnapshotEvery == 0 {
		cfg.SnapshotEvery = 10000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	st, err := OpenDiskStorage(cfg.Dir)
	if err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, storage: st, sm: sm, tr: tr, log: cfg.Logger, waiting: map[uint64]func(error){}}
	if err := n.restore(); err != nil {
		st.Close()
		return nil, err
	}
	if n.rn, err = raft.NewRawNode(n.raftConfig()); err != nil {
		st.Close()
		return nil, err
	}
	return n, nil
}

// restore brings the state machine to the snapshot and, for a new member,
// writes the initial configuration as raft's bootstrap does.
func (n *Node) restore() error {
	snap, err := n.storage.Snapshot()
	if err != nil {
		return err
	}
	hs, cs, err := n.storage.InitialState()
	if err != nil {
		return err
	}
	if raft.IsEmptySnap(snap) && raft.IsEmptyHardState(hs) && len(cs.GetVoters()) == 0 {
		return n.bootstrap()
	}
	if raft.IsEmptySnap(snap) && len(cs.GetVoters()) == 0 {
		// Restarted before its first snapshot: the bootstrap membership
		// (at index 0, never written) is still the configuration, since
		// voters only change through the log.
		if len(n.cfg.Voters) == 0 {
			return fmt.Errorf("quorum: no voters configured for a member without a snapshot")
		}
		cs = &pb.ConfState{Voters: n.cfg.Voters}
		n.storage.bootConf = cs
	}
	n.confState = cs
	if !raft.IsEmptySnap(snap) {
		n.applied = snap.GetMetadata().GetIndex()
		n.snapshotIndex = n.applied
		return n.sm.Restore(n.applied, snap.GetData())
	}
	return nil
}

// bootstrap stores a snapshot at index 0 whose configuration holds the
// initial voters, so every member starts from the same membership without
// replicating it.
func (n *Node) bootstrap() error {
	if len(n.cfg.Voters) == 0 {
		return fmt.Errorf("quorum: no voters configured for a new member")
	}
	cs := &pb.ConfState{Voters: n.cfg.Voters}
	n.confState = cs
	return n.storage.MemoryStorage.ApplySnapshot(&pb.Snapshot{Metadata: &pb.SnapshotMetadata{ConfState: cs}})
}

func (n *Node) raftConfig() *raft.Config {
	return &raft.Config{
		ID:              n.cfg.ID,
		ElectionTick:    n.cfg.ElectionTicks,
		HeartbeatTick:   n.cfg.HeartbeatTicks,
		Storage:         n.storage,
		Applied:         n.applied,
		MaxSizePerMsg:   1 << 20,
		MaxInflightMsgs: 256,
		// CheckQuorum makes a leader cut off from a majority step down, and
		// PreVote keeps a member that was cut off from disrupting the
		// cluster with a higher term when it comes back: together they stop
		// a brief network hiccup from flapping leadership.
		CheckQuorum:               true,
		PreVote:                   true,
		MaxUncommittedEntriesSize: 64 << 20,
		Logger:                    raftLogger{n.cfg.Logger},
	}
}

// OnLeaderChange sets the callback run when the known leader changes.
func (n *Node) OnLeaderChange(fn func(leader, term uint64)) { n.onLeader = fn }

// Tick advances raft's logical clock by one tick.
func (n *Node) Tick() { n.rn.Tick() }

// Step hands raft a message received from another member.
func (n *Node) Step(m *pb.Message) error {
	if raft.IsLocalMsg(m.GetType()) {
		return fmt.Errorf("quorum: local message %v from the network", m.GetType())
	}
	return n.rn.Step(m)
}

// Propose submits data; done is called (on the node's goroutine) with nil
// once the entry is applied here, or with an error if raft refused it. A
// proposal lost to a leader change is never answered: callers bound their
// wait.
func (n *Node) Propose(data []byte, done func(error)) {
	n.nextProposal++
	id := n.nextProposal
	if err := n.rn.Propose(frameProposal(n.cfg.ID, id, data)); err != nil {
		done(fmt.Errorf("%w: %v", ErrDropped, err))
		return
	}
	n.waiting[id] = done
}

// Leader returns the current leader's ID (0 when none is known) and term.
func (n *Node) Leader() (uint64, uint64) {
	st := n.rn.BasicStatus()
	return st.Lead, st.GetTerm()
}

// Status returns raft's status (for DescribeQuorum).
func (n *Node) Status() raft.Status { return n.rn.Status() }

// TransferLeadership asks raft to hand leadership to to.
func (n *Node) TransferLeadership(to uint64) { n.rn.TransferLeader(to) }

// Process handles everything raft has ready: persist, send, apply. It
// returns whether there was anything to do.
func (n *Node) Process() (bool, error) {
	if !n.rn.HasReady() {
		return false, nil
	}
	rd := n.rn.Ready()
	if err := n.storage.Save(rd.HardState, rd.Entries, rd.Snapshot, rd.MustSync); err != nil {
		return true, fmt.Errorf("quorum: persist: %w", err)
	}
	if rd.Snapshot != nil && !raft.IsEmptySnap(rd.Snapshot) {
		if err := n.installSnapshot(rd.Snapshot); err != nil {
			return true, err
		}
	}
	n.tr.Send(rd.Messages)
	if err := n.apply(rd.CommittedEntries); err != nil {
		return true, err
	}
	if rd.SoftState != nil && rd.SoftState.Lead != n.leader {
		n.leader = rd.SoftState.Lead
		n.dropWaitingIfFollower(rd.SoftState.RaftState)
		if n.onLeader != nil {
			n.onLeader(n.leader, n.rn.BasicStatus().GetTerm())
		}
	}
	n.rn.Advance(rd)
	return true, n.maybeCompact()
}

func (n *Node) installSnapshot(snap *pb.Snapshot) error {
	md := snap.GetMetadata()
	if err := n.sm.Restore(md.GetIndex(), snap.GetData()); err != nil {
		return fmt.Errorf("quorum: restore snapshot %d: %w", md.GetIndex(), err)
	}
	n.confState = md.GetConfState()
	n.applied, n.snapshotIndex = md.GetIndex(), md.GetIndex()
	return nil
}

func (n *Node) apply(ents []*pb.Entry) error {
	for _, e := range ents {
		if e.GetIndex() <= n.applied {
			continue
		}
		if err := n.applyEntry(e); err != nil {
			return err
		}
		n.applied = e.GetIndex()
	}
	return nil
}

func (n *Node) applyEntry(e *pb.Entry) error {
	switch e.GetType() {
	case pb.EntryConfChange:
		cc := &pb.ConfChange{}
		if err := proto.Unmarshal(e.GetData(), cc); err != nil {
			return fmt.Errorf("quorum: conf change at %d: %w", e.GetIndex(), err)
		}
		n.confState = n.rn.ApplyConfChange(cc)
		return nil
	case pb.EntryConfChangeV2:
		cc := &pb.ConfChangeV2{}
		if err := proto.Unmarshal(e.GetData(), cc); err != nil {
			return fmt.Errorf("quorum: conf change at %d: %w", e.GetIndex(), err)
		}
		n.confState = n.rn.ApplyConfChange(cc)
		return nil
	}
	if len(e.GetData()) == 0 {
		return nil // a new leader's empty entry
	}
	from, id, data, err := parseProposal(e.GetData())
	if err != nil {
		return fmt.Errorf("quorum: entry %d: %w", e.GetIndex(), err)
	}
	applyErr := n.sm.Apply(e.GetIndex(), data)
	if from == n.cfg.ID {
		if done := n.waiting[id]; done != nil {
			delete(n.waiting, id)
			done(applyErr)
		}
	}
	return nil
}

// dropWaitingIfFollower fails this node's pending proposals once it has
// lost leadership: entries it proposed may still commit under the new
// leader (and are then applied as usual), but the callers learn now that
// the outcome is unknown rather than wait out their timeout.
func (n *Node) dropWaitingIfFollower(state raft.StateType) {
	if state == raft.StateLeader {
		return
	}
	for id, done := range n.waiting {
		delete(n.waiting, id)
		done(ErrDropped)
	}
}

func (n *Node) maybeCompact() error {
	if n.applied-n.snapshotIndex < n.cfg.SnapshotEvery {
		return nil
	}
	data, err := n.sm.Snapshot()
	if err != nil {
		return fmt.Errorf("quorum: snapshot: %w", err)
	}
	if err := n.storage.Compact(n.applied, n.confState, data); err != nil {
		return fmt.Errorf("quorum: compact at %d: %w", n.applied, err)
	}
	n.snapshotIndex = n.applied
	return nil
}

// Close releases the storage.
func (n *Node) Close() error { return n.storage.Close() }

// A proposal's payload carries its proposer and number, so the proposer
// can answer its caller when the entry is applied:
//
//	| proposer id (8) | proposal number (8) | data |
const proposalHeader = 16

func frameProposal(from, id uint64, data []byte) []byte {
	b := make([]byte, proposalHeader, proposalHeader+len(data))
	binary.BigEndian.PutUint64(b, from)
	binary.BigEndian.PutUint64(b[8:], id)
	return append(b, data...)
}

func parseProposal(b []byte) (from, id uint64, data []byte, err error) {
	if len(b) < proposalHeader {
		return 0, 0, nil, fmt.Errorf("%w: entry of %d bytes", ErrCorrupt, len(b))
	}
	return binary.BigEndian.Uint64(b), binary.BigEndian.Uint64(b[8:]), b[proposalHeader:], nil
}
