// Package record is Kafka's RecordBatch v2 format (magic 2), in one place:
// the batch header and its attribute bits, the records inside a batch, the
// codecs that compress them, a builder that writes batches with their
// length and CRC-32C, and the control records that mark the end of a
// transaction. It is a leaf: storage, the engine, the log cleaner and the
// group coordinator's log all read and write batches through it.
//
// # Batch
//
// All integers are big-endian.
//
//	 0               8       12              16  17              21      23
//	+---------------+-------+---------------+---+---------------+-------+
//	| baseOffset    |length | partLeaderEp. |mag|   crc32c      | attrs |
//	| int64 *       |int32  | int32 *       |=2 |   uint32      | int16 |
//	+---------------+-------+---------------+---+---------------+-------+
//	 23      27              35              43              51  53      57      61
//	+-------+---------------+---------------+---------------+---+-------+-------+----------
//	|lastOff| firstTimestamp| maxTimestamp  | producerId    |pEp|baseSeq|numRecs| records...
//	|Delta  | int64         | int64         | int64         |i16| int32 | int32 | (maybe
//	|int32  |               |               |               |   |       |       | compressed)
//	+-------+---------------+---------------+---------------+---+-------+-------+----------
//	        |<------------ CRC-32C (Castagnoli) covers attrs .. end of batch ------------->|
//
//	length counts the bytes after the length field; a batch is length+12
//	bytes (LogOverhead). lastOffsetDelta is the offset delta of the last
//	record; a batch as produced holds numRecords = lastOffsetDelta+1 records.
//	attrs: bits 0-2 codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd),
//	       3 timestamp type (1 = LogAppendTime), 4 transactional,
//	       5 control, 6 delete horizon (firstTimestamp is the time the
//	       cleaner drops the batch's tombstones, KIP-534).
//	producerId -1 means no idempotent producer (producerEpoch and
//	baseSequence are then -1 too).
//	* outside the CRC: a log assigns offsets and stamps its leader epoch
//	  without recomputing it (SetBaseOffset, SetLeaderEpoch).
//
// # Record
//
// The records section, once decompressed, is numRecords records back to
// back. Varints are zig-zag (protobuf sint), as encoding/binary writes them.
//
//	length         varint   bytes after this field
//	attributes     int8     unused, 0
//	timestampDelta varlong  timestamp - firstTimestamp
//	offsetDelta    varint   offset - baseOffset
//	keyLength      varint   -1 = null key
//	key            bytes
//	valueLength    varint   -1 = null value (a tombstone)
//	value          bytes
//	headerCount    varint
//	headers        headerCount × { keyLength varint, key, valueLength varint (-1 = null), value }
//
// A null key or value is decoded as a nil slice, an empty one as a non-nil
// slice of length 0.
//
// # Control records
//
// A control batch (attrs bit 5, always transactional) holds one record
// whose key is {version int16 = 0, type int16: 0 abort, 1 commit} and whose
// value is {version int16 = 0, coordinatorEpoch int32}: the end-of-
// transaction marker a transaction coordinator writes (see Marker).
package record
