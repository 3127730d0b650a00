package engine_test

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluice-broker/sluice/internal/testbroker"
)

// A client over its producer_byte_rate is answered with throttle_time_ms,
// and one within it is not; the quotas round-trip through
// AlterClientQuotas / DescribeClientQuotas.
func TestQuotaThrottlesProducer(t *testing.T) {
	tb := testbroker.Start(t)
	adm := tb.Admin(t)
	ctx := adminCtx(t)
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, "q"); err != nil {
		t.Fatal(err)
	}
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: kadm.StringPtr("slow")}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "user"}}, // the default user
			Ops: []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 1 << 30}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: kadm.StringPtr("bad")}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1.5}}},
	})
	if err != nil || len(res) != 3 || res[0].Err != nil || res[1].Err != nil || res[2].Err == nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	described, err := adm.DescribeClientQuotas(ctx, false, nil)
	if err != nil || len(described) != 2 {
		t.Fatalf("describe: %v %+v", err, described)
	}

	throttle := func(clientID string) int32 {
		cl := tb.Client(t, kgo.ClientID(clientID))
		var last int32
		for i := 0; i < 5; i++ {
			req := kmsg.NewPtrProduceRequest()
			req.Acks, req.TimeoutMillis = 1, 5000
			pt := kmsg.NewProduceRequestTopic()
			pt.Topic = "q"
			pp := kmsg.NewProduceRequestTopicPartition()
			pp.Records = oneBigBatch(t, 8<<10)
			pt.Partitions = append(pt.Partitions, pp)
			req.Topics = append(req.Topics, pt)
			resp := request[*kmsg.ProduceResponse](t, cl, req)
			if ec := resp.Topics[0].Partitions[0].ErrorCode; ec != 0 {
				t.Fatalf("produce: %d", ec)
			}
			if last = resp.ThrottleMillis; last > 0 {
				break // the connection is muted for that long now
			}
		}
		return last
	}
	if ms := throttle("slow"); ms <= 0 {
		t.Fatalf("40 KiB at 1 KiB/s: throttle %d ms", ms)
	} else {
		t.Logf("slow producer throttled %d ms", ms)
	}
	if ms := throttle("fast"); ms != 0 {
		t.Fatalf("unquota'd client throttled %d ms", ms)
	}
}

func oneBigBatch(t *testing.T, n int) []byte {
	return engineBatch(t, make([]byte, n))
}

// Regression: with no quota matching, the entries were encoded as null,
// which Java's admin client reads as a failed request (kafka-configs
// --alter of a user's quota describes the user's quotas first and died
// with a NullPointerException).
func TestDescribeClientQuotasNoMatchIsEmptyNotNull(t *testing.T) {
	tb := testbroker.Start(t)
	cl := tb.Client(t)
	for _, v := range []int16{0, 1} {
		req := kmsg.NewPtrDescribeClientQuotasRequest()
		req.Version = v
		c := kmsg.NewDescribeClientQuotasRequestComponent()
		c.EntityType, c.MatchType, c.Match = "user", 0, kmsg.StringPtr("nobody")
		req.Components = append(req.Components, c)
		resp := request[*kmsg.DescribeClientQuotasResponse](t, cl, req)
		if resp.ErrorCode != 0 || resp.Entries == nil {
			t.Fatalf("v%d: code %d, entries %v (nil means null)", v, resp.ErrorCode, resp.Entries)
		}
	}
}

// A consumer over its consumer_byte_rate gets throttle_time_ms in the
// Fetch answer, which the broker encodes itself (the throttle is written
// into the encoded frame), at a flexible and a non-flexible version.
func TestQuotaThrottlesConsumer(t *testing.T) {
	tb := testbroker.Start(t)
	adm := tb.Admin(t)
	ctx := adminCtx(t)
	if _, err := adm.CreateTopics(ctx, 1, 1, nil, "cq"); err != nil {
		t.Fatal(err)
	}
	prod := tb.Client(t, kgo.DefaultProduceTopic("cq"))
	for i := 0; i < 4; i++ {
		if err := prod.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 16<<10)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: kadm.StringPtr("reader")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "consumer_byte_rate", Value: 1024}}}}); err != nil {
		t.Fatal(err)
	}
	for _, v := range []int16{11, 12, 16} {
		rc := dialRaw(t, tb.Addr)
		rc.fmt = kmsg.NewRequestFormatter(kmsg.FormatterClientID("reader"))
		var ms int32
		for i := 0; i < 4 && ms == 0; i++ {
			req := kmsg.NewPtrFetchRequest()
			req.ReplicaID, req.MaxBytes = -1, 1<<20
			ft := kmsg.NewFetchRequestTopic()
			ft.Topic, ft.TopicID = "cq", tb.Broker.Topic("cq").ID
			fp := kmsg.NewFetchRequestTopicPartition()
			fp.PartitionMaxBytes = 1 << 20
			ft.Partitions = append(ft.Partitions, fp)
			req.Topics = append(req.Topics, ft)
			resp := do[*kmsg.FetchResponse](rc, req, v)
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions[0].RecordBatches) == 0 {
				t.Fatalf("v%d: fetch read nothing: %+v", v, resp)
			}
			ms = resp.ThrottleMillis
		}
		if ms <= 0 {
			t.Fatalf("v%d: 4 × 64 KiB at 1 KiB/s and no throttle", v)
		}
		t.Logf("fetch v%d throttled %d ms", v, ms)
	}
}

// request_percentage counts handler time: a client with a tiny share of
// a thread is throttled after a burst of Metadata requests (of named
// topics: an answer of every topic comes from the broker's cache, whose
// shared bytes carry no throttle; the connection is muted all the same).
func TestQuotaThrottlesRequestTime(t *testing.T) {
	tb := testbroker.Start(t)
	if _, err := tb.Admin(t).AlterClientQuotas(adminCtx(t), []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: kadm.StringPtr("busy")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "request_percentage", Value: 0.001}}}}); err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, tb.Addr)
	rc.fmt = kmsg.NewRequestFormatter(kmsg.FormatterClientID("busy"))
	req := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(offsetsTopicName)
	req.Topics = append(req.Topics, mt)
	for i := 0; i < 1000; i++ {
		if resp := do[*kmsg.MetadataResponse](rc, req, 12); resp.ThrottleMillis > 0 {
			t.Logf("throttled %d ms after %d requests", resp.ThrottleMillis, i+1)
			return
		}
	}
	t.Fatal("1000 Metadata requests at request_percentage=0.001 and no throttle")
}

// TestControllerMutationRateStrictRefusesTopicsOverQuota: with
// controller_mutation_rate=1 (partition per second, over an 11 s window)
// a CreateTopics v7 of two topics of 20 partitions creates the first,
// which takes the rate over the quota, and answers the second
// THROTTLING_QUOTA_EXCEEDED with a throttle time, creating nothing; so do
// CreatePartitions v3 and DeleteTopics v6 once over. A CreateTopics v5
// client (before KIP-599's strict versions) gets its topics created and
// is only throttled.
func TestControllerMutationRateStrictRefusesTopicsOverQuota(t *testing.T) {
	tb := testbroker.Start(t)
	ctx := adminCtx(t)
	res, err := tb.Admin(t).AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: kadm.StringPtr("strict")}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "controller_mutation_rate", Value: 1}}},
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: kadm.StringPtr("old")}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "controller_mutation_rate", Value: 1}}},
	})
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	create := func(cl *kgo.Client, version int16, names ...string) *kmsg.CreateTopicsResponse {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.SetVersion(version)
		req.TimeoutMillis = 5000
		for _, n := range names {
			rt := kmsg.NewCreateTopicsRequestTopic()
			rt.Topic, rt.NumPartitions, rt.ReplicationFactor = n, 20, 1
			req.Topics = append(req.Topics, rt)
		}
		return request[*kmsg.CreateTopicsResponse](t, cl, req)
	}
	// A client per request: a throttled connection is muted, and the
	// quota is the client id's whatever the connection.
	strict := func() *kgo.Client { return tb.Client(t, kgo.ClientID("strict")) }
	resp := create(strict(), 7, "m1", "m2")
	if resp.Topics[0].ErrorCode != 0 || resp.Topics[1].ErrorCode != kerr.ThrottlingQuotaExceeded.Code || resp.ThrottleMillis <= 0 {
		t.Fatalf("CreateTopics v7: %+v throttle %d, want m1 created and m2 THROTTLING_QUOTA_EXCEEDED", resp.Topics, resp.ThrottleMillis)
	}
	t.Logf("strict client throttled %d ms", resp.ThrottleMillis)
	if tb.Broker.Topic("m2") != nil {
		t.Fatal("m2 was created over the quota")
	}
	cp := kmsg.NewPtrCreatePartitionsRequest()
	cp.SetVersion(3)
	cp.TimeoutMillis = 5000
	cp.Topics = append(cp.Topics, kmsg.CreatePartitionsRequestTopic{Topic: "m1", Count: 30})
	if r := request[*kmsg.CreatePartitionsResponse](t, strict(), cp); r.Topics[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code {
		t.Fatalf("CreatePartitions v3 over the quota: %+v", r.Topics)
	}
	del := kmsg.NewPtrDeleteTopicsRequest()
	del.SetVersion(6)
	del.TimeoutMillis = 5000
	del.Topics = append(del.Topics, kmsg.DeleteTopicsRequestTopic{Topic: kmsg.StringPtr("m1")})
	if r := request[*kmsg.DeleteTopicsResponse](t, strict(), del); r.Topics[0].ErrorCode != kerr.ThrottlingQuotaExceeded.Code {
		t.Fatalf("DeleteTopics v6 over the quota: %+v", r.Topics)
	}
	if tb.Broker.Topic("m1") == nil || len(tb.Broker.Topic("m1").Partitions()) != 20 {
		t.Fatal("m1 changed over the quota")
	}

	old := create(tb.Client(t, kgo.ClientID("old"), kgo.MaxVersions(kversion.V2_6_0())), 5, "o1", "o2") // CreateTopics v5
	if old.Topics[0].ErrorCode != 0 || old.Topics[1].ErrorCode != 0 || old.ThrottleMillis <= 0 {
		t.Fatalf("CreateTopics v%d: %d, %d, throttle %d, want both created and a throttle", old.Version, old.Topics[0].ErrorCode, old.Topics[1].ErrorCode, old.ThrottleMillis)
	}
}

// TestQuotaMutesAcksZeroProducer: an acks=0 producer over its
// producer_byte_rate gets no response to carry a throttle time, so its
// connection is muted, as Kafka mutes the channel: a Metadata request
// sent on it after the produces is answered only after one sent later on
// another connection. The records are appended all the same.
func TestQuotaMutesAcksZeroProducer(t *testing.T) {
	tb := testbroker.Start(t)
	ctx := adminCtx(t)
	if _, err := tb.Admin(t).CreateTopics(ctx, 1, 1, nil, "z"); err != nil {
		t.Fatal(err)
	}
	res, err := tb.Admin(t).AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: kadm.ClientQuotaEntity{{Type: "client-id", Name: kadm.StringPtr("zero")}},
			Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 1024}}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("alter: %v %+v", err, res)
	}
	conn, err := net.Dial("tcp", tb.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	f := kmsg.NewRequestFormatter(kmsg.FormatterClientID("zero"))
	var out []byte
	for i := range 2 { // 16 KiB: the second takes the rate over 1 KiB/s
		req := kmsg.NewPtrProduceRequest()
		req.SetVersion(9)
		req.Acks, req.TimeoutMillis = 0, 5000
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic = "z"
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Records = oneBigBatch(t, 8<<10)
		pt.Partitions = append(pt.Partitions, pp)
		req.Topics = append(req.Topics, pt)
		out = append(out, f.AppendRequest(nil, req, int32(i+1))...) // AppendRequest sizes the whole of dst
	}
	meta := kmsg.NewPtrMetadataRequest()
	meta.SetVersion(12)
	out = append(out, f.AppendRequest(nil, meta, 99)...)
	sent := time.Now()
	if _, err := conn.Write(out); err != nil {
		t.Fatal(err)
	}
	answered := make(chan time.Time, 1)
	go func() {
		conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		var hdr [8]byte
		if _, err := io.ReadFull(conn, hdr[:]); err == nil && binary.BigEndian.Uint32(hdr[4:]) == 99 {
			answered <- time.Now()
		}
		close(answered)
	}()
	// Once the produces are in, another connection is answered at once.
	waitFor(t, "the acks=0 records appended", func() bool {
		return tb.Broker.Topic("z").Partition(0).HighWatermark() >= 2
	})
	other := tb.Client(t, kgo.ClientID("other"))
	if _, err := kadm.NewClient(other).BrokerMetadata(ctx); err != nil {
		t.Fatal(err)
	}
	otherDone := time.Now()
	at, ok := <-answered
	if !ok {
		t.Fatal("the muted connection's Metadata was never answered")
	}
	if !at.After(otherDone) {
		t.Fatalf("the acks=0 producer's next request was answered %v after its produces, before a later one elsewhere: not muted", at.Sub(sent))
	}
	t.Logf("acks=0 producer muted: its Metadata answered %v after sending", at.Sub(sent))
}
