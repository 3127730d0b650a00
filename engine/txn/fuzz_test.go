package txn

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzLoadRecord: any bytes in __transaction_state load or fail with an
// error; a record that loads encodes back to one that loads the same.
func FuzzLoadRecord(f *testing.F) {
	s := snapshot{pid: 7, prevPid: -1, nextPid: -1, epoch: 3, timeoutMs: 60000, state: Ongoing,
		parts: []TopicPartition{{"a", 0}, {"a", 2}, {"b", 1}}, startMs: 1, updateMs: 2}
	f.Add(recordKey("x"), recordValue(s))
	s.tv2, s.prevPid = true, 5
	f.Add(recordKey("x"), recordValue(s))
	f.Add(recordKey("x"), []byte(nil))
	f.Add([]byte{0, 1, 0, 0}, []byte{0})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		loaded := map[string]*txnMeta{}
		if loadRecord(loaded, key, value) != nil {
			return
		}
		for id, m := range loaded {
			again := map[string]*txnMeta{}
			if err := loadRecord(again, recordKey(id), recordValue(m.snapshot())); err != nil {
				t.Fatalf("re-encoded record does not load: %v", err)
			}
			m2 := again[id]
			if m2 == nil || m2.pid != m.pid || m2.epoch != m.epoch || m2.state != m.state || len(m2.parts) != len(m.parts) {
				t.Fatalf("round trip: %+v became %+v", m, m2)
			}
		}
	})
}

// TestRecordSchema pins the value against kmsg's reading of Kafka's
// TransactionLogValue.
func TestRecordSchema(t *testing.T) {
	s := snapshot{pid: 7, prevPid: 6, nextPid: -1, epoch: 3, timeoutMs: 60000, state: PrepareCommit,
		parts: []TopicPartition{{"a", 0}, {"a", 2}, {"b", 1}}, startMs: 11, updateMs: 12, tv2: true}
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(recordValue(s)); err != nil {
		t.Fatal(err)
	}
	if v.Version != 1 || v.ProducerID != 7 || v.PreviousProducerID != 6 || v.ClientTransactionVersion != 2 ||
		v.State != 2 || len(v.Topics) != 2 || len(v.Topics[0].Partitions) != 2 || v.StartTimestamp != 11 {
		t.Fatalf("decoded %+v", v)
	}
	s.tv2 = false
	if err := v.ReadFrom(recordValue(s)); err != nil || v.Version != 0 {
		t.Fatalf("v0: %+v %v", v, err)
	}
}
