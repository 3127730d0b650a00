package storage

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// benchBatch is a batch of 16 records of 1 KiB, the shape used by the
// throughput benchmarks.
func benchBatch() []byte { return buildBatch(spec(16, 1024)) }

// BenchmarkAppend measures Append of 16 x 1 KiB-record batches, one record
// set per call and four per call (one pwritev for all four).
func BenchmarkAppend(b *testing.B) {
	for _, perCall := range []int{1, 4} {
		b.Run(map[int]string{1: "1-set", 4: "4-sets"}[perCall], func(b *testing.B) {
			l := mustOpen(b, b.TempDir(), DefaultConfig())
			defer l.Close()
			entries := make([]AppendEntry, perCall)
			for i := range entries {
				entries[i].Records = benchBatch()
			}
			b.SetBytes(int64(perCall * len(entries[0].Records)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := l.Append(entries, AppendOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRawWrite writes the same bytes with write(2) to a plain file, the
// floor Append is compared against.
func BenchmarkRawWrite(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "raw"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	buf := benchBatch()
	b.SetBytes(int64(len(buf)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendVsWrite interleaves rounds of Append and of write(2) of the
// same bytes in one run, so both see the same page cache and writeback
// pressure, and reports Append's throughput as a fraction of write(2)'s.
func BenchmarkAppendVsWrite(b *testing.B) {
	dir := b.TempDir()
	l := mustOpen(b, filepath.Join(dir, "log"), DefaultConfig())
	defer l.Close()
	f, err := os.Create(filepath.Join(dir, "raw"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	entries := []AppendEntry{{Records: benchBatch()}}
	raw := benchBatch()
	var tAppend, tWrite, cAppend, cWrite time.Duration
	const round = 256
	b.SetBytes(int64(len(raw)))
	b.ResetTimer()
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)
		start, c0 := time.Now(), cpuTime()
		for i := 0; i < n; i++ {
			if err := l.Append(entries, AppendOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		tAppend += time.Since(start)
		cAppend += cpuTime() - c0
		start, c0 = time.Now(), cpuTime()
		for i := 0; i < n; i++ {
			if _, err := f.Write(raw); err != nil {
				b.Fatal(err)
			}
		}
		tWrite += time.Since(start)
		cWrite += cpuTime() - c0
	}
	b.StopTimer()
	mb := float64(b.N) * float64(len(raw)) / 1e6
	b.ReportMetric(mb/tAppend.Seconds(), "append-MB/s")
	b.ReportMetric(mb/tWrite.Seconds(), "write-MB/s")
	b.ReportMetric(tWrite.Seconds()/tAppend.Seconds(), "append/write")
	// CPU time per batch is steadier than wall time on a shared machine.
	b.ReportMetric(float64(cAppend.Microseconds())/float64(b.N), "append-cpu-µs/op")
	b.ReportMetric(float64(cWrite.Microseconds())/float64(b.N), "write-cpu-µs/op")
}

// syntheticLog builds, in memory, a partition of nsegs segments of segBytes
// of log each with an index entry per 4 KiB, each 4 KiB holding 64 offsets
// (4 batches of 16 records). No log bytes exist; only the segment list and
// heap-backed indexes, which is all an offset lookup touches.
func syntheticLog(nsegs int, segBytes int64) *Log {
	const interval, offsetsPerInterval = 4096, 64
	entries := segBytes / interval
	segs := make([]*segment, nsegs)
	for i := range segs {
		s := newSegment("", int64(i)*entries*offsetsPerInterval)
		buf := make([]byte, entries*offsetEntrySize)
		for e := int64(0); e < entries; e++ {
			binary.BigEndian.PutUint32(buf[e*8:], uint32((e+1)*offsetsPerInterval-1))
			binary.BigEndian.PutUint32(buf[e*8+4:], uint32((e+1)*interval))
		}
		s.ix.off.buf = buf
		s.ix.off.truncate(entries)
		s.ix.mapped, s.ix.pinned = true, true
		s.size.Store(segBytes)
		s.lastOff.Store(s.base + entries*offsetsPerInterval - 1)
		segs[i] = s
	}
	l := &Log{}
	l.segs.Store(newSegList(segs))
	return l
}

// lookup is the search part of Read: segment, then sparse index.
func (l *Log) lookup(offset int64) int64 {
	segs := l.segs.Load()
	return segs.at(segs.find(offset)).indexLookup(offset)
}

// BenchmarkOffsetLookup looks up random offsets in a partition of 10,000
// segments covering ~100 GB of log (10 MiB each, an index entry per 4 KiB).
func BenchmarkOffsetLookup(b *testing.B) {
	const nsegs, segBytes = 10000, 10 << 20
	l := syntheticLog(nsegs, segBytes)
	last := l.segs.Load().last()
	maxOff := last.base + segBytes/4096*64
	rng := rand.New(rand.NewPCG(1, 2))
	offs := make([]int64, 1<<16)
	for i := range offs {
		offs[i] = rng.Int64N(maxOff)
	}
	b.ReportAllocs()
	b.ResetTimer()
	var sink int64
	for i := 0; i < b.N; i++ {
		sink += l.lookup(offs[i&(len(offs)-1)])
	}
	if sink == -1 {
		b.Fatal()
	}
}

// BenchmarkRead measures Read (lookup, header scan from the index hint, the
// region cut at maxBytes) on a real 256 MiB log of 16 KiB batches.
func BenchmarkRead(b *testing.B) {
	l := mustOpen(b, b.TempDir(), DefaultConfig())
	defer l.Close()
	entries := []AppendEntry{{Records: benchBatch()}}
	for l.Size() < 256<<20 {
		l.Append(entries, AppendOptions{})
	}
	l.SetHighWatermark(l.LogEndOffset())
	leo := l.LogEndOffset()
	rng := rand.New(rand.NewPCG(3, 4))
	offs := make([]int64, 1<<12)
	for i := range offs {
		offs[i] = rng.Int64N(leo)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := l.Read(offs[i&(len(offs)-1)], 1<<20, false)
		if err != nil {
			b.Fatal(err)
		}
		r.Release()
	}
}

// BenchmarkRecovery measures Open after an unclean stop with a 1 GiB active
// segment: "tail" flushed every 64 MiB (as flush.ms would), so only the
// unflushed tail is scanned; "full" never flushed, so the whole segment is
// read and CRC-checked. Set SLUICE_BIG_BENCH=1 to run (writes 2 GiB).
func BenchmarkRecovery(b *testing.B) {
	if os.Getenv("SLUICE_BIG_BENCH") == "" {
		b.Skip("set SLUICE_BIG_BENCH=1 to run (writes 1 GiB per case)")
	}
	for _, mode := range []string{"tail", "full"} {
		b.Run(mode, func(b *testing.B) {
			dir := filepath.Join(b.TempDir(), "p-0")
			cfg := DefaultConfig()
			cfg.SegmentBytes = 2 << 30
			l := mustOpen(b, dir, cfg)
			entries := []AppendEntry{{Records: buildBatch(spec(16, 1024))}}
			for l.Size() < 1<<30 {
				if err := l.Append(entries, AppendOptions{}); err != nil {
					b.Fatal(err)
				}
				if mode == "tail" && l.Size()%(64<<20) < int64(len(entries[0].Records)) {
					l.Flush()
				}
			}
			crash(l)
			rp, _ := os.ReadFile(filepath.Join(dir, recoveryPointFile))
			var cpu time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				restoreRecoveryPoint(b, dir, rp)
				c0 := cpuTime()
				b.StartTimer()
				l, err := Open(dir, cfg)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				cpu += cpuTime() - c0
				crash(l)
				b.StartTimer()
			}
			// On a shared, loaded box wall time mostly measures waiting for
			// a CPU; the process's own CPU time is the stable figure.
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
		})
	}
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func restoreRecoveryPoint(b *testing.B, dir string, rp []byte) {
	path := filepath.Join(dir, recoveryPointFile)
	if rp == nil {
		os.Remove(path)
		return
	}
	if err := os.WriteFile(path, rp, 0o644); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkReadSequential follows a consumer reading the log front to back
// with 1 MiB fetches: each fetch starts where the previous one stopped.
func BenchmarkReadSequential(b *testing.B) {
	l := mustOpen(b, b.TempDir(), DefaultConfig())
	defer l.Close()
	entries := []AppendEntry{{Records: benchBatch()}}
	for l.Size() < 256<<20 {
		l.Append(entries, AppendOptions{})
	}
	l.SetHighWatermark(l.LogEndOffset())
	b.ReportAllocs()
	b.ResetTimer()
	off := int64(0)
	for i := 0; i < b.N; i++ {
		r, err := l.Read(off, 1<<20, false)
		if err != nil {
			b.Fatal(err)
		}
		if r.Len == 0 {
			off = 0
			continue
		}
		off += r.Len / int64(len(entries[0].Records)) * 16 // fixed-size batches of 16 records
		r.Release()
	}
}
