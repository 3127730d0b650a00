package engine

// The log cleaner compacts the partitions of topics with
// cleanup.policy=compact (__consumer_offsets among them), as Kafka's
// LogCleaner threads do: every log.cleaner.backoff.ms (the current value:
// it changes at run time, dynconfig.go) it asks each
// compacted partition whether a pass is due (its dirty ratio reached
// min.cleanable.dirty.ratio, or a kept tombstone's delete.retention.ms ran
// out) and cleans those that are, one at a time. Records of aborted
// transactions go, and transaction markers once no record of their
// transaction is left and delete.retention.ms has passed (storage's
// compact_txn.go). It runs on its own
// goroutine because a pass reads and rewrites whole segments; rolls,
// flushes and retention stay on the housekeeping loop and are not held up.

import (
	"errors"
	"time"

	"github.com/sluice-broker/sluice/storage"
)

// cleanerTick bounds how late a changed log.cleaner.backoff.ms is noticed,
// and how often a backoff of 0 runs rounds.
const cleanerTick = 100 * time.Millisecond

func (b *Broker) logCleaner() {
	defer b.wg.Done()
	tick := time.NewTicker(cleanerTick)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-b.closing:
			return
		case now := <-tick.C:
			if now.Sub(last) >= b.currentConfig().LogCleanerBackoff {
				last = now
				b.compactLogs(now.UnixMilli())
			}
		}
	}
}

// compactLogs runs a pass on every compacted partition that is due and
// returns how many it cleaned. It stops between partitions when the broker
// closes (a pass in progress stops when its log is closed).
func (b *Broker) compactLogs(nowMs int64) int {
	cleaned := 0
	for _, t := range b.Topics() {
		if !t.Settings().Log.Compact {
			continue
		}
		for _, p := range t.Partitions() {
			if p == nil {
				continue // hosted elsewhere
			}
			select {
			case <-b.closing:
				return cleaned
			default:
			}
			if !p.compactionDue(nowMs) {
				continue
			}
			st, err := p.compact(nowMs)
			if err != nil {
				if !errors.Is(err, storage.ErrClosed) {
					b.log.Error("log compaction failed", "topic", t.Name, "partition", p.Index, "err", err)
				}
				continue
			}
			cleaned++
			b.log.Info("log compacted", "topic", t.Name, "partition", p.Index,
				"cleaned_to", st.CleanedTo, "keys", st.Keys, "segments", st.SegmentsReplaced, "into", st.SegmentsWritten,
				"bytes", st.BytesReplaced, "bytes_after", st.BytesWritten, "records", st.Records, "kept", st.RecordsKept,
				"tombstones_removed", st.TombstonesRemoved, "aborted_removed", st.AbortedRemoved, "markers_removed", st.MarkersRemoved)
		}
	}
	return cleaned
}

// CompactLogsNow runs one log-cleaner round now, as the cleaner loop does,
// and returns how many partitions it cleaned (tests and admin tools).
func (b *Broker) CompactLogsNow() int { return b.compactLogs(time.Now().UnixMilli()) }
