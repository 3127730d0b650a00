package engine_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
)

// adminCtx bounds one test's admin calls.
func adminCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// adminRaw sends req at exactly its set version on a fresh connection and
// decodes the answer, bypassing the client's version negotiation, so old
// (non-flexible) encodings are exercised as old clients send them.
func adminRaw(t *testing.T, addr string, req kmsg.Request) kmsg.Response {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	const correlation = 7
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID("raw-test")).AppendRequest(nil, req, correlation)
	if _, err := conn.Write(frame); err != nil {
		t.Fatal(err)
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		t.Fatalf("%s v%d: reading response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(conn, body); err != nil {
		t.Fatal(err)
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != correlation {
		t.Fatalf("correlation id %d, want %d", got, correlation)
	}
	body = body[4:]
	resp := req.ResponseKind()
	if resp.IsFlexible() {
		body = body[1:] // response header v1: no tagged fields
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("%s v%d: decoding response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

// metadataAt issues a raw Metadata request naming topics (nil = null list).
func metadataAt(t *testing.T, addr string, version int16, autoCreate bool, topics []string) *kmsg.MetadataResponse {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = version
	req.AllowAutoTopicCreation = autoCreate
	if topics != nil {
		req.Topics = []kmsg.MetadataRequestTopic{}
	}
	for _, name := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
	}
	return adminRaw(t, addr, req).(*kmsg.MetadataResponse)
}

func createTopic(t *testing.T, tb *testbroker.Broker, name string, partitions int32) {
	t.Helper()
	if _, err := tb.Admin(t).CreateTopic(adminCtx(t), partitions, 1, nil, name); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
}

func TestMetadataAutoCreateOnProduce(t *testing.T) {
	tb := testbroker.Start(t, func(c *engine.Config) { c.NumPartitions = 3 })
	cl := tb.Client(t, kgo.AllowAutoTopicCreation(), kgo.DefaultProduceTopic("auto.created"))
	start := time.Now()
	if err := cl.ProduceSync(adminCtx(t), kgo.StringRecord("hello")).FirstErr(); err != nil {
		t.Fatalf("produce to a new topic: %v", err)
	}
	// The first Metadata answer is LEADER_NOT_AVAILABLE; franz-go asks again.
	t.Logf("first produce to an auto-created topic: %v", time.Since(start).Round(time.Millisecond))
	md, err := tb.Admin(t).Metadata(adminCtx(t), "auto.created")
	if err != nil {
		t.Fatal(err)
	}
	td := md.Topics["auto.created"]
	if td.Err != nil || len(td.Partitions) != 3 || td.ID == [16]byte{} {
		t.Fatalf("auto-created topic: err %v, %d partitions, id %v", td.Err, len(td.Partitions), td.ID)
	}
	node := tb.Broker.Config().NodeID
	for _, p := range td.Partitions {
		if p.Leader != node || len(p.Replicas) != 1 || p.Replicas[0] != node || len(p.ISR) != 1 || p.LeaderEpoch < 0 {
			t.Errorf("partition %d: leader %d epoch %d replicas %v isr %v", p.Partition, p.Leader, p.LeaderEpoch, p.Replicas, p.ISR)
		}
	}
}

// As in Kafka, the answer to the request that auto-creates a topic is
// LEADER_NOT_AVAILABLE (the name, no partitions); the client's retry
// finds it ready.
func TestMetadataAutoCreateAnswersLeaderNotAvailable(t *testing.T) {
	tb := testbroker.Start(t, func(c *engine.Config) { c.NumPartitions = 2 })
	resp := metadataAt(t, tb.Addr, 12, true, []string{"fresh"})
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.LeaderNotAvailable.Code || len(resp.Topics[0].Partitions) != 0 ||
		resp.Topics[0].Topic == nil || *resp.Topics[0].Topic != "fresh" {
		t.Fatalf("first metadata for a new topic: %+v", resp.Topics)
	}
	resp = metadataAt(t, tb.Addr, 12, true, []string{"fresh"})
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 || len(resp.Topics[0].Partitions) != 2 {
		t.Fatalf("second metadata for a new topic: %+v", resp.Topics)
	}
	if resp.Topics[0].Partitions[0].Leader != tb.Broker.Config().NodeID {
		t.Fatalf("leader %d", resp.Topics[0].Partitions[0].Leader)
	}
}

func TestMetadataNoAutoCreate(t *testing.T) {
	tb := testbroker.Start(t, func(c *engine.Config) { c.AutoCreateTopics = false })
	resp := metadataAt(t, tb.Addr, 12, true, []string{"absent", "bad name!"})
	want := map[string]int16{"absent": kerr.UnknownTopicOrPartition.Code, "bad name!": kerr.InvalidTopicException.Code}
	for _, rt := range resp.Topics {
		if rt.ErrorCode != want[*rt.Topic] {
			t.Errorf("%s: error %d, want %d", *rt.Topic, rt.ErrorCode, want[*rt.Topic])
		}
	}
	if tb.Broker.Topic("absent") != nil {
		t.Fatal("topic created with auto.create.topics.enable=false")
	}
}

func TestMetadataAllowAutoTopicCreationFalse(t *testing.T) {
	tb := testbroker.Start(t)
	resp := metadataAt(t, tb.Addr, 9, false, []string{"absent"})
	if len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("v9 without AllowAutoTopicCreation: %+v", resp.Topics)
	}
	if tb.Broker.Topic("absent") != nil {
		t.Fatal("created although the request did not allow it")
	}
	// v3 has no flag: the broker setting alone decides.
	resp = metadataAt(t, tb.Addr, 3, false, []string{"old-client-topic"})
	if resp.Topics[0].ErrorCode != kerr.LeaderNotAvailable.Code || tb.Broker.Topic("old-client-topic") == nil {
		t.Fatalf("v3 auto-create: error %d", resp.Topics[0].ErrorCode)
	}
}

func TestMetadataOldVersions(t *testing.T) {
	tb := testbroker.Start(t)
	createTopic(t, tb, "old", 2)
	host, port, _ := net.SplitHostPort(tb.Addr)
	for _, v := range []int16{0, 1, 4, 7} {
		// v0: an empty list means every topic.
		resp := metadataAt(t, tb.Addr, v, false, nonNilIf(v == 0))
		if len(resp.Brokers) != 1 || resp.Brokers[0].Host != host || strconv.Itoa(int(resp.Brokers[0].Port)) != port {
			t.Fatalf("v%d brokers %+v, want %s", v, resp.Brokers, tb.Addr)
		}
		if old := findMetadataTopic(resp, "old"); old == nil || len(old.Partitions) != 2 {
			t.Fatalf("v%d: topic old missing from all topics (%d topics)", v, len(resp.Topics))
		}
		if v >= 1 && resp.ControllerID != tb.Broker.Config().NodeID {
			t.Errorf("v%d controller %d", v, resp.ControllerID)
		}
	}
	// v1+: an empty list means no topics.
	if resp := metadataAt(t, tb.Addr, 1, false, []string{}); len(resp.Topics) != 0 {
		t.Fatalf("v1 empty list answered %d topics", len(resp.Topics))
	}
	if resp := metadataAt(t, tb.Addr, 2, false, nil); resp.ClusterID == nil || *resp.ClusterID != tb.Broker.ClusterID() {
		t.Fatalf("v2 cluster id %v", resp.ClusterID)
	}
}

func findMetadataTopic(resp *kmsg.MetadataResponse, name string) *kmsg.MetadataResponseTopic {
	for i := range resp.Topics {
		if rt := &resp.Topics[i]; rt.Topic != nil && *rt.Topic == name {
			return rt
		}
	}
	return nil
}

func nonNilIf(empty bool) []string {
	if empty {
		return []string{}
	}
	return nil
}

func TestMetadataByTopicID(t *testing.T) {
	tb := testbroker.Start(t)
	createTopic(t, tb, "by-id", 1)
	id := tb.Broker.Topic("by-id").ID
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 12
	known, unknown := kmsg.NewMetadataRequestTopic(), kmsg.NewMetadataRequestTopic()
	known.TopicID, unknown.TopicID = id, [16]byte{1, 2, 3}
	req.Topics = []kmsg.MetadataRequestTopic{known, unknown}
	resp := adminRaw(t, tb.Addr, req).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 2 {
		t.Fatalf("%d topics", len(resp.Topics))
	}
	if rt := resp.Topics[0]; rt.ErrorCode != 0 || rt.Topic == nil || *rt.Topic != "by-id" || rt.TopicID != id {
		t.Errorf("known id: %+v", rt)
	}
	if rt := resp.Topics[1]; rt.ErrorCode != kerr.UnknownTopicID.Code || rt.Topic != nil {
		t.Errorf("unknown id: %+v", rt)
	}
	// The Java client asks by id with an empty name, not a null one (it
	// did for a KIP-848 consumer's regex subscription, and was answered
	// INVALID_TOPIC_EXCEPTION for "").
	emptyName := kmsg.NewMetadataRequestTopic()
	emptyName.Topic, emptyName.TopicID = kmsg.StringPtr(""), id
	req.Topics = []kmsg.MetadataRequestTopic{emptyName}
	resp = adminRaw(t, tb.Addr, req).(*kmsg.MetadataResponse)
	if rt := resp.Topics[0]; rt.ErrorCode != 0 || rt.Topic == nil || *rt.Topic != "by-id" {
		t.Errorf("empty name beside an id: %+v", rt)
	}
	req.Topics = []kmsg.MetadataRequestTopic{known, unknown}
	// v10-11 cannot look topics up by id.
	req.Version = 10
	resp = adminRaw(t, tb.Addr, req).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 2 || resp.Topics[0].ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("v10 by id: %+v", resp.Topics)
	}
}

func TestMetadataInternalTopic(t *testing.T) {
	tb := testbroker.Start(t)
	adm := tb.Admin(t)
	if _, err := adm.CreateTopic(adminCtx(t), 1, 1, nil, "__consumer_offsets"); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatal(err)
	}
	md, err := adm.Metadata(adminCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if td := md.Topics["__consumer_offsets"]; !td.IsInternal {
		t.Fatalf("__consumer_offsets not flagged internal: %+v", td)
	}
	resp, err := adm.DeleteTopics(adminCtx(t), "__consumer_offsets")
	if err != nil {
		t.Fatal(err)
	}
	if resp["__consumer_offsets"].Err == nil {
		t.Fatal("deleting the offsets topic succeeded")
	}
	// Internal names are never auto-created through Metadata.
	if r := metadataAt(t, tb.Addr, 12, true, []string{"__transaction_state"}); r.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Fatalf("__transaction_state auto-create: error %d", r.Topics[0].ErrorCode)
	}
}

func TestBrokerMetadata(t *testing.T) {
	tb := testbroker.Start(t)
	md, err := tb.Admin(t).BrokerMetadata(adminCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	node := tb.Broker.Config().NodeID
	if md.Cluster != tb.Broker.ClusterID() || md.Controller != node || len(md.Brokers) != 1 || md.Brokers[0].NodeID != node {
		t.Fatalf("broker metadata: %+v", md)
	}
	if md.Brokers[0].Rack != nil {
		t.Errorf("rack %q, want null", *md.Brokers[0].Rack)
	}
}
