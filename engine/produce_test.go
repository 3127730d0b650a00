package engine_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
)

var kgoCodecs = map[string]kgo.CompressionCodec{
	"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
	"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
}

// TestProduceConsumeEveryCodec round-trips records through three partitions
// with each codec franz-go writes.
func TestProduceConsumeEveryCodec(t *testing.T) {
	tb := testbroker.Start(t)
	for name, codec := range kgoCodecs {
		t.Run(name, func(t *testing.T) {
			topic := "codec-" + name
			makeTopic(t, tb, topic, 3, nil)
			prod := tb.Client(t, kgo.ProducerBatchCompression(codec), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			const n = 300
			for i := 0; i < n; i++ {
				r := &kgo.Record{Topic: topic, Partition: int32(i % 3), Key: []byte(strconv.Itoa(i)), Value: bytes.Repeat([]byte{byte(i)}, i%50)}
				prod.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
					if err != nil {
						t.Errorf("produce: %v", err)
					}
				})
			}
			if err := prod.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			next := map[int32]int64{}
			for _, r := range consumeAll(t, tb, topic, n) {
				i, _ := strconv.Atoi(string(r.Key))
				if r.Partition != int32(i%3) || r.Offset != next[r.Partition] || !bytes.Equal(r.Value, bytes.Repeat([]byte{byte(i)}, i%50)) {
					t.Fatalf("record %d at %d/%d, want partition %d offset %d", i, r.Partition, r.Offset, i%3, next[r.Partition])
				}
				next[r.Partition]++
			}
		})
	}
}

// TestProducedBatchFetchedByteIdentical checks the zero-copy promise: what a
// fetch returns is the produced batch itself, with only the two fields the
// broker assigns (base offset and partition leader epoch) changed.
func TestProducedBatchFetchedByteIdentical(t *testing.T) {
	tb := testbroker.Start(t)
	topic := makeTopic(t, tb, "identical", 1, nil)
	rc := dialRaw(t, tb.Addr)
	var sent [][]byte
	for i, codec := range []int8{0, 1, 2, 3, 4} {
		batch := engine.BuildTestBatch(t, engine.TestBatchOpts{Codec: codec, FirstTimestamp: 1000 + int64(i), ProducerID: -1},
			engine.TestRecord{Key: []byte("k"), Value: bytes.Repeat([]byte("v"), 100*i)}, engine.TestRecord{Value: []byte("x")})
		sent = append(sent, bytes.Clone(batch))
		if p := produceRaw(rc, 12, -1, "identical", 0, batch); p.ErrorCode != 0 || p.BaseOffset != int64(2*i) {
			t.Fatalf("batch %d: error %d base offset %d", i, p.ErrorCode, p.BaseOffset)
		}
	}
	resp := do[*kmsg.FetchResponse](rc, fetchReq("identical", topic.ID, map[int32]int64{0: 0}), 16)
	got := resp.Topics[0].Partitions[0].RecordBatches
	var want []byte
	for i, b := range sent {
		binary.BigEndian.PutUint64(b[0:], uint64(2*i)) // base offset
		binary.BigEndian.PutUint32(b[12:], 0)          // partition leader epoch
		want = append(want, b...)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("fetched %d bytes differ from the %d produced", len(got), len(want))
	}
}

// TestProduceRecompressesForTopicCodec stores a gzip batch as zstd on a
// topic with compression.type=zstd, and keeps records and CRC valid.
func TestProduceRecompressesForTopicCodec(t *testing.T) {
	tb := testbroker.Start(t)
	topic := makeTopic(t, tb, "forced", 1, map[string]string{"compression.type": "zstd"})
	rc := dialRaw(t, tb.Addr)
	batch := engine.BuildTestBatch(t, engine.TestBatchOpts{Codec: 1, FirstTimestamp: 5, ProducerID: -1},
		engine.TestRecord{Key: []byte("a"), Value: bytes.Repeat([]byte("payload"), 50)})
	if p := produceRaw(rc, 12, 1, "forced", 0, batch); p.ErrorCode != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	resp := do[*kmsg.FetchResponse](rc, fetchReq("forced", topic.ID, map[int32]int64{0: 0}), 16)
	stored := resp.Topics[0].Partitions[0].RecordBatches
	var rb kmsg.RecordBatch
	if err := rb.ReadFrom(stored); err != nil {
		t.Fatal(err)
	}
	if rb.Attributes&7 != 4 {
		t.Fatalf("stored codec %d, want zstd", rb.Attributes&7)
	}
	if uint32(rb.CRC) != crc32.Checksum(stored[21:], crc32.MakeTable(crc32.Castagnoli)) {
		t.Fatal("stored batch has a bad CRC")
	}
	recs := consumeAll(t, tb, "forced", 1)
	if string(recs[0].Key) != "a" || !bytes.Equal(recs[0].Value, bytes.Repeat([]byte("payload"), 50)) {
		t.Fatalf("record changed: %q", recs[0].Key)
	}
}

func TestProduceErrors(t *testing.T) {
	tb := testbroker.Start(t)
	makeTopic(t, tb, "small", 1, map[string]string{"max.message.bytes": "500"})
	makeTopic(t, tb, "plain", 2, nil)
	makeTopic(t, tb, "compacted", 1, map[string]string{"cleanup.policy": "compact"})
	if tb.Broker.Topic("__consumer_offsets") == nil {
		makeTopic(t, tb, "__consumer_offsets", 1, nil)
	}
	rc := dialRaw(t, tb.Addr)
	one := engine.BuildTestBatch(t, engine.TestBatchOpts{ProducerID: -1}, engine.TestRecord{Key: []byte("k"), Value: []byte("v")})
	big := engine.BuildTestBatch(t, engine.TestBatchOpts{ProducerID: -1}, engine.TestRecord{Value: make([]byte, 600)})
	zstd := engine.BuildTestBatch(t, engine.TestBatchOpts{Codec: 4, ProducerID: -1}, engine.TestRecord{Value: []byte("z")})
	noKey := engine.BuildTestBatch(t, engine.TestBatchOpts{ProducerID: -1},
		engine.TestRecord{Key: []byte("k"), Value: []byte("1")}, engine.TestRecord{Value: []byte("2")})
	corrupt := bytes.Clone(one)
	corrupt[len(corrupt)-1] ^= 0xff
	for _, c := range []struct {
		name      string
		version   int16
		topic     string
		partition int32
		batch     []byte
		want      *kerr.Error
	}{
		{"unknown topic", 12, "nope", 0, one, kerr.UnknownTopicOrPartition},
		{"unknown partition", 12, "plain", 9, one, kerr.UnknownTopicOrPartition},
		{"too large", 12, "small", 0, big, kerr.MessageTooLarge},
		{"two batches", 12, "plain", 0, append(bytes.Clone(one), one...), kerr.InvalidRecord},
		{"no batch", 12, "plain", 0, nil, kerr.InvalidRecord},
		{"bad crc", 12, "plain", 0, corrupt, kerr.CorruptMessage},
		{"zstd before v7", 6, "plain", 0, zstd, kerr.UnsupportedCompressionType},
		{"internal topic", 12, "__consumer_offsets", 0, one, kerr.InvalidTopicException},
		{"magic 0/1 era", 2, "plain", 0, one, kerr.UnsupportedVersion},
		{"compacted without key", 12, "compacted", 0, noKey, kerr.InvalidRecord},
	} {
		p := produceRaw(rc, c.version, 1, c.topic, c.partition, bytes.Clone(c.batch))
		if p.ErrorCode != c.want.Code || p.BaseOffset != -1 {
			t.Errorf("%s: error %v offset %d, want %v", c.name, kerr.ErrorForCode(p.ErrorCode), p.BaseOffset, c.want)
		}
		if c.name == "compacted without key" && (len(p.ErrorRecords) != 1 || p.ErrorRecords[0].RelativeOffset != 1 || p.ErrorMessage == nil) {
			t.Errorf("record errors %+v", p.ErrorRecords)
		}
	}
}

func TestProduceAcks(t *testing.T) {
	tb := testbroker.Start(t)
	makeTopic(t, tb, "acks", 1, nil)
	rc := dialRaw(t, tb.Addr)
	batch := func() []byte {
		return engine.BuildTestBatch(t, engine.TestBatchOpts{ProducerID: -1}, engine.TestRecord{Value: []byte("v")})
	}
	if p := produceRaw(rc, 12, 2, "acks", 0, batch()); p.ErrorCode != kerr.InvalidRequiredAcks.Code {
		t.Fatalf("acks=2: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	// acks=0 gets no answer: the next answer on the connection is the
	// Metadata request's.
	req := kmsg.NewPtrProduceRequest()
	req.Acks = 0
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "acks", Partitions: []kmsg.ProduceRequestTopicPartition{{Records: batch()}}}}
	req.SetVersion(12)
	rc.send(req)
	meta := kmsg.NewPtrMetadataRequest()
	m := do[*kmsg.MetadataResponse](rc, meta, 12)
	if len(m.Brokers) != 1 {
		t.Fatalf("metadata after acks=0 produce: %+v", m)
	}
	if p := produceRaw(rc, 12, -1, "acks", 0, batch()); p.ErrorCode != 0 || p.BaseOffset != 1 {
		t.Fatalf("acks=-1 after an acks=0 produce: error %d offset %d", p.ErrorCode, p.BaseOffset)
	}
	// A failing acks=0 produce closes the connection, as in Kafka.
	req.Topics[0].Topic = "missing"
	rc.send(req)
	if _, err := rc.readFrame(); err == nil {
		t.Fatal("connection still open after a failed acks=0 produce")
	}
}

func TestProduceLogAppendTime(t *testing.T) {
	tb := testbroker.Start(t)
	makeTopic(t, tb, "lat", 1, map[string]string{"message.timestamp.type": "LogAppendTime"})
	rc := dialRaw(t, tb.Addr)
	before := time.Now().UnixMilli()
	p := produceRaw(rc, 12, 1, "lat", 0, engine.BuildTestBatch(t, engine.TestBatchOpts{FirstTimestamp: 1, ProducerID: -1}, engine.TestRecord{Value: []byte("v")}))
	if p.ErrorCode != 0 || p.LogAppendTime < before || p.LogAppendTime > time.Now().UnixMilli() || p.LogStartOffset != 0 {
		t.Fatalf("append time %d (sent at %d), log start %d, error %d", p.LogAppendTime, before, p.LogStartOffset, p.ErrorCode)
	}
	recs := consumeAll(t, tb, "lat", 1)
	if got := recs[0].Timestamp.UnixMilli(); got != p.LogAppendTime {
		t.Fatalf("consumed timestamp %d, want the append time %d", got, p.LogAppendTime)
	}
}

func TestProduceTransactionalRefused(t *testing.T) {
	tb := testbroker.Start(t)
	makeTopic(t, tb, "txn", 1, nil)
	rc := dialRaw(t, tb.Addr)
	b := engine.BuildTestBatch(t, engine.TestBatchOpts{ProducerID: 3, BaseSequence: 0}, engine.TestRecord{Value: []byte("v")})
	b[22] |= 0x10 // transactional attribute
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	if p := produceRaw(rc, 12, -1, "txn", 0, b); p.ErrorCode != kerr.TransactionalIDAuthorizationFailed.Code {
		t.Fatalf("transactional batch: %v", kerr.ErrorForCode(p.ErrorCode))
	}
}

func BenchmarkProduceRaw(b *testing.B) {
	tb := testbroker.Start(b)
	makeTopic(b, tb, "bench", 1, nil)
	rc := dialRaw(b, tb.Addr)
	batch := engine.BuildTestBatch(b, engine.TestBatchOpts{ProducerID: -1}, engine.TestRecord{Value: make([]byte, 1000)})
	b.SetBytes(int64(len(batch)))
	for b.Loop() {
		produceRaw(rc, 12, 1, "bench", 0, bytes.Clone(batch))
	}
}
