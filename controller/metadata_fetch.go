package controller

// SluiceMetadataFetch: how brokers follow the metadata log. It is our own
// RPC, framed as a Kafka request under a private API key, rather than
// Kafka's Fetch of __cluster_metadata:
//
//   - the log's records are Sluice's metadata records in Sluice's encoding
//     (package metadata), not Kafka's ApiMessage records, so a capture
//     would not decode them as Kafka's even inside a Fetch;
//   - KRaft's Fetch carries raft's own protocol (leader epochs, diverging
//     epochs, snapshot ids) because KRaft observers follow the raft log
//     itself; here consensus is etcd raft between controllers, and brokers
//     only read committed batches, which needs an offset and nothing else.
//
// Request (v0):  from offset int64 | max wait ms int32
// Response (v0): error code int16 | snapshot int8 | next offset int64 |
//                batch count int32 | per batch: offset int64,
//                length int32, EncodeBatch bytes
//
// A reader at offset o gets the committed batches from o on (waiting up
// to max wait for one), or, when o is no longer retained, the image as
// one snapshot batch; either way it continues from next offset. Only the
// active controller answers (others say NOT_CONTROLLER), so a broker
// never reads from a controller cut off from the majority.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// MetadataFetchKey is SluiceMetadataFetch's API key, far from Kafka's.
const MetadataFetchKey int16 = 32001

// maxMetadataWait bounds a reader's long poll.
const maxMetadataWait = 5 * time.Second

func (cs *connState) metadataFetch(corr uint32, body []byte) ([]byte, bool) {
	if len(body) < 12 {
		return nil, false
	}
	from := int64(binary.BigEndian.Uint64(body))
	wait := min(time.Duration(binary.BigEndian.Uint32(body[8:]))*time.Millisecond, maxMetadataWait)
	out := binary.BigEndian.AppendUint32(make([]byte, 4, 512), corr)
	if !cs.s.isActive.Load() {
		out = binary.BigEndian.AppendUint16(out, uint16(kerr.NotController.Code))
		out = append(out, 0)
		out = binary.BigEndian.AppendUint64(out, 0)
		out = binary.BigEndian.AppendUint32(out, 0)
	} else {
		rd := cs.s.store.Read(context.Background(), from, wait)
		out = appendLogRead(out, rd)
	}
	binary.BigEndian.PutUint32(out, uint32(len(out)-4))
	return out, true
}

func appendLogRead(out []byte, rd LogRead) []byte {
	out = binary.BigEndian.AppendUint16(out, 0)
	snap := byte(0)
	if rd.Snapshot {
		snap = 1
	}
	out = append(out, snap)
	out = binary.BigEndian.AppendUint64(out, uint64(rd.Next))
	out = binary.BigEndian.AppendUint32(out, uint32(len(rd.Batches)))
	for _, b := range rd.Batches {
		out = binary.BigEndian.AppendUint64(out, uint64(b.Offset))
		at := len(out)
		out = append(out, 0, 0, 0, 0)
		out = EncodeBatch(out, b.Records)
		binary.BigEndian.PutUint32(out[at:], uint32(len(out)-at-4))
	}
	return out
}

// errNotControllerCode is a SluiceMetadataFetch answered by a controller
// that is not active.
var errNotControllerCode = errors.New("controller: not the active controller")

// decodeLogRead decodes a SluiceMetadataFetch response body.
func decodeLogRead(b []byte) (LogRead, error) {
	var rd LogRead
	if len(b) < 15 {
		return rd, errors.New("controller: short metadata fetch response")
	}
	if ec := int16(binary.BigEndian.Uint16(b)); ec != 0 {
		if ec == kerr.NotController.Code {
			return rd, errNotControllerCode
		}
		return rd, kerr.ErrorForCode(ec)
	}
	rd.Snapshot = b[2] == 1
	rd.Next = int64(binary.BigEndian.Uint64(b[3:]))
	n := binary.BigEndian.Uint32(b[11:])
	b = b[15:]
	for range n {
		if len(b) < 12 {
			return rd, errors.New("controller: short metadata batch")
		}
		off, l := int64(binary.BigEndian.Uint64(b)), binary.BigEndian.Uint32(b[8:])
		if uint64(l) > uint64(len(b)-12) {
			return rd, errors.New("controller: short metadata batch")
		}
		recs, err := DecodeBatch(b[12 : 12+l])
		if err != nil {
			return rd, fmt.Errorf("controller: metadata batch at %d: %w", off, err)
		}
		rd.Batches = append(rd.Batches, Batch{Offset: off, Records: recs})
		b = b[12+l:]
	}
	return rd, nil
}
