package controller

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metadata"
)

// startServices runs n controller nodes over real TCP on 127.0.0.1.
func startServices(t *testing.T, n int) ([]*Service, []string) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	lns := make([]net.Listener, n)
	voters := map[int32]string{}
	var addrs []string
	for i := range lns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns[i] = ln
		voters[int32(i+1)] = ln.Addr().String()
		addrs = append(addrs, ln.Addr().String())
	}
	svcs := make([]*Service, n)
	for i := range svcs {
		cfg := DefaultConfig("test-cluster")
		s, err := StartService(ServiceConfig{NodeID: int32(i + 1), ClusterID: "test-cluster", Voters: voters,
			Listener: lns[i], Dir: t.TempDir(), Decide: cfg, RaftTick: 10 * time.Millisecond, Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		svcs[i] = s
		t.Cleanup(func() { s.Close() })
	}
	return svcs, addrs
}

func call[R kmsg.Response](t *testing.T, c *Client, ln Line, req kmsg.Request) R {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Call(ctx, ln, req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.(R)
}

// TestServiceRegisterCreateFollow: a broker registers with a three-node
// quorum through whichever controller is active, heartbeats until it is
// unfenced, creates a topic, and follows the log to an image that has
// both.
func TestServiceRegisterCreateFollow(t *testing.T) {
	_, addrs := startServices(t, 3)
	c := NewClient(addrs)
	defer c.Close()

	reg := kmsg.NewPtrBrokerRegistrationRequest()
	reg.BrokerID, reg.ClusterID = 1, "test-cluster"
	l := kmsg.NewBrokerRegistrationRequestListener()
	l.Name, l.Host, l.Port = "PLAINTEXT", "127.0.0.1", 9092
	reg.Listeners = append(reg.Listeners, l)
	rr := call[*kmsg.BrokerRegistrationResponse](t, c, LineHeartbeat, reg)
	if rr.ErrorCode != 0 {
		t.Fatalf("registration: code %d", rr.ErrorCode)
	}

	var next int64
	var img metadata.Image
	follow := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rd, err := c.FetchMetadata(ctx, next, 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if rd.Snapshot {
			img = metadata.Image{}
		}
		for _, b := range rd.Batches {
			if img, err = metadata.ApplyAll(img, b.Records); err != nil {
				t.Fatal(err)
			}
		}
		next = rd.Next
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		follow()
		hb := kmsg.NewPtrBrokerHeartbeatRequest()
		hb.BrokerID, hb.BrokerEpoch, hb.CurrentMetadataOffset = 1, rr.BrokerEpoch, next-1
		if r := call[*kmsg.BrokerHeartbeatResponse](t, c, LineHeartbeat, hb); r.ErrorCode == 0 && !r.IsFenced {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("broker never unfenced")
		}
	}

	ct := kmsg.NewPtrCreateTopicsRequest()
	tp := kmsg.NewCreateTopicsRequestTopic()
	tp.Topic, tp.NumPartitions, tp.ReplicationFactor = "t", 3, 1
	ct.Topics = append(ct.Topics, tp)
	if r := call[*kmsg.CreateTopicsResponse](t, c, LineAdmin, ct); r.Topics[0].ErrorCode != 0 {
		t.Fatalf("create topics: code %d", r.Topics[0].ErrorCode)
	}
	follow()
	if ti := img.Topic("t"); ti == nil || len(ti.Partitions) != 3 || ti.Partitions[0].Leader != 1 {
		t.Fatalf("followed image has topic %+v", ti)
	}
	if img.ClusterID() != "test-cluster" {
		t.Fatalf("cluster id %q", img.ClusterID())
	}

	// A follower starting from an offset the store no longer keeps gets a
	// snapshot of the whole image.
	next, img = 0, metadata.Image{}
	follow()
	if img.Topic("t") == nil {
		t.Fatal("a reader from 0 did not get the topic")
	}
}

// TestRaftStoreRead: a reader gets the batches from its offset, nothing
// (after the wait) at the end, and the image as one snapshot batch when
// its offset is no longer retained.
func TestRaftStoreRead(t *testing.T) {
	s := NewRaftStore(nil)
	s.retain = 2
	topic := func(name string, id byte) []metadata.Record {
		return []metadata.Record{metadata.TopicRecord{Name: name, TopicID: [16]byte{id}}}
	}
	for i, name := range []string{"a", "b", "c"} {
		if err := s.Apply(uint64(i+1), EncodeBatch(nil, topic(name, byte(i+1)))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Apply(4, EncodeBatch(nil, topic("a", 9))); err == nil {
		t.Fatal("a batch that does not apply was applied")
	}
	if s.NextOffset() != 3 {
		t.Fatalf("next offset %d, want 3", s.NextOffset())
	}
	ctx := context.Background()
	if rd := s.Read(ctx, 2, 0); rd.Snapshot || len(rd.Batches) != 1 || rd.Batches[0].Offset != 2 || rd.Next != 3 {
		t.Fatalf("read from 2: %+v", rd)
	}
	if rd := s.Read(ctx, 3, time.Millisecond); len(rd.Batches) != 0 || rd.Next != 3 {
		t.Fatalf("read at the end: %+v", rd)
	}
	rd := s.Read(ctx, 0, 0)
	if !rd.Snapshot || rd.Next != 3 {
		t.Fatalf("read from a trimmed offset: %+v", rd)
	}
	img, err := metadata.ApplyAll(metadata.Image{}, rd.Batches[0].Records)
	if err != nil || img.TopicCount() != 3 {
		t.Fatalf("snapshot image: %d topics, %v", img.TopicCount(), err)
	}
	snap, _ := s.Snapshot()
	r := NewRaftStore(nil)
	if err := r.Restore(3, snap); err != nil || r.NextOffset() != 3 || r.Image().TopicCount() != 3 {
		t.Fatalf("restore: next %d, %d topics, %v", r.NextOffset(), r.Image().TopicCount(), err)
	}
}

// FuzzDecodeBatch: the decoders of what arrives from the network (raft
// entries, SluiceMetadataFetch answers) never panic, and a batch that
// decodes re-encodes to the same bytes.
func FuzzDecodeBatch(f *testing.F) {
	f.Add(EncodeBatch(nil, []metadata.Record{metadata.TopicRecord{Name: "t", TopicID: [16]byte{1}},
		metadata.FenceBrokerRecord{BrokerID: 1, BrokerEpoch: 3}}))
	f.Add(appendLogRead(nil, LogRead{Next: 5, Batches: []Batch{{Offset: 4, Records: []metadata.Record{metadata.ClusterRecord{ClusterID: "c"}}}}}))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decodeLogRead(b)
		recs, err := DecodeBatch(b)
		if err != nil {
			return
		}
		if again := EncodeBatch(nil, recs); string(again) != string(b) {
			t.Fatalf("re-encoded %x, decoded from %x", again, b)
		}
	})
}

// TestClientSwitchedOnFailover: a client whose line finds the active
// controller after its own died signals Switched (a broker heartbeats at
// once then); calls that succeed where they went do not.
func TestClientSwitchedOnFailover(t *testing.T) {
	svcs, addrs := startServices(t, 3)
	c := NewClient(addrs)
	defer c.Close()
	fetch := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := c.FetchMetadata(ctx, 0, 10*time.Millisecond)
		return err
	}
	if err := fetch(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Switched(): // the first try may have met a follower
	default:
	}
	if err := fetch(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Switched():
		t.Fatal("switched without a failure")
	default:
	}
	for _, s := range svcs {
		if s.IsActive() {
			s.Close()
		}
	}
	if err := fetch(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Switched():
	default:
		t.Fatal("no switch signalled after the active controller closed")
	}
}
