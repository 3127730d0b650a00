package replication

import (
	"errors"
	"slices"
	"testing"
)

var cfg = LeaderConfig{LagTimeMaxMs: 30000, MinISR: 2}

func TestHighWatermarkIsSmallestISRLogEnd(t *testing.T) {
	l := NewLeader(cfg, 1, 5, 0, []int32{1, 2, 3}, []int32{1, 2, 3}, 0, 0, 0)
	if l.OnAppend(10) {
		t.Fatal("HW moved before any follower fetched")
	}
	l.OnFollowerFetch(2, 10, 1)
	if l.HighWatermark() != 0 {
		t.Fatalf("HW %d with follower 3 at unknown offset", l.HighWatermark())
	}
	moved, _ := l.OnFollowerFetch(3, 7, 1)
	if !moved || l.HighWatermark() != 7 {
		t.Fatalf("HW %d moved=%v, want 7", l.HighWatermark(), moved)
	}
	// A follower reporting an older offset never pulls HW back.
	l.OnFollowerFetch(3, 4, 2)
	if l.HighWatermark() != 7 {
		t.Fatalf("HW went back to %d", l.HighWatermark())
	}
}

func TestNewLeaderKeepsHighWatermarkUntilFollowersFetch(t *testing.T) {
	l := NewLeader(cfg, 2, 6, 3, []int32{1, 2, 3}, []int32{2, 3}, 100, 80, 0)
	if l.HighWatermark() != 80 {
		t.Fatalf("HW %d, want the inherited 80", l.HighWatermark())
	}
	l.OnFollowerFetch(3, 100, 1)
	if l.HighWatermark() != 100 {
		t.Fatalf("HW %d after the only other ISR member caught up", l.HighWatermark())
	}
}

func TestLaggingFollowerLeavesISRThenHWAdvancesWithoutIt(t *testing.T) {
	l := NewLeader(cfg, 1, 0, 0, []int32{1, 2, 3}, []int32{1, 2, 3}, 0, 0, 0)
	l.OnAppend(50)
	l.OnFollowerFetch(2, 50, 1000)
	l.OnFollowerFetch(3, 10, 1000) // stuck at 10
	if p := l.Tick(30000); p != nil {
		t.Fatalf("shrink proposed before replica.lag.time.max.ms: %v", p.ISR)
	}
	p := l.Tick(30001)
	if p == nil || !slices.Equal(p.ISR, []int32{1, 2}) {
		t.Fatalf("proposal %+v, want ISR [1 2]", p)
	}
	// Until the controller commits, 3 still holds HW back.
	if l.HighWatermark() != 10 {
		t.Fatalf("HW %d moved past a member whose removal is not committed", l.HighWatermark())
	}
	if l.Tick(40000) != nil {
		t.Fatal("second proposal while one is pending")
	}
	if !l.OnISRCommitted([]int32{1, 2}, 1) || l.HighWatermark() != 50 {
		t.Fatalf("HW %d after shrink committed, want 50", l.HighWatermark())
	}
}

func TestFollowerThatKeepsFetchingButNeverReachesTheEndLeaves(t *testing.T) {
	// Produce keeps the leader ahead; the follower fetches every second but
	// each fetch ends short of the leader's end at its previous fetch.
	l := NewLeader(cfg, 1, 0, 0, []int32{1, 2}, []int32{1, 2}, 0, 0, 0)
	for s := int64(1); s <= 40; s++ {
		l.OnAppend(s * 100)
		l.OnFollowerFetch(2, s*100-150, s*1000)
	}
	if p := l.Tick(40 * 1000); p == nil || !slices.Equal(p.ISR, []int32{1}) {
		t.Fatalf("a follower never caught up stayed in the ISR: %+v", p)
	}
}

func TestCaughtUpFollowerRejoinsISR(t *testing.T) {
	l := NewLeader(cfg, 1, 0, 2, []int32{1, 2, 3}, []int32{1, 2}, 40, 40, 0)
	l.OnAppend(60)
	l.OnFollowerFetch(2, 60, 1)
	if _, p := l.OnFollowerFetch(3, 30, 1); p != nil {
		t.Fatal("expansion proposed below HW")
	}
	_, p := l.OnFollowerFetch(3, 60, 2)
	if p == nil || !slices.Equal(p.ISR, []int32{1, 2, 3}) || p.PartitionEpoch != 2 {
		t.Fatalf("expansion %+v", p)
	}
	// While pending, the joining member already bounds HW (maximal ISR).
	l.OnAppend(70)
	l.OnFollowerFetch(2, 70, 3)
	if l.HighWatermark() != 60 {
		t.Fatalf("HW %d passed a member whose addition is pending", l.HighWatermark())
	}
	l.OnISRCommitted([]int32{1, 2, 3}, 3)
	if l.Pending() != nil || len(l.ISR()) != 3 {
		t.Fatal("commit did not clear the pending change")
	}
}

func TestAcksAllNeedsMinISR(t *testing.T) {
	l := NewLeader(cfg, 1, 0, 0, []int32{1, 2, 3}, []int32{1}, 0, 0, 0)
	if !errors.Is(l.CheckAcksAll(), ErrNotEnoughReplicas) {
		t.Fatal("acks=all accepted with ISR below min.insync.replicas")
	}
	l = NewLeader(cfg, 1, 0, 0, []int32{1, 2, 3}, []int32{1, 2}, 0, 0, 0)
	if err := l.CheckAcksAll(); err != nil {
		t.Fatal(err)
	}
	l.OnAppend(5)
	if done, _ := l.AcksAllDone(5); done {
		t.Fatal("acks=all answered before the ISR had the batch")
	}
	l.OnFollowerFetch(2, 5, 1)
	if done, err := l.AcksAllDone(5); !done || err != nil {
		t.Fatalf("done=%v err=%v after follower caught up", done, err)
	}
	l.OnAppend(9)
	l.OnISRCommitted([]int32{1}, 1)
	if done, err := l.AcksAllDone(9); !done || !errors.Is(err, ErrNotEnoughReplicasAfterAppend) {
		t.Fatalf("done=%v err=%v after ISR shrank below min", done, err)
	}
}

// epochLog is a log's leader-epoch history: epochs[i] starts at starts[i].
type epochLog struct {
	epochs []int32
	starts []int64
	leo    int64
	start  int64
}

func (e epochLog) LogEndOffset() int64   { return e.leo }
func (e epochLog) LogStartOffset() int64 { return e.start }
func (e epochLog) LatestEpoch() int32 {
	if len(e.epochs) == 0 {
		return -1
	}
	return e.epochs[len(e.epochs)-1]
}
func (e epochLog) EndOffsetForEpoch(epoch int32) (int32, int64) {
	for i := len(e.epochs) - 1; i >= 0; i-- {
		if e.epochs[i] <= epoch {
			if i+1 < len(e.epochs) {
				return e.epochs[i], e.starts[i+1]
			}
			return e.epochs[i], e.leo
		}
	}
	return -1, -1
}

func TestFollowerTruncation(t *testing.T) {
	cases := []struct {
		name     string
		follower epochLog
		leader   epochLog
		hw       int64
		want     int64
		asks     int
	}{
		{"same epoch, follower ahead: cut the unreplicated tail",
			epochLog{[]int32{0, 1}, []int64{0, 5}, 12, 0}, epochLog{[]int32{0, 1}, []int64{0, 5}, 9, 0}, 5, 9, 1},
		{"same epoch, follower behind: keep everything",
			epochLog{[]int32{0, 1}, []int64{0, 5}, 7, 0}, epochLog{[]int32{0, 1}, []int64{0, 5}, 9, 0}, 5, 7, 1},
		{"KIP-101: old leader's uncommitted epoch is cut at the new leader's",
			epochLog{[]int32{0, 1}, []int64{0, 5}, 8, 0}, epochLog{[]int32{0, 2}, []int64{0, 5}, 9, 0}, 5, 5, 1},
		{"KIP-279: epochs both sides lack are walked down",
			epochLog{[]int32{0, 1, 3}, []int64{0, 3, 6}, 9, 0}, epochLog{[]int32{0, 2}, []int64{0, 4}, 10, 0}, 2, 3, 2},
		{"leader without that history: truncate to HW",
			epochLog{[]int32{4}, []int64{0}, 9, 0}, epochLog{[]int32{5}, []int64{20}, 30, 20}, 6, 6, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, s := NewFollower(2, 7, c.follower)
			asks := 0
			for s.AskEpoch >= 0 {
				asks++
				if asks > 5 {
					t.Fatal("no convergence")
				}
				e, end := c.leader.EndOffsetForEpoch(s.AskEpoch)
				s = f.OnEpochEndOffset(e, end, c.follower, c.hw)
			}
			if s.TruncateTo != c.want || s.FetchFrom != c.want || f.Phase() != Fetching {
				t.Fatalf("step %+v, want truncate and fetch at %d", s, c.want)
			}
			if asks != c.asks {
				t.Fatalf("%d OffsetForLeaderEpoch round trips, want %d", asks, c.asks)
			}
		})
	}
}

// leaderFetch is what a leader with log l answers a follower fetching at
// offset with lastEpoch (Kafka's validation of Fetch v12+): where the
// follower's history parts from its own (diverging), or out of range
// when it cannot place the epoch.
func leaderFetch(l epochLog, lastEpoch int32, offset int64) (epoch int32, end int64, diverging, outOfRange bool) {
	if lastEpoch >= 0 {
		epoch, end = l.EndOffsetForEpoch(lastEpoch)
		if epoch < 0 || end < 0 || offset < l.start {
			return -1, -1, false, true
		}
		if epoch < lastEpoch || end < offset {
			return epoch, end, true, false
		}
	}
	return -1, -1, false, offset < l.start || offset > l.leo
}

// TestFollowerTruncationOnFetch: the cases of TestFollowerTruncation with
// truncation on fetch (KIP-595's DivergingEpoch, as Kafka 2.7+ replicas
// do): the follower fetches at once naming its latest epoch, truncates
// only when the leader's answer says where the logs part, and ends where
// OffsetForLeaderEpoch would have taken it; OffsetForLeaderEpoch is asked
// only for an epoch of the leader's this log lacks (KIP-279).
func TestFollowerTruncationOnFetch(t *testing.T) {
	cases := []struct {
		name     string
		follower epochLog
		leader   epochLog
		hw       int64
		want     int64
		asks     int
	}{
		{"same epoch, follower ahead: cut the unreplicated tail",
			epochLog{[]int32{0, 1}, []int64{0, 5}, 12, 0}, epochLog{[]int32{0, 1}, []int64{0, 5}, 9, 0}, 5, 9, 0},
		{"same epoch, follower behind: no truncation at all",
			epochLog{[]int32{0, 1}, []int64{0, 5}, 7, 0}, epochLog{[]int32{0, 1}, []int64{0, 5}, 9, 0}, 5, 7, 0},
		{"KIP-101: old leader's uncommitted epoch is cut at the new leader's",
			epochLog{[]int32{0, 1}, []int64{0, 5}, 8, 0}, epochLog{[]int32{0, 2}, []int64{0, 5}, 9, 0}, 5, 5, 0},
		{"KIP-279: an epoch the follower lacks is asked about",
			epochLog{[]int32{0, 1, 3}, []int64{0, 3, 6}, 9, 0}, epochLog{[]int32{0, 2}, []int64{0, 4}, 10, 0}, 2, 3, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, s := NewFetchingFollower(2, 7, c.follower)
			if s.AskEpoch >= 0 || s.TruncateTo >= 0 || s.FetchFrom != c.follower.leo || f.Phase() != Fetching {
				t.Fatalf("first step %+v: want a fetch from the log end, nothing cut", s)
			}
			last := f.LastFetchedEpoch(c.follower)
			epoch, end, diverging, oor := leaderFetch(c.leader, last, f.FetchOffset())
			if oor {
				t.Fatal("out of range")
			}
			if !diverging {
				if c.want != c.follower.leo {
					t.Fatalf("leader saw no divergence; want truncation to %d", c.want)
				}
				return
			}
			s = f.OnDivergingEpoch(last, epoch, end, c.follower, c.hw)
			asks := 0
			for s.AskEpoch >= 0 {
				if asks++; asks > 5 {
					t.Fatal("no convergence")
				}
				if s.TruncateTo >= 0 {
					t.Fatalf("truncated to %d before the final answer", s.TruncateTo)
				}
				e, end := c.leader.EndOffsetForEpoch(s.AskEpoch)
				s = f.OnEpochEndOffset(e, end, c.follower, c.hw)
			}
			if s.TruncateTo != c.want || s.FetchFrom != c.want || f.Phase() != Fetching {
				t.Fatalf("step %+v, want truncate and fetch at %d", s, c.want)
			}
			if asks != c.asks {
				t.Fatalf("%d OffsetForLeaderEpoch round trips, want %d", asks, c.asks)
			}
		})
	}
}

func TestFollowerWithoutEpochsNamesNone(t *testing.T) {
	log := epochLog{leo: 0}
	f, _ := NewFetchingFollower(1, 3, log)
	if e := f.LastFetchedEpoch(log); e != -1 {
		t.Fatalf("last fetched epoch %d for a log without epochs", e)
	}
	f, _ = NewFollower(1, 3, epochLog{[]int32{2}, []int64{0}, 4, 0})
	if e := f.LastFetchedEpoch(epochLog{[]int32{2}, []int64{0}, 4, 0}); e != -1 {
		t.Fatalf("an OffsetForLeaderEpoch follower names epoch %d in fetches", e)
	}
}

func TestEmptyFollowerFetchesAtOnce(t *testing.T) {
	_, s := NewFollower(1, 3, epochLog{leo: 0})
	if s.AskEpoch >= 0 || s.FetchFrom != 0 {
		t.Fatalf("step %+v", s)
	}
}

func TestFollowerBehindLeaderLogStartResets(t *testing.T) {
	log := epochLog{[]int32{0}, []int64{0}, 10, 0}
	f, _ := NewFollower(1, 1, log)
	f.OnEpochEndOffset(0, 10, log, 10)
	s := f.OnOutOfRange(500, 900, log)
	if s.ResetTo != 500 || s.FetchFrom != 500 {
		t.Fatalf("step %+v, want reset to the leader's log start", s)
	}
}

func TestFollowerHighWatermarkBoundedByOwnLog(t *testing.T) {
	log := epochLog{leo: 0}
	f, _ := NewFollower(1, 1, log)
	if hw := f.OnFetched(40, 100); hw != 40 {
		t.Fatalf("follower HW %d beyond its own log end", hw)
	}
}

func TestQuotaAveragesTheRate(t *testing.T) {
	var q Quota
	const rate = 1000 // bytes/s
	sent := int64(0)
	for now := int64(1); now <= 10_000; now += 10 { // 10 s in 10 ms steps
		if !q.Exceeded(rate, now) {
			q.Record(300, rate, now) // a fetch's worth at a time
			sent += 300
		}
	}
	// One second's burst above 10 s of the rate, at most one send over.
	if sent < 10_000 || sent > 11_000+300 {
		t.Fatalf("sent %d bytes in 10 s at %d bytes/s", sent, rate)
	}
	var free Quota
	for now := int64(1); now < 100; now++ {
		free.Record(1<<30, Unthrottled, now)
		if free.Exceeded(Unthrottled, now) {
			t.Fatal("an unthrottled quota was exceeded")
		}
	}
}

func TestThrottledReplicaLists(t *testing.T) {
	for _, c := range []struct {
		list      string
		partition int32
		broker    int32
		want      bool
	}{
		{"*", 3, 9, true},
		{" * ", 3, 9, true},
		{"", 0, 1, false},
		{"0:1,1:2", 1, 2, true},
		{"0:1, 1:2", 1, 2, true},
		{"0:1,1:2", 1, 1, false},
		{"10:1", 1, 1, false},
	} {
		if got := ThrottledReplica(c.list, c.partition, c.broker); got != c.want {
			t.Errorf("ThrottledReplica(%q, %d, %d) = %v", c.list, c.partition, c.broker, got)
		}
	}
	for list, valid := range map[string]bool{"*": true, "": true, "0:1,2:3": true, " 0 : 1 ": true,
		"0:1,": true, "x": false, "0:-1": false, "1": false, "*,0:1": false, "0:99999999999": false} {
		if ValidThrottledReplicas(list) != valid {
			t.Errorf("ValidThrottledReplicas(%q) = %v", list, !valid)
		}
	}
	if n := testing.AllocsPerRun(100, func() { ThrottledReplica("0:1, 1:2, 2:3", 2, 3) }); n != 0 {
		t.Fatalf("%v allocations per match", n)
	}
}
