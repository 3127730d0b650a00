package main

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

var formatter = kmsg.NewRequestFormatter(kmsg.FormatterClientID("netbench"))

func encode(req kmsg.Request) []byte { return formatter.AppendRequest(nil, req, 1) }

// roundTrip sends one request on a blocking connection and decodes the
// response.
func roundTrip(c net.Conn, req kmsg.Request) (kmsg.Response, error) {
	if _, err := c.Write(encode(req)); err != nil {
		return nil, err
	}
	body, err := readResponse(c, nil)
	if err != nil {
		return nil, err
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	body = body[4:] // correlation id
	if resp.IsFlexible() && req.Key() != kmsg.ApiVersions.Int16() {
		body = body[1:]
	}
	return resp, resp.ReadFrom(body)
}

// readResponse reads one size-prefixed frame into buf (grown as needed).
func readResponse(c io.Reader, buf []byte) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint32(hdr[:]))
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	_, err := io.ReadFull(c, buf)
	return buf, err
}

func apiVersionsRequest() kmsg.Request {
	r := kmsg.NewPtrApiVersionsRequest()
	r.Version = 3
	r.ClientSoftwareName, r.ClientSoftwareVersion = "netbench", "1"
	return r
}

func metadataRequest(topic string) kmsg.Request {
	r := kmsg.NewPtrMetadataRequest()
	r.Version = 12
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	r.Topics = append(r.Topics, t)
	return r
}

func createTopic(addr, topic string, configs map[string]string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	r := kmsg.NewPtrCreateTopicsRequest()
	r.Version = 5
	r.TimeoutMillis = 10000
	t := kmsg.NewCreateTopicsRequestTopic()
	t.Topic, t.NumPartitions, t.ReplicationFactor = topic, 1, 1
	for k, v := range configs {
		cfg := kmsg.NewCreateTopicsRequestTopicConfig()
		cfg.Name, cfg.Value = k, kmsg.StringPtr(v)
		t.Configs = append(t.Configs, cfg)
	}
	r.Topics = append(r.Topics, t)
	resp, err := roundTrip(c, r)
	if err != nil {
		return err
	}
	if code := resp.(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode; code != 0 {
		return fmt.Errorf("create topic %s: error %d", topic, code)
	}
	return nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// recordBatch builds a RecordBatch v2 of n records with values of size
// bytes (no keys, no headers, no compression).
func recordBatch(n, size int) []byte {
	value := make([]byte, size)
	for i := range value {
		value[i] = byte(i * 7)
	}
	var recs []byte
	for i := 0; i < n; i++ {
		var r []byte
		r = append(r, 0)                        // attributes
		r = binary.AppendVarint(r, 0)           // timestamp delta
		r = binary.AppendVarint(r, int64(i))    // offset delta
		r = binary.AppendVarint(r, -1)          // null key
		r = binary.AppendVarint(r, int64(size)) // value
		r = append(r, value...)
		r = binary.AppendVarint(r, 0) // headers
		recs = binary.AppendVarint(recs, int64(len(r)))
		recs = append(recs, r...)
	}
	now := time.Now().UnixMilli()
	b := make([]byte, 0, 61+len(recs))
	b = binary.BigEndian.AppendUint64(b, 0)                    // base offset
	b = binary.BigEndian.AppendUint32(b, uint32(49+len(recs))) // batch length
	b = binary.BigEndian.AppendUint32(b, 0xffffffff)           // partition leader epoch
	b = append(b, 2)                                           // magic
	crcAt := len(b)                                            //
	b = append(b, 0, 0, 0, 0)                                  // crc
	b = binary.BigEndian.AppendUint16(b, 0)                    // attributes
	b = binary.BigEndian.AppendUint32(b, uint32(n-1))          // last offset delta
	b = binary.BigEndian.AppendUint64(b, uint64(now))          // first timestamp
	b = binary.BigEndian.AppendUint64(b, uint64(now))          // max timestamp
	b = binary.BigEndian.AppendUint64(b, 0xffffffffffffffff)   // producer id
	b = binary.BigEndian.AppendUint16(b, 0xffff)               // producer epoch
	b = binary.BigEndian.AppendUint32(b, 0xffffffff)           // base sequence
	b = binary.BigEndian.AppendUint32(b, uint32(n))            // records
	b = append(b, recs...)
	binary.BigEndian.PutUint32(b[crcAt:], crc32.Checksum(b[crcAt+4:], castagnoli))
	return b
}

func produceRequest(topic string, batch []byte) kmsg.Request {
	r := kmsg.NewPtrProduceRequest()
	r.Version = 9
	r.Acks = 1
	r.TimeoutMillis = 10000
	t := kmsg.NewProduceRequestTopic()
	t.Topic = topic
	p := kmsg.NewProduceRequestTopicPartition()
	p.Records = batch
	t.Partitions = append(t.Partitions, p)
	r.Topics = append(r.Topics, t)
	return r
}

func fetchRequest(topic string, offset int64, maxBytes int32) kmsg.Request {
	r := kmsg.NewPtrFetchRequest()
	r.Version = 12
	r.ReplicaID = -1
	r.MaxWaitMillis = 100
	r.MinBytes = 1
	r.MaxBytes = maxBytes
	r.SessionEpoch = -1
	t := kmsg.NewFetchRequestTopic()
	t.Topic = topic
	p := kmsg.NewFetchRequestTopicPartition()
	p.FetchOffset = offset
	p.PartitionMaxBytes = maxBytes
	p.CurrentLeaderEpoch = -1
	p.LogStartOffset = -1
	t.Partitions = append(t.Partitions, p)
	r.Topics = append(r.Topics, t)
	return r
}
