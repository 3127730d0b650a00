package engine

// The Fetch response body, encoded by hand so that each partition's records
// are a file region spliced into the frame rather than bytes copied through
// memory. Layout (Kafka's FetchResponse schema; v = version, flexible v12+
// use compact lengths and tagged fields):
//
//	ThrottleMillis int32
//	ErrorCode int16, SessionID int32                      v7+
//	Topics [
//	  Topic string (v4-v12) | TopicID uuid (v13+)
//	  Partitions [
//	    Partition int32, ErrorCode int16, HighWatermark int64
//	    LastStableOffset int64, LogStartOffset int64 (v5+)
//	    AbortedTransactions nullable [ProducerID int64, FirstOffset int64]
//	    PreferredReadReplica int32                        v11+ (KIP-392)
//	    Records nullable bytes   <- length prefix here, then the file region
//	    tags: 0 DivergingEpoch, 1 CurrentLeader           v12+
//	  ]
//	  tags                                                v12+
//	]
//	tags: 0 NodeEndpoints                                 v16+
//
// Nothing here allocates: bytes go into the pooled response buffer.

import (
	"encoding/binary"

	"github.com/sluice-broker/sluice/storage"
)

// encode writes f's response body into w, whose header is written.
func (f *fetch) encode(w *frameWriter) {
	b := &w.r.buf
	*b = binary.BigEndian.AppendUint32(*b, 0) // throttle
	if f.version >= 7 {
		*b = binary.BigEndian.AppendUint16(*b, uint16(f.errCode))
		*b = binary.BigEndian.AppendUint32(*b, uint32(f.sessionID))
	}
	flex := f.version >= 12
	if f.errCode != 0 {
		*b = appendArrayLen(*b, 0, flex)
	} else {
		f.encodeTopics(w)
	}
	if flex {
		f.encodeResponseTags(b)
	}
}

func (f *fetch) encodeTopics(w *frameWriter) {
	b := &w.r.buf
	flex := f.version >= 12
	*b = appendArrayLen(*b, f.countTopics(), flex)
	for i := f.nextIncluded(0); i < len(f.parts); {
		n, end := f.topicRun(i)
		fp := &f.parts[i]
		if f.version >= 13 {
			*b = append(*b, fp.topicID[:]...)
		} else {
			*b = appendString(*b, fp.topicName, flex)
		}
		*b = appendArrayLen(*b, n, flex)
		for j := i; j < end; j = f.nextIncluded(j + 1) {
			f.encodePartition(w, &f.parts[j])
		}
		if flex {
			*b = append(*b, 0) // topic tags
		}
		i = end
	}
}

// nextIncluded returns the first part at or after i that is in the
// response (incremental fetches leave unchanged partitions out).
func (f *fetch) nextIncluded(i int) int {
	for i < len(f.parts) && f.parts[i].omit {
		i++
	}
	return i
}

// sameTopic reports whether two parts belong to one topic entry of the
// response: consecutive parts of a topic share one, as in Kafka.
func (f *fetch) sameTopic(a, b *fetchPart) bool {
	if f.version >= 13 {
		return a.topicID == b.topicID
	}
	return a.topicName == b.topicName
}

// topicRun returns how many included parts from i (included) share its
// topic entry, and where the next entry starts.
func (f *fetch) topicRun(i int) (n, end int) {
	first := &f.parts[i]
	j := i
	for j < len(f.parts) && f.sameTopic(first, &f.parts[j]) {
		n++
		j = f.nextIncluded(j + 1)
	}
	return n, j
}

func (f *fetch) countTopics() int {
	n := 0
	for i := f.nextIncluded(0); i < len(f.parts); {
		_, i = f.topicRun(i)
		n++
	}
	return n
}

func (f *fetch) encodePartition(w *frameWriter, fp *fetchPart) {
	b := &w.r.buf
	flex := f.version >= 12
	*b = binary.BigEndian.AppendUint32(*b, uint32(fp.partition))
	*b = binary.BigEndian.AppendUint16(*b, uint16(fp.err))
	*b = binary.BigEndian.AppendUint64(*b, uint64(fp.hw))
	*b = binary.BigEndian.AppendUint64(*b, uint64(fp.lso))
	if f.version >= 5 {
		*b = binary.BigEndian.AppendUint64(*b, uint64(fp.logStart))
	}
	// Aborted transactions: read_committed readers get a list (maybe
	// empty) where others get null, as from Kafka.
	if f.isolation == fetchTxnCommitted && fp.err == 0 {
		f.encodeAborted(b, f.aborted[fp.abortedFrom:fp.abortedTo], flex)
	} else {
		*b = appendNullArray(*b, flex)
	}
	if f.version >= 11 {
		*b = binary.BigEndian.AppendUint32(*b, uint32(fp.preferred)) // -1: read here
	}
	if flex {
		*b = binary.AppendUvarint(*b, uint64(fp.records.Len)+1)
	} else {
		*b = binary.BigEndian.AppendUint32(*b, uint32(fp.records.Len))
	}
	w.region(fp.records)
	if flex {
		f.encodePartitionTags(b, fp)
	}
}

// encodeAborted writes the aborted transactions array: [ProducerID int64,
// FirstOffset int64, tags (v12+)].
func (f *fetch) encodeAborted(b *[]byte, aborted []storage.AbortedTxn, flex bool) {
	*b = appendArrayLen(*b, len(aborted), flex)
	for _, a := range aborted {
		*b = binary.BigEndian.AppendUint64(*b, uint64(a.ProducerID))
		*b = binary.BigEndian.AppendUint64(*b, uint64(a.FirstOffset))
		if flex {
			*b = append(*b, 0)
		}
	}
}

// Sizes of the tagged structs, each ending in an empty tag section.
const (
	divergingEpochSize = 4 + 8 + 1
	currentLeaderSize  = 4 + 4 + 1
)

func (f *fetch) encodePartitionTags(b *[]byte, fp *fetchPart) {
	diverging, leader := fp.divergingEpoch >= 0, fp.leaderEpoch >= 0
	*b = append(*b, byte(btoi(diverging)+btoi(leader)))
	if diverging {
		*b = append(*b, 0, divergingEpochSize)
		*b = binary.BigEndian.AppendUint32(*b, uint32(fp.divergingEpoch))
		*b = binary.BigEndian.AppendUint64(*b, uint64(fp.divergingEnd))
		*b = append(*b, 0)
	}
	if leader {
		*b = append(*b, 1, currentLeaderSize)
		*b = binary.BigEndian.AppendUint32(*b, uint32(f.b.cfg.NodeID))
		*b = binary.BigEndian.AppendUint32(*b, uint32(fp.leaderEpoch))
		*b = append(*b, 0)
	}
}

// encodeResponseTags writes NodeEndpoints (v16+, KIP-951) when some
// partition names its current leader, so the client can reach it without a
// metadata round trip; the leader is always this broker.
func (f *fetch) encodeResponseTags(b *[]byte) {
	named := false
	for i := 0; i < len(f.parts) && f.errCode == 0; i++ {
		named = named || (f.parts[i].leaderEpoch >= 0 && !f.parts[i].omit)
	}
	if !named || f.version < 16 {
		*b = append(*b, 0)
		return
	}
	host := f.b.host
	// NodeEndpoints: [NodeID int32, Host compact string, Port int32, Rack
	// compact nullable string, tags].
	size := 1 + 4 + uvarintLen(uint64(len(host))+1) + len(host) + 4 + 1 + 1
	*b = append(*b, 1, 0) // one tag: tag 0
	*b = binary.AppendUvarint(*b, uint64(size))
	*b = append(*b, 2) // compact array of one
	*b = binary.BigEndian.AppendUint32(*b, uint32(f.b.cfg.NodeID))
	*b = appendString(*b, host, true)
	*b = binary.BigEndian.AppendUint32(*b, uint32(f.b.port))
	*b = append(*b, 0, 0) // rack null, no tags
}

func btoi(v bool) int {
	if v {
		return 1
	}
	return 0
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

func appendArrayLen(b []byte, n int, flex bool) []byte {
	if flex {
		return binary.AppendUvarint(b, uint64(n)+1)
	}
	return binary.BigEndian.AppendUint32(b, uint32(n))
}

func appendNullArray(b []byte, flex bool) []byte {
	if flex {
		return append(b, 0)
	}
	return binary.BigEndian.AppendUint32(b, ^uint32(0))
}

func appendString(b []byte, s string, flex bool) []byte {
	if flex {
		b = binary.AppendUvarint(b, uint64(len(s))+1)
	} else {
		b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	}
	return append(b, s...)
}
