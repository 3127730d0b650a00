package storage

import "math"

// TimestampType is a topic's message.timestamp.type.
type TimestampType int8

const (
	CreateTime    TimestampType = 0 // producers' timestamps are kept
	LogAppendTime TimestampType = 1 // the broker stamps each batch on append
)

// Config holds the Kafka topic settings the log layer obeys. Zero values of
// SegmentBytes, SegmentMs, SegmentIndexBytes, MaxMessageBytes and FlushMessages
// mean "default", so a partly filled Config is safe.
type Config struct {
	SegmentBytes       int64         // segment.bytes, default 1 GiB
	SegmentMs          int64         // segment.ms, default 7 days
	SegmentIndexBytes  int32         // segment.index.bytes, default 10 MiB
	IndexIntervalBytes int32         // index.interval.bytes, default 4096
	RetentionMs        int64         // retention.ms, default 7 days, -1 = unlimited
	RetentionBytes     int64         // retention.bytes, default -1 = unlimited
	FlushMessages      int64         // flush.messages, default math.MaxInt64 (never by count)
	FlushMs            int64         // flush.ms, default math.MaxInt64
	MaxMessageBytes    int32         // max.message.bytes, default 1048588
	TimestampType      TimestampType // message.timestamp.type
	FileDeleteDelayMs  int64         // file.delete.delay.ms, default 60000
	Compact            bool          // cleanup.policy contains "compact": Compact cleans the log

	// Compaction settings; they matter only when Compact is set. Zero is
	// a literal value for each of them (Kafka allows 0), not "default".
	DeleteRetentionMs      int64   // delete.retention.ms, default 1 day: how long a cleaned tombstone stays
	MinCleanableDirtyRatio float64 // min.cleanable.dirty.ratio, default 0.5 (see CompactionDue)
	MinCompactionLagMs     int64   // min.compaction.lag.ms, default 0: younger segments are not cleaned
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:       1 << 30,
		SegmentMs:          7 * 24 * 3600 * 1000,
		SegmentIndexBytes:  10 << 20,
		IndexIntervalBytes: 4096,
		RetentionMs:        7 * 24 * 3600 * 1000,
		RetentionBytes:     -1,
		FlushMessages:      math.MaxInt64,
		FlushMs:            math.MaxInt64,
		MaxMessageBytes:    1048588,
		TimestampType:      CreateTime,
		FileDeleteDelayMs:  60000,

		DeleteRetentionMs:      24 * 3600 * 1000,
		MinCleanableDirtyRatio: 0.5,
	}
}

// normalized fills zero values that would make no sense with defaults.
func (c Config) normalized() Config {
	d := DefaultConfig()
	if c.SegmentBytes <= 0 {
		c.SegmentBytes = d.SegmentBytes
	}
	if c.SegmentMs <= 0 {
		c.SegmentMs = d.SegmentMs
	}
	if c.SegmentIndexBytes < timeEntrySize {
		c.SegmentIndexBytes = d.SegmentIndexBytes
	}
	if c.IndexIntervalBytes < 0 {
		c.IndexIntervalBytes = 0
	}
	if c.FlushMessages <= 0 {
		c.FlushMessages = d.FlushMessages
	}
	if c.FlushMs < 0 { // 0 is Kafka's "flush on every append"
		c.FlushMs = d.FlushMs
	}
	if c.MaxMessageBytes <= 0 {
		c.MaxMessageBytes = d.MaxMessageBytes
	}
	if c.FileDeleteDelayMs < 0 {
		c.FileDeleteDelayMs = 0
	}
	c.DeleteRetentionMs = max(c.DeleteRetentionMs, 0)
	c.MinCompactionLagMs = max(c.MinCompactionLagMs, 0)
	return c
}

// offsetIndexCap and timeIndexCap are the preallocated index sizes, rounded
// down to whole entries as Kafka does.
func (c Config) offsetIndexCap() int64 {
	return int64(c.SegmentIndexBytes) / offsetEntrySize * offsetEntrySize
}
func (c Config) timeIndexCap() int64 {
	return int64(c.SegmentIndexBytes) / timeEntrySize * timeEntrySize
}
