package engine

// The ShareFetch response body (key 78, flexible in every version),
// encoded by hand so that a partition's records can be a file region
// spliced into the frame, as Fetch's are (fetch_encode.go), instead of
// bytes copied through memory. Layout (Kafka's ShareFetchResponse):
//
//	ThrottleMillis int32, ErrorCode int16, ErrorMessage compact nullable string
//	AcquisitionLockTimeoutMillis int32                       v1+
//	Topics [ TopicID uuid
//	  Partitions [ Partition int32, ErrorCode int16, ErrorMessage nstring,
//	    AcknowledgeErrorCode int16, AcknowledgeErrorMessage nstring,
//	    CurrentLeader { LeaderID int32, LeaderEpoch int32, tags }
//	    Records compact nullable bytes  <- length, then the region or bytes
//	    AcquiredRecords [ FirstOffset int64, LastOffset int64, DeliveryCount int16, tags ]
//	    tags ]
//	  tags ]
//	NodeEndpoints [ … ] (always empty here), tags
//
// TestShareFetchEncodeMatchesKmsg pins it to kmsg's encoding.

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/storage"
)

// encodeShareFetch writes resp's body into w; a partition whose
// (topic, partition) is in regions sends that file region as its records
// (its Records field is ignored).
func encodeShareFetch(w *frameWriter, resp *kmsg.ShareFetchResponse, regions map[shareTP]storage.Region) {
	b := &w.r.buf
	*b = binary.BigEndian.AppendUint32(*b, uint32(resp.ThrottleMillis))
	*b = binary.BigEndian.AppendUint16(*b, uint16(resp.ErrorCode))
	*b = appendCompactNullableString(*b, resp.ErrorMessage)
	if resp.Version >= 1 {
		*b = binary.BigEndian.AppendUint32(*b, uint32(resp.AcquisitionLockTimeoutMillis))
	}
	*b = appendArrayLen(*b, len(resp.Topics), true)
	for i := range resp.Topics {
		t := &resp.Topics[i]
		*b = append(*b, t.TopicID[:]...)
		*b = appendArrayLen(*b, len(t.Partitions), true)
		for j := range t.Partitions {
			reg, ok := regions[shareTP{t.TopicID, t.Partitions[j].Partition}]
			encodeSharePartition(w, &t.Partitions[j], reg, ok)
		}
		*b = append(*b, 0) // topic tags
	}
	*b = appendArrayLen(*b, len(resp.NodeEndpoints), true)
	for _, e := range resp.NodeEndpoints {
		*b = binary.BigEndian.AppendUint32(*b, uint32(e.NodeID))
		*b = appendString(*b, e.Host, true)
		*b = binary.BigEndian.AppendUint32(*b, uint32(e.Port))
		*b = appendCompactNullableString(*b, e.Rack)
		*b = append(*b, 0)
	}
	*b = append(*b, 0) // response tags
}

func encodeSharePartition(w *frameWriter, p *kmsg.ShareFetchResponseTopicPartition, reg storage.Region, isRegion bool) {
	b := &w.r.buf
	*b = binary.BigEndian.AppendUint32(*b, uint32(p.Partition))
	*b = binary.BigEndian.AppendUint16(*b, uint16(p.ErrorCode))
	*b = appendCompactNullableString(*b, p.ErrorMessage)
	*b = binary.BigEndian.AppendUint16(*b, uint16(p.AcknowledgeErrorCode))
	*b = appendCompactNullableString(*b, p.AcknowledgeErrorMessage)
	*b = binary.BigEndian.AppendUint32(*b, uint32(p.CurrentLeader.LeaderID))
	*b = binary.BigEndian.AppendUint32(*b, uint32(p.CurrentLeader.LeaderEpoch))
	*b = append(*b, 0) // current leader tags
	switch {
	case isRegion:
		*b = binary.AppendUvarint(*b, uint64(reg.Len)+1)
		w.region(reg)
	case p.Records == nil:
		*b = append(*b, 0)
	default:
		*b = binary.AppendUvarint(*b, uint64(len(p.Records))+1)
		*b = append(*b, p.Records...)
	}
	*b = appendArrayLen(*b, len(p.AcquiredRecords), true)
	for _, a := range p.AcquiredRecords {
		*b = binary.BigEndian.AppendUint64(*b, uint64(a.FirstOffset))
		*b = binary.BigEndian.AppendUint64(*b, uint64(a.LastOffset))
		*b = binary.BigEndian.AppendUint16(*b, uint16(a.DeliveryCount))
		*b = append(*b, 0)
	}
	*b = append(*b, 0) // partition tags
}

func appendCompactNullableString(b []byte, s *string) []byte {
	if s == nil {
		return append(b, 0)
	}
	return appendString(b, *s, true)
}
