package engine

// Produce (key 0), versions 0-12 advertised, 3-12 served.
//
// Kafka 4 removed Produce v0-v2 (magic 0/1 message sets) but still
// advertises v0, because librdkafka only enables compression when the
// broker's Produce range starts at 0 (KAFKA-18659); clients pick the highest
// common version, so no current client sends v0-v2. Kafka closes the
// connection on such a request; Sluice answers UNSUPPORTED_VERSION on every
// partition instead, so an ancient client reports the cause rather than
// reconnecting forever.
//
// Per partition, in Kafka's order: unknown topic or partition
// (UNKNOWN_TOPIC_OR_PARTITION; creating topics is Metadata's business); the
// record set must be exactly one RecordBatch v2 (INVALID_RECORD), zstd needs
// v7+ (UNSUPPORTED_COMPRESSION_TYPE); the internal __consumer_offsets is not
// writable by clients (INVALID_TOPIC_EXCEPTION, as Kafka's "Cannot append to
// internal topic"); the batch must fit max.message.bytes
// (MESSAGE_TOO_LARGE); on a compacted topic every record needs a key
// (INVALID_RECORD with per-record errors, v8+). A topic whose
// compression.type names a codec gets the batch re-encoded with it
// (compression.go); "producer" stores it byte for byte. Storage then checks
// CRC, sequence numbers of idempotent producers and timestamps; its errors
// map through ErrorCode. An idempotent retry of a batch already in the log
// answers with the original offsets and no error.
//
// acks: 0, 1 and -1 are valid (INVALID_REQUIRED_ACKS otherwise). 0 and 1
// are answered once the batches are in the local log; -1 (all) once each
// partition's high watermark passes its batch (produce_wait.go), or with
// REQUEST_TIMED_OUT for those it has not passed after TimeoutMillis. With
// one replica the watermark moves as the batch is appended, so -1 is
// answered at once too. acks=0 gets no response, and as in Kafka a failed
// acks=0 request closes the connection so the producer notices and
// refreshes its metadata. A partition this broker does not lead answers
// NOT_LEADER_OR_FOLLOWER (the Partition refuses the append).
//
// Appends: a request served on a network event loop leaves its checked
// record sets in the loop's ProduceBatch, which appends each partition's
// sets from every request of the loop iteration with one Log.Append and
// answers them together (produce_batch.go); elsewhere each partition is
// appended at once. Decoding allocates nothing (request_hot.go), nor does
// the common path here (produceScratch is pooled).
//
// Transactional batches need the request's transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every partition without one,
// as Kafka answers), and each partition must be in the producer's open
// transaction (KIP-890; txn_verify.go).

import (
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/record"
	"github.com/sluice-broker/sluice/storage"
)

func init() { register(kmsg.Produce, 0, 12, (*Broker).handleProduce) }

// produceScratch is a produce request's working memory, pooled so that the
// common path (no recompression, no errors) allocates nothing of its own.
type produceScratch struct {
	r       *Request
	resp    kmsg.ProduceResponse
	acks    int16
	pending *producePending       // nil unless an acks=all answer waits for high watermarks
	entries []storage.AppendEntry // one entry: Kafka allows one batch per partition
	batch   []byte                // a re-encoded batch
	raw     []byte                // decompressed records
	// deferred counts the partitions handed to a ProduceBatch and not yet
	// appended; the request is answered when it is back to 0.
	deferred int
}

var produceScratches = sync.Pool{New: func() any {
	return &produceScratch{entries: make([]storage.AppendEntry, 1)}
}}

// maxPooledScratch keeps a rare huge batch from pinning memory in the pool.
const maxPooledScratch = 4 << 20

func (s *produceScratch) release() {
	s.entries[0] = storage.AppendEntry{}
	s.r, s.pending, s.deferred = nil, nil, 0
	if cap(s.batch) > maxPooledScratch {
		s.batch = nil
	}
	if cap(s.raw) > maxPooledScratch {
		s.raw = nil
	}
	produceScratches.Put(s)
}

func (b *Broker) handleProduce(r *Request) {
	req := r.Msg.(*kmsg.ProduceRequest)
	s := produceScratches.Get().(*produceScratch)
	s.r, s.acks = r, req.Acks
	resp := s.shapeResponse(req)
	reqErr := produceRequestError(r.Version, req)
	batch := r.produceBatch()
	for i := range req.Topics {
		rt, out := &req.Topics[i], &resp.Topics[i]
		var t *Topic
		if reqErr == nil {
			t = b.Topic(rt.Topic)
		}
		for j := range rt.Partitions {
			if reqErr != nil {
				out.Partitions[j].ErrorCode = reqErr.Code
				continue
			}
			b.producePartition(s, t, &rt.Partitions[j], &out.Partitions[j], batch)
		}
	}
	if s.deferred > 0 {
		batch.wait(s) // answered when the batch is flushed
		return
	}
	s.complete(req.TimeoutMillis)
}

// complete answers the request once every partition is appended (or
// failed), or hands it to the acks=all wait.
func (s *produceScratch) complete(timeoutMs int32) {
	r := s.r
	switch {
	case s.pending != nil:
		s.pending.appended(timeoutMs) // s belongs to the pending answer now
		return
	case s.acks != 0:
		r.Respond(&s.resp)
	case s.failed():
		r.closeConn()
	default:
		r.NoResponse()
	}
	s.release()
}

func (s *produceScratch) failed() bool {
	for i := range s.resp.Topics {
		for _, p := range s.resp.Topics[i].Partitions {
			if p.ErrorCode != 0 {
				return true
			}
		}
	}
	return false
}

// produceRequestError is an error that fails every partition of req.
func produceRequestError(version int16, req *kmsg.ProduceRequest) *kerr.Error {
	switch {
	case version < 3:
		return kerr.UnsupportedVersion
	case req.TransactionID == nil && hasTransactionalBatch(req):
		return kerr.TransactionalIDAuthorizationFailed
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		return kerr.InvalidRequiredAcks
	}
	return nil
}

// hasTransactionalBatch reads only the attributes of each batch: the header
// is parsed once, by checkProduceBatch, when the partition's turn comes.
func hasTransactionalBatch(req *kmsg.ProduceRequest) bool {
	for i := range req.Topics {
		for _, p := range req.Topics[i].Partitions {
			if len(p.Records) >= record.HeaderLen && record.Attributes(p.Records)&record.AttrTransactional != 0 {
				return true
			}
		}
	}
	return false
}

// shapeResponse sizes the pooled response like req, every partition
// defaulted to "failed, no offsets" as Kafka answers errors.
func (s *produceScratch) shapeResponse(req *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	resp := &s.resp
	resp.Version, resp.ThrottleMillis, resp.Brokers = req.Version, 0, nil
	resp.Topics = resize(resp.Topics, len(req.Topics))
	for i := range req.Topics {
		rt, t := &req.Topics[i], &resp.Topics[i]
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		t.Partitions = resize(t.Partitions, len(rt.Partitions))
		for j := range rt.Partitions {
			p := &t.Partitions[j]
			*p = kmsg.NewProduceResponseTopicPartition()
			p.Partition, p.BaseOffset, p.LogAppendTime, p.LogStartOffset = rt.Partitions[j].Partition, -1, -1, -1
		}
	}
	return resp
}

// resize returns s with length n, reusing its backing array when it fits.
func resize[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return make([]T, n)
}

// producePartition checks one partition's record set and appends it: at
// once, or with the other requests of the batch when there is one.
func (b *Broker) producePartition(s *produceScratch, t *Topic, rp *kmsg.ProduceRequestTopicPartition, out *kmsg.ProduceResponseTopicPartition, batch *ProduceBatch) {
	var p *Partition
	if t != nil {
		p = t.Partition(rp.Partition)
	}
	if p == nil {
		out.ErrorCode = kerr.UnknownTopicOrPartition.Code
		if t != nil {
			b.notLeaderHint(&s.resp, s.r.Version, t.ID, rp.Partition, out) // hosted elsewhere
		}
		return
	}
	records, h, err := s.prepare(s.r.Version, t, rp.Records)
	if err == nil && h.IsTransactional() {
		err = b.verifyTxnProduce(s.r, p, &h) // KIP-890 (txn_verify.go)
	}
	if err != nil {
		produceFailed(s.r, out, err)
		return
	}
	e := storage.AppendEntry{Records: records, Header: h, HasHeader: true, TxnV2: h.IsTransactional() && b.txnV2Produce(s.r)}
	// A batch re-encoded into s.batch is appended now: the next
	// partition's re-encoding reuses that buffer.
	if batch != nil && len(records) > 0 && &records[0] == &rp.Records[0] {
		batch.add(s, t, p, out, e)
		return
	}
	s.entries[0] = e
	_ = p.append(s.entries, s.acks, time.Now().UnixMilli())
	s.appended(t, p, out, &s.entries[0])
}

// appended fills in a partition's answer from its append.
func (s *produceScratch) appended(t *Topic, p *Partition, out *kmsg.ProduceResponseTopicPartition, e *storage.AppendEntry) {
	if e.Err != nil {
		produceFailed(s.r, out, e.Err)
		if out.ErrorCode == kerr.NotLeaderForPartition.Code {
			s.r.broker.notLeaderHint(&s.resp, s.r.Version, t.ID, out.Partition, out)
		}
		return
	}
	out.BaseOffset, out.LogAppendTime, out.LogStartOffset = e.Result.FirstOffset, e.Result.LogAppendTime, e.Result.LogStartOffset
	if !e.Result.Duplicate {
		s.r.broker.metrics.produced(t.Name, len(e.Records), int(e.Header.NumRecords))
	}
	if s.acks == -1 {
		s.awaitCommit(s.r, p, out, e.Result.LastOffset+1)
	}
}

// produceError is a validation failure found by the engine, with the
// records at fault when the error is about single records.
type produceError struct {
	code    *kerr.Error
	msg     string
	records []int32 // relative offsets within the batch
}

func (e *produceError) Error() string { return e.msg }

func produceErr(code *kerr.Error, format string, args ...any) error {
	return &produceError{code: code, msg: fmt.Sprintf(format, args...)}
}

func produceFailed(r *Request, out *kmsg.ProduceResponseTopicPartition, err error) {
	pe, ok := err.(*produceError)
	if ok {
		out.ErrorCode = pe.code.Code
	} else {
		out.ErrorCode = ErrorCode(err)
	}
	if r.Version < 8 {
		return
	}
	msg := err.Error()
	out.ErrorMessage = &msg
	if ok {
		for _, rel := range pe.records {
			m := pe.msg
			out.ErrorRecords = append(out.ErrorRecords, kmsg.ProduceResponseTopicPartitionErrorRecord{RelativeOffset: rel, ErrorMessage: &m})
		}
	}
}

// prepare checks one partition's record set before it reaches storage and
// applies the topic's compression.type. It returns the bytes to append and
// their header, parsed once here and handed on to storage.
func (s *produceScratch) prepare(version int16, t *Topic, records []byte) ([]byte, record.Header, error) {
	h, err := checkProduceBatch(version, t, records)
	if err != nil {
		return nil, h, err
	}
	settings := t.Settings()
	codec := topicCodec(settings.CompressionType)
	convert := codec != codecProducer && codec != h.Compression()
	if !convert && !settings.Log.Compact {
		return records, h, nil
	}
	raw, err := record.Records(s.raw, records, h, record.DefaultDecompressLimit)
	if err != nil {
		return nil, h, produceErr(kerr.CorruptMessage, "cannot decompress record batch: %v", err)
	}
	if h.Compression() != record.None {
		s.raw = raw
	}
	if settings.Log.Compact {
		if err := checkKeys(t, raw); err != nil {
			return nil, h, err
		}
	}
	if !convert {
		return records, h, nil
	}
	if s.batch, err = record.Rebuild(s.batch[:0], &h, raw, codec); err != nil {
		return nil, h, produceErr(kerr.UnknownServerError, "cannot compress record batch: %v", err)
	}
	return s.batch, h, nil
}

// checkProduceBatch applies the checks Kafka makes before the log sees a
// record set.
func checkProduceBatch(version int16, t *Topic, records []byte) (record.Header, error) {
	h, err := record.ParseHeader(records)
	switch {
	case len(records) == 0:
		return h, produceErr(kerr.InvalidRecord, "produce requests must carry one record batch per partition")
	case err != nil:
		return h, produceErr(kerr.CorruptMessage, "record batch truncated")
	case h.Magic != 2:
		return h, produceErr(kerr.InvalidRecord, "produce v%d accepts only record batches with magic 2, got %d", version, h.Magic)
	case h.Size() < int64(len(records)):
		return h, produceErr(kerr.InvalidRecord, "produce requests must carry exactly one record batch per partition")
	case h.Compression() == record.Zstd && version < 7:
		return h, produceErr(kerr.UnsupportedCompressionType, "zstd batches need produce v7 or later")
	case t.Internal:
		return h, produceErr(kerr.InvalidTopicException, "cannot append to internal topic %s", t.Name)
	case int64(len(records)) > int64(t.Settings().MaxMessageBytes):
		return h, produceErr(kerr.MessageTooLarge, "record batch of %d bytes exceeds max.message.bytes %d", len(records), t.Settings().MaxMessageBytes)
	}
	return h, nil
}

// checkKeys rejects records without a key on a compacted topic, naming
// each one, as Kafka does.
func checkKeys(t *Topic, raw []byte) error {
	var bad []int32
	it := record.NewIter(raw)
	for i := int32(0); it.Next(); i++ {
		if it.Record().Key == nil {
			bad = append(bad, i)
		}
	}
	if err := it.Err(); err != nil {
		return produceErr(kerr.CorruptMessage, "%v", err)
	}
	if len(bad) == 0 {
		return nil
	}
	return &produceError{code: kerr.InvalidRecord, records: bad,
		msg: fmt.Sprintf("compacted topic %s cannot accept records without a key (%d in this batch)", t.Name, len(bad))}
}
