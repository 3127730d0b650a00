// Package storage is Sluice's partition log: Kafka's on-disk layout, so that
// Apache Kafka's kafka-dump-log reads our segment files, with a data path
// built for zero-copy fetches.
//
// # Files
//
// One directory per partition, "<topic>-<partition>/":
//
//	00000000000000000000.log        record batches, byte-for-byte as produced
//	00000000000000000000.index      sparse offset index (mmap'd)
//	00000000000000000000.timeindex  sparse timestamp index (mmap'd)
//	00000000000000000000.txnindex   aborted transactions whose marker is in the segment (txnindex.go)
//	00000000000000081920.log        next segment, named by its base offset
//	...
//	00000000000000081920.snapshot   producer state (idempotence, open transactions) at that offset
//	leader-epoch-checkpoint         "0\n<n>\n<epoch> <startOffset>\n..." (Kafka's)
//	recovery-point-offset-checkpoint  "0\n1\n<offset> <segBase> <pos> <maxTs> <maxTsOff> <bytesSinceIndex>\n"
//	log-start-offset-checkpoint     "0\n1\n<offset>\n"
//	replication-offset-checkpoint   "0\n1\n<high watermark>\n"
//	cleaner-offset-checkpoint       "0\n1\n<cleaned to> <earliest delete horizon>\n" (compacted logs)
//	.clean-shutdown                 present only between Close and the next Open
//	*.deleted                       segments awaiting removal (file.delete.delay.ms)
//	*.cleaned, *.swap               compaction output being written / about to replace segments
//
// # .log: RecordBatch v2 (magic 2) batches, back to back
//
// The batch format (header, attributes, records, codecs, CRC-32C) is
// package record's, whose doc draws it; storage reads and writes it only
// through that package. What the log adds:
//
//   - Append validates each batch (checkBatch: length, magic, CRC-32C,
//     lastOffsetDelta = numRecords-1, codec, producer fields) and then
//     rewrites in place baseOffset and partitionLeaderEpoch, which lie
//     outside the CRC, so assigning offsets costs no CRC pass.
//     LogAppendTime topics also get attrs bit 3 and maxTimestamp set, and
//     then the CRC is recomputed. A caller that parsed the header already
//     passes it in AppendEntry.Header, and it is not parsed again.
//   - A batch the cleaner rewrote keeps baseOffset and lastOffsetDelta but
//     may hold fewer records (down to none), with offset gaps between
//     them, and may carry the delete-horizon attribute (KIP-534).
//
// # .index and .timeindex: sparse, one entry per index.interval.bytes of log
//
//	.index entry (8 bytes)             .timeindex entry (12 bytes)
//	+--------------+---------------+   +-----------------------+--------------+
//	| relOffset    | position      |   | timestamp             | relOffset    |
//	| uint32       | uint32        |   | int64                 | uint32       |
//	+--------------+---------------+   +-----------------------+--------------+
//	relOffset = batch lastOffset -      timestamp = largest maxTimestamp so far,
//	  segment base; position = byte     relOffset = last offset of the batch
//	  offset of that batch in .log      that carried it; strictly increasing
//
// The active segment's index files are preallocated to segment.index.bytes
// (sparse files, so no disk is used) and mapped read-write while it is in
// use (an idle one is unmapped, see mapcache.go); a roll or Close trims
// them to their entries, which is what kafka-dump-log expects. Segment
// .log descriptors are opened on demand and cached (logfiles.go).
//
// # Concurrency
//
// Appends are serialised by Log.mu and write with one pwritev per segment.
// Reads take no lock: the log end offset and high watermark are published as
// (offset, segment, position) triples behind a seqlock, the segment list is
// an immutable slice swapped atomically, and index entries are written before
// the count that publishes them. A reader therefore never sees a batch that
// is not completely written. Read returns a Region of the segment file, not
// bytes; a Region holds its descriptor open until it is released
// (logfiles.go), so an in-flight sendfile of a Region stays valid whatever
// the descriptor cache, retention, compaction or truncation do meanwhile.
//
// # Durability and recovery
//
// Appends go to the page cache. flush.messages and flush.ms, a roll and
// Close fsync, and each flush advances the recovery point (at most once a
// second on disk, always on roll and Close). After an unclean stop only the
// bytes after the recovery point are re-read and CRC-checked; see
// recovery.go for how a torn tail is told from corruption. A failed write or
// fsync makes the log refuse all later appends with that error.
//
// # Replication
//
// A follower appends the leader's batches unchanged with AppendAsFollower
// (offsets, epochs and bytes are the leader's, so segments match the
// leader's byte for byte when both roll alike) and cuts a divergent tail
// with TruncateTo or TruncateFullyAndStartAt; see follower.go and
// truncate.go, which also state what a concurrent reader sees and why each
// truncation step is crash-safe.
//
// # Transactions
//
// Transactional batches open a transaction per producer, markers (control
// batches) close it; the first unstable offset and the last stable offset
// (LSO) that read_committed reads stop at, the transaction index that
// lists aborted transactions for their fetches, and how recovery,
// truncation and followers keep both are in txn.go and txnindex.go.
//
// # Compaction
//
// Logs with cleanup.policy=compact are cleaned by Compact, as Kafka's log
// cleaner does: the inactive segments are rewritten keeping each key's
// latest record at its original offset, tombstones for delete.retention.ms,
// and swapped in atomically for readers and crash-safely on disk; see
// compact.go.
package storage
