package storage

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/sluice-broker/sluice/record"
)

// TestPropertyReplica runs random sequences of leader appends (plain and
// idempotent, over rising leader epochs), follower fetches at random sizes,
// divergent follower appends (a deposed leader's uncommitted tail),
// truncations anywhere, full truncations, and clean and crash restarts of
// both logs. After every step the follower must equal a model: its log
// start and end, the bytes of every batch, the leader-epoch history and
// the producer state its batches imply. At the end the follower catches
// up and its batches are byte-identical to the leader's, and both pass the
// index checks kafka-dump-log makes.
func TestPropertyReplica(t *testing.T) {
	seeds := uint64(4)
	if n, err := strconv.Atoi(os.Getenv("SLUICE_PROPERTY_SEEDS")); err == nil && n > 0 {
		seeds = uint64(n)
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) { runReplicaProperty(t, seed) })
	}
}

type replicaModel struct {
	start   int64    // follower log start
	batches [][]byte // follower batches, in order
	common  int      // batches[:common] are the leader's
}

func (m *replicaModel) end() int64 {
	if len(m.batches) == 0 {
		return m.start
	}
	return record.LastOffset(m.batches[len(m.batches)-1]) + 1
}

// cut keeps the batches that end below offset, and returns the new end.
func (m *replicaModel) cut(offset int64) {
	m.batches = prefixEnding(m.batches, offset)
	m.common = min(m.common, len(m.batches))
}

func runReplicaProperty(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed*31))
	root := fastTempDir(t)
	cfg := crashConfig()
	cfg.SegmentBytes = int64(2000 + rng.IntN(4000))
	cfg.IndexIntervalBytes = int32(rng.IntN(500))
	cfg.RetentionMs = -1
	ldir, fdir := filepath.Join(root, "leader"), filepath.Join(root, "follower")
	leader, f := mustOpen(t, ldir, cfg), mustOpen(t, fdir, cfg)
	defer func() { leader.Close(); f.Close() }()
	var lbatches [][]byte // the leader's batches
	epoch := int32(0)
	seqs := map[int64]int32{}
	var m replicaModel
	for step := 0; step < propertyIters(); step++ {
		switch op := rng.IntN(100); {
		case op < 35: // leader append
			entries := make([]AppendEntry, 1+rng.IntN(3))
			for i := range entries {
				s := spec(1+rng.IntN(5), rng.IntN(300))
				s.fill, s.ts = byte(rng.Uint32()), s.ts+int64(step)
				if pid := int64(rng.IntN(4)); pid > 0 {
					s.pid, s.epoch, s.seq = pid, 0, seqs[pid]
					seqs[pid] += int32(s.records)
				}
				entries[i].Records = buildBatch(s)
			}
			if err := leader.Append(entries, AppendOptions{LeaderEpoch: epoch}); err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if e.Err != nil {
					t.Fatalf("step %d: leader append: %v", step, e.Err)
				}
				lbatches = append(lbatches, e.Records)
			}
		case op < 40:
			epoch += int32(1 + rng.IntN(2))
		case op < 60: // follower fetch, after dropping a divergent tail
			if m.common < len(m.batches) {
				if err := f.TruncateTo(m.commonEnd()); err != nil {
					t.Fatal(err)
				}
				m.cut(m.commonEnd())
			}
			if f.LogEndOffset() >= leader.LogEndOffset() {
				break
			}
			b := fetch(t, leader, f.LogEndOffset(), int32(rng.IntN(3000)))
			if _, err := f.AppendAsFollower(b); err != nil {
				t.Fatalf("step %d: AppendAsFollower at %d: %v", step, f.LogEndOffset(), err)
			}
			for len(b) > 0 {
				n := record.Size(b)
				m.batches = append(m.batches, b[:n])
				b = b[n:]
			}
			m.common = len(m.batches)
			f.SetHighWatermark(min(leader.LogEndOffset(), f.LogEndOffset()-int64(rng.IntN(3))))
		case op < 68: // the follower led for a while and wrote a tail of its own
			entries := make([]AppendEntry, 1+rng.IntN(2))
			for i := range entries {
				s := spec(1+rng.IntN(3), rng.IntN(200))
				s.fill = 0xee
				entries[i].Records = buildBatch(s)
			}
			if err := f.Append(entries, AppendOptions{LeaderEpoch: max(f.LatestEpoch(), 0)}); err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if e.Err != nil {
					t.Fatal(e.Err)
				}
				m.batches = append(m.batches, e.Records)
			}
		case op < 80: // truncate anywhere at or above the log start
			off := m.start + rng.Int64N(m.end()-m.start+3)
			if err := f.TruncateTo(off); err != nil {
				t.Fatalf("step %d: TruncateTo(%d): %v", step, off, err)
			}
			m.cut(off)
		case op < 83: // fell behind the leader's log start: start afresh at a leader batch
			off := leader.LogEndOffset()
			if len(lbatches) > 0 && rng.IntN(4) > 0 {
				off = record.BaseOffset(lbatches[rng.IntN(len(lbatches))])
			}
			if err := f.TruncateFullyAndStartAt(off); err != nil {
				t.Fatal(err)
			}
			m = replicaModel{start: off}
		case op < 89:
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			checkDumpLogInvariants(t, fdir)
			f = mustOpen(t, fdir, cfg)
		case op < 95:
			crash(f)
			f = mustOpen(t, fdir, cfg)
		case op < 97:
			crash(leader)
			leader = mustOpen(t, ldir, cfg)
		default:
			if err := f.Flush(); err != nil {
				t.Fatal(err)
			}
		}
		checkReplica(t, f, m.start, m.batches)
	}
	// Catch up: drop the divergent tail, fetch the rest, compare bytes.
	if err := f.TruncateTo(m.commonEnd()); err != nil {
		t.Fatal(err)
	}
	catchUp(t, leader, f, 1<<20)
	i := slices.IndexFunc(lbatches, func(b []byte) bool { return record.BaseOffset(b) >= m.start })
	want := [][]byte{}
	if i >= 0 {
		want = lbatches[i:]
	}
	checkReplica(t, f, m.start, want)
	leader.Close()
	f.Close()
	if got, lw := logStream(t, fdir), slices.Concat(want...); !bytes.Equal(got, lw) {
		t.Fatalf("follower segments (%d bytes) differ from the leader's batches (%d bytes)", len(got), len(lw))
	}
	checkDumpLogInvariants(t, fdir)
	checkDumpLogInvariants(t, ldir)
	leader, f = mustOpen(t, ldir, cfg), mustOpen(t, fdir, cfg)
}

func (m *replicaModel) commonEnd() int64 {
	if m.common == 0 {
		return m.start
	}
	return record.LastOffset(m.batches[m.common-1]) + 1
}
