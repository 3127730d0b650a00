package engine

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/storage"
)

// sampleShareFetch is a ShareFetch answer touching every branch of the
// encoder: two topics, records as a file region and as bytes, a
// partition with only an acknowledgement error, messages, acquired
// ranges.
func sampleShareFetch(version int16) *kmsg.ShareFetchResponse {
	resp := kmsg.NewPtrShareFetchResponse()
	resp.Version, resp.AcquisitionLockTimeoutMillis = version, 30000
	p := func(n int32) kmsg.ShareFetchResponseTopicPartition {
		rp := kmsg.NewShareFetchResponseTopicPartition()
		rp.Partition, rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = n, -1, -1
		return rp
	}
	region := p(0)
	region.AcquiredRecords = []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{{FirstOffset: 3, LastOffset: 9, DeliveryCount: 1}, {FirstOffset: 12, LastOffset: 12, DeliveryCount: 4}}
	inMemory := p(1)
	inMemory.Records = []byte("batches in memory")
	inMemory.AcquiredRecords = []kmsg.ShareFetchResponseTopicPartitionAcquiredRecord{{FirstOffset: 0, LastOffset: 0, DeliveryCount: 2}}
	acked := p(2)
	acked.AcknowledgeErrorCode, acked.AcknowledgeErrorMessage = kerr.InvalidRecordState.Code, kmsg.StringPtr("not yours")
	failed := p(7)
	failed.ErrorCode, failed.ErrorMessage = kerr.NotLeaderForPartition.Code, kmsg.StringPtr("moved")
	failed.CurrentLeader.LeaderID, failed.CurrentLeader.LeaderEpoch = 3, 9
	resp.Topics = []kmsg.ShareFetchResponseTopic{
		{TopicID: [16]byte{1}, Partitions: []kmsg.ShareFetchResponseTopicPartition{region, inMemory, acked}},
		{TopicID: [16]byte{2}, Partitions: []kmsg.ShareFetchResponseTopicPartition{failed}},
	}
	resp.NodeEndpoints = []kmsg.ShareFetchResponseNodeEndpoint{{NodeID: 3, Host: "h", Port: 9092, Rack: kmsg.StringPtr("r")}}
	return resp
}

// The hand-written ShareFetch encoder writes what kmsg writes, the file
// region's bytes in place of the Records it stands for.
func TestShareFetchEncodeMatchesKmsg(t *testing.T) {
	file, data := regionFile(t)
	for _, version := range []int16{1, 2} {
		resp := sampleShareFetch(version)
		regions := map[shareTP]storage.Region{{[16]byte{1}, 0}: {File: file, Pos: 16, Len: 100}}
		var w frameWriter
		w.begin(newResponse())
		encodeShareFetch(&w, resp, regions)
		r := w.finish()
		var got []byte
		for i := 0; i < r.NumParts(); i++ {
			b, f, off, n := r.PartAt(i)
			if f == nil {
				got = append(got, b...)
				continue
			}
			buf := make([]byte, n)
			if _, err := f.ReadAt(buf, off); err != nil {
				t.Fatal(err)
			}
			got = append(got, buf...)
		}
		if size := int64(binary.BigEndian.Uint32(got)); size != r.Size-4 {
			t.Fatalf("v%d: size prefix %d, frame %d", version, size, r.Size-4)
		}
		resp.Topics[0].Partitions[0].Records = data[16:116]
		if want := resp.AppendTo(nil); !bytes.Equal(got[4:], want) {
			t.Fatalf("v%d: encoded\n%x\nkmsg\n%x", version, got[4:], want)
		}
	}
}

func TestShareFetchEncodeAllocs(t *testing.T) {
	file, _ := regionFile(t)
	resp := sampleShareFetch(2)
	regions := map[shareTP]storage.Region{{[16]byte{1}, 0}: {File: file, Pos: 16, Len: 100}}
	var w frameWriter
	r := newResponse()
	allocs := testing.AllocsPerRun(100, func() {
		r.buf, r.Parts = r.buf[:0], r.Parts[:0]
		w.begin(r)
		encodeShareFetch(&w, resp, regions)
		w.finish()
	})
	if allocs != 0 {
		t.Fatalf("encoding a ShareFetch response allocates %.1f times", allocs)
	}
}
