package metadata

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func strp(s string) *string { return &s }

// sampleRecords has one record of every type, with every field set.
func sampleRecords() []Record {
	id := [16]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	return []Record{
		ClusterRecord{ClusterID: "q1Sh-9_ISia_zwGINzRvyQ"},
		FeatureLevelRecord{Name: "metadata.version", FeatureLevel: 21},
		TopicRecord{Name: "orders", TopicID: id},
		PartitionRecord{TopicID: id, Partition: 0, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 3}, Leader: 3, LeaderEpoch: 7, PartitionEpoch: 9},
		ConfigRecord{ResourceType: ResourceTopic, ResourceName: "orders", Name: "retention.ms", Value: strp("1000")},
		ConfigRecord{ResourceType: ResourceTopic, ResourceName: "orders", Name: "retention.ms"},
		ConfigRecord{ResourceType: ResourceBroker, ResourceName: "", Name: "x", Value: strp("")},
		RemoveTopicRecord{TopicID: id},
		ProducerIDsRecord{BrokerID: 1, BrokerEpoch: 5, NextProducerID: 3000},
		PartitionRecord{TopicID: id, Partition: 1, Replicas: []int32{1, 2, 3, 4}, ISR: []int32{1}, Leader: 1,
			AddingReplicas: []int32{4}, RemovingReplicas: []int32{2, 3}},
		RegisterBrokerRecord{BrokerID: 2, IncarnationID: id, BrokerEpoch: 42, Rack: strp("us-east-1a"), Fenced: true,
			Endpoints: []Endpoint{{Name: "PLAINTEXT", Host: "b2.example", Port: 9092}, {Name: "SSL", Host: "b2", Port: 9093, SecurityProtocol: 1}}},
		RegisterBrokerRecord{BrokerID: 3, BrokerEpoch: 43, InControlledShutdown: true},
		UnregisterBrokerRecord{BrokerID: 2, BrokerEpoch: 42},
		FenceBrokerRecord{BrokerID: 3, BrokerEpoch: 43},
		UnfenceBrokerRecord{BrokerID: 3, BrokerEpoch: 43},
		BrokerRegistrationChangeRecord{BrokerID: 3, BrokerEpoch: 43, Fenced: FenceChangeUnfence, InControlledShutdown: ShutdownChangeEnter},
		PartitionChangeRecord{TopicID: id, Partition: 0, Leader: NoLeaderChange, ISR: []int32{1, 2}},
		PartitionChangeRecord{TopicID: id, Partition: 2, Leader: 4, ISR: []int32{4}, Replicas: []int32{4, 5},
			AddingReplicas: []int32{}, RemovingReplicas: []int32{5}},
		AccessControlEntryRecord{ID: id, ACL: ACL{ResourceType: 2, ResourceName: "orders", PatternType: 4, Principal: "User:alice", Host: "*", Operation: 3, Permission: 3}},
		RemoveAccessControlEntryRecord{ID: id},
		ClientQuotaRecord{Entity: QuotaEntity{User: EntityName{Kind: EntityNamed, Name: "alice"}, ClientID: EntityName{Kind: EntityDefault}},
			Key: "producer_byte_rate", Value: 1048576},
		ClientQuotaRecord{Entity: QuotaEntity{IP: EntityName{Kind: EntityDefault}}, Key: "connection_creation_rate", Remove: true},
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range sampleRecords() {
		enc := AppendRecord(nil, r)
		got, err := DecodeRecord(enc)
		if err != nil {
			t.Fatalf("%v: %v", r.Type(), err)
		}
		if !reflect.DeepEqual(got, r) {
			t.Fatalf("%v: decoded %#v, want %#v", r.Type(), got, r)
		}
	}
}

func TestDecodeRecordRejects(t *testing.T) {
	good := AppendRecord(nil, TopicRecord{Name: "t", TopicID: [16]byte{1}})
	for name, b := range map[string][]byte{
		"empty":            nil,
		"unknown type":     {99, 0},
		"unknown version":  {byte(TopicRecordType), 1, 0},
		"short":            good[:len(good)-1],
		"trailing":         append(bytes.Clone(good), 0),
		"huge list count":  append([]byte{byte(PartitionRecordType), 0}, append(make([]byte, 20), 0xff, 0xff, 0xff, 0xff, 0x0f)...),
		"huge string":      {byte(ClusterRecordType), 0, 0xff, 0xff, 0x03},
		"bad varint":       {byte(ClusterRecordType), 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
		"null string over": {byte(ConfigRecordType), 0, 2, 0, 1, 'k', 0xff, 0xff, 0x03},
		"bool not 0 or 1":  append(AppendRecord(nil, RegisterBrokerRecord{BrokerID: 1})[:len(AppendRecord(nil, RegisterBrokerRecord{BrokerID: 1}))-1], 2),
		"partition v1 with nothing of v1": append(append([]byte{byte(PartitionRecordType), 1},
			AppendRecord(nil, PartitionRecord{Replicas: []int32{1}})[2:]...), 0, 0),
		"partition v2":       {byte(PartitionRecordType), 2},
		"huge nullable list": append([]byte{byte(PartitionChangeRecordType), 0}, append(make([]byte, 24), 0xff, 0xff, 0x0f)...),
		"huge endpoints":     append(append([]byte{byte(RegisterBrokerRecordType), 0}, make([]byte, 28)...), 0x7f),
	} {
		if _, err := DecodeRecord(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: err %v, want ErrMalformed", name, err)
		}
	}
}

// FuzzDecodeRecord: decoding never panics, and what decodes re-encodes to
// the same bytes (the encoding is canonical).
func FuzzDecodeRecord(f *testing.F) {
	for _, r := range sampleRecords() {
		f.Add(AppendRecord(nil, r))
	}
	f.Add([]byte{byte(PartitionRecordType), 0, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord(b)
		if err != nil {
			return
		}
		if again := AppendRecord(nil, r); !bytes.Equal(again, b) {
			t.Fatalf("%v re-encodes as %x, was %x", r.Type(), again, b)
		}
	})
}

// The largest records the decoder's limits allow still fit MaxRecordBytes,
// so anything the bounds admit can be written and read back.
func TestLargestRecordsFit(t *testing.T) {
	list := make([]int32, maxListLen)
	long := string(make([]byte, maxStringLen))
	eps := make([]Endpoint, maxEndpoints)
	for i := range eps {
		eps[i] = Endpoint{Name: long, Host: long}
	}
	for _, r := range []Record{
		PartitionRecord{Replicas: list, ISR: list, AddingReplicas: list, RemovingReplicas: list},
		PartitionChangeRecord{ISR: list, Replicas: list, AddingReplicas: list, RemovingReplicas: list},
		RegisterBrokerRecord{Endpoints: eps, Rack: &long},
	} {
		b := AppendRecord(nil, r)
		if len(b) > MaxRecordBytes {
			t.Errorf("%v: %d bytes", r.Type(), len(b))
		}
		if _, err := DecodeRecord(b); err != nil {
			t.Errorf("%v: %v", r.Type(), err)
		}
	}
}
