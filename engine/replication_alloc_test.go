package engine

import (
	"io"
	"log/slog"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/storage"
)

// TestFetchRackAndThrottleAllocateNoMore pins that KIP-392 and the
// replication throttles cost the fetch path nothing: a consumer fetch
// naming a rack from a rack-aware leader, and a follower's fetch of a
// throttled partition under a throttle rate (replicas in and out of the
// ISR), allocate what a consumer fetch does (request decoding only).
func TestFetchRackAndThrottleAllocateNoMore(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are meaningless under the race detector (sync.Pool drops items at random)")
	}
	cfg := DefaultConfig()
	cfg.DataDir, cfg.Listen = t.TempDir(), "127.0.0.1:9092"
	cfg.ReplicaSelectorClass, cfg.BrokerRack = rackAwareSelector, "r1"
	cfg.LeaderReplicationThrottledRate = 1 << 40
	br, err := New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { br.Close() })
	if _, err := br.CreateTopic("bench", 1, map[string]string{leaderThrottledReplicas: "*"}, false); err != nil {
		t.Fatal(err)
	}
	p := br.Topic("bench").Partition(0)
	leadWith(p, 1, 1, 2)
	batch := BuildTestBatch(t, TestBatchOpts{ProducerID: -1}, TestRecord{Value: make([]byte, 1000)})
	for range 10 {
		if err := p.append([]storage.AppendEntry{{Records: append([]byte(nil), batch...)}}, 1, 0); err != nil {
			t.Fatal(err)
		}
	}
	p.followerFetched(2, p.LogEndOffset(), wallMs()) // the high watermark reaches the log end
	allocs := func(replica int32, rack string) float64 {
		req := kmsg.NewPtrFetchRequest()
		req.MaxBytes, req.ReplicaID, req.Rack = 1<<20, replica, rack
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.PartitionMaxBytes = 1 << 20
		req.Topics = []kmsg.FetchRequestTopic{{Topic: "bench", Partitions: []kmsg.FetchRequestTopicPartition{fp}}}
		f := frame(req, 12)
		return testing.AllocsPerRun(200, func() {
			br.Handle(&Session{}, f, func(r *Response) {
				if r.Size < 10000 {
					t.Fatalf("fetch answered %d bytes", r.Size)
				}
				r.Release()
			})
		})
	}
	// Decoding a non-empty rack costs the request one string: compare a
	// consumer in another rack with one in the leader's.
	for _, c := range []struct {
		name          string
		replica       int32
		rack, against string
	}{{"consumer in another rack, no replica there", -1, "r2", "r1"}, {"in-sync follower", 2, "", ""}, {"out-of-sync follower", 3, "", ""}} {
		if n, base := allocs(c.replica, c.rack), allocs(-1, c.against); n > base {
			t.Errorf("%s: %v allocations per fetch, a consumer fetch from rack %q %v", c.name, n, c.against, base)
		}
	}
}
