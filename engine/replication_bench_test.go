package engine_test

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/metadata"
)

// BenchmarkReplicatedProduce: one producer connection sending 1 KiB
// batches one after another to a partition led by broker 1 and followed
// by broker 2 (two in-process brokers, real fetchers over loopback TCP).
// acks=1 is answered after the leader's append; acks=all after the
// follower's next fetch shows it has the batch (two more round trips).
func BenchmarkReplicatedProduce(b *testing.B) {
	c := startCluster(b, 2)
	c.createTopic("bench", 1, []int32{1, 2}, nil)
	batch := engine.BuildTestBatch(b, engine.TestBatchOpts{ProducerID: -1}, engine.TestRecord{Value: make([]byte, 1024)})
	for _, acks := range []int16{1, -1} {
		b.Run(fmt.Sprintf("acks=%d", acks), func(b *testing.B) {
			rc := dialRaw(b, c.brokers[1].Addr)
			b.SetBytes(int64(len(batch)))
			for b.Loop() {
				if a := produceWithTimeout(rc, acks, 10_000, "bench", batch); a.ErrorCode != 0 {
					b.Fatal(kerr.ErrorForCode(a.ErrorCode))
				}
			}
		})
	}
}

// BenchmarkReplicaFetcherIdle: broker 2 follows 10,000 idle partitions
// led by broker 1 — one fetcher, one fetch session. It reports the CPU the
// process (both brokers: the leader answering, the follower fetching)
// spends per second of idleness, per partition, and the heap both hold.
func BenchmarkReplicaFetcherIdle(b *testing.B) {
	partitions := benchIdlePartitions()
	c := startCluster(b, 2)
	if os.Getenv("SLUICE_BENCH_UNREPLICATED") != "" {
		// The baseline: the same logs on the same brokers, each broker
		// leading its own copy alone, no fetcher.
		for id, tb := range c.brokers {
			recs := []metadata.Record{metadata.TopicRecord{Name: "idle", TopicID: [16]byte{9}}}
			for i := range partitions {
				recs = append(recs, metadata.SingleNodePartition([16]byte{9}, i, id, 0))
			}
			if err := engine.CommitRecords(tb.Broker, recs...); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		// The follower opens its logs first, so that the leader's
		// followers are fetching as soon as it leads (opening thousands of
		// logs takes longer than replica.lag.time.max.ms here).
		c.createTopicOn("idle", partitions, []int32{1, 2}, []int32{2, 1}, nil)
		lead := c.brokers[1].Broker.Topic("idle").Partitions()
		waitFor(b, "every partition in sync", func() bool {
			for _, p := range lead {
				if len(p.ISR()) != 2 || p.HighWatermark() != p.LogEndOffset() {
					return false
				}
			}
			return true
		})
	}
	time.Sleep(2 * time.Second) // the session is set up and every partition fetched
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if path := os.Getenv("SLUICE_BENCH_IDLE_PROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	cpu0, wall0 := cpuTime(b), time.Now()
	b.ResetTimer()
	for b.Loop() {
		time.Sleep(100 * time.Millisecond)
	}
	b.StopTimer()
	cpu, wall := cpuTime(b)-cpu0, time.Since(wall0)
	perSec := float64(cpu) / wall.Seconds()
	b.ReportMetric(perSec/float64(time.Millisecond), "cpu-ms/s")
	b.ReportMetric(perSec/float64(partitions), "cpu-ns/s/partition")
	b.ReportMetric(float64(openFDs()), "fds")
	b.ReportMetric(float64(ms.HeapInuse)/(1<<20), "heap-MiB")
}

// cpuTime is the process's user + system CPU time.
func cpuTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchIdlePartitions is $SLUICE_BENCH_PARTITIONS, default 10,000.
func benchIdlePartitions() int32 {
	if n, err := strconv.Atoi(os.Getenv("SLUICE_BENCH_PARTITIONS")); err == nil && n > 0 {
		return int32(n)
	}
	return 10_000
}

func openFDs() int {
	des, _ := os.ReadDir("/proc/self/fd")
	return len(des)
}
