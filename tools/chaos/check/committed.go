package check

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ReadCommitted reads every partition of topic at read_committed, from its
// start to its last stable offset once no transaction is open in it (the
// LSO has reached the HW), with plain Fetch requests to each leader: the
// broker's answer (aborted-transaction list, control batches) decides what
// is committed, and kgo.ProcessFetchPartition applies it as every Kafka
// consumer does. A partition whose LSO stays below its HW until ctx ends
// holds a hanging transaction and is an error. Values that are not
// numbers read as -1; Log.HW is the final LSO. opts are more options of
// the client (TLS, SASL).
func ReadCommitted(ctx context.Context, seeds []string, topic string, partitions int, opts ...kgo.Opt) (map[int32]*Log, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	logs := map[int32]*Log{}
	for p := range int32(partitions) {
		l, err := readCommitted(ctx, cl, topic, p)
		if err != nil {
			return nil, err
		}
		logs[p] = l
	}
	return logs, nil
}

// readCommitted reads one partition (see ReadCommitted).
func readCommitted(ctx context.Context, cl *kgo.Client, topic string, p int32) (*Log, error) {
	l := &Log{}
	next, last := int64(0), "no answer"
	var at *leaderOf // looked up again after any error
	for {
		var rp *kmsg.FetchResponseTopicPartition
		var err error
		if at == nil {
			at, err = lookupLeader(ctx, cl, topic, p)
		}
		if err == nil {
			rp, err = fetchCommitted(ctx, cl, topic, p, at, next)
		}
		switch {
		case err != nil:
			at, last = nil, err.Error()
		case rp.ErrorCode != 0:
			at, last = nil, kerr.ErrorForCode(rp.ErrorCode).Error()
		default:
			fp, n := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
				Offset: next, IsolationLevel: kgo.ReadCommitted(), Topic: topic, Partition: p,
			}, rp, kgo.DefaultDecompressor(), nil)
			for _, r := range fp.Records {
				v, err := strconv.Atoi(string(r.Value))
				if err != nil {
					v = -1
				}
				l.Offsets, l.Values = append(l.Offsets, r.Offset), append(l.Values, v)
			}
			next = n
			if next >= rp.LastStableOffset && rp.LastStableOffset == rp.HighWatermark {
				l.HW = rp.LastStableOffset
				return l, nil
			}
			last = fmt.Sprintf("at %d: LSO %d, HW %d", next, rp.LastStableOffset, rp.HighWatermark)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("reading %s-%d at read_committed: %w (last: %s)", topic, p, ctx.Err(), last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// leaderOf is where a partition's fetches go: its leader and its
// topic's id (Fetch v13+ names topics by id).
type leaderOf struct {
	leader  int32
	topicID [16]byte
}

// lookupLeader asks for p's leader and its topic's id.
func lookupLeader(ctx context.Context, cl *kgo.Client, topic string, p int32) (*leaderOf, error) {
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, mt)
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	meta, err := mreq.RequestWith(c, cl)
	if err != nil {
		return nil, err
	}
	if len(meta.Topics) != 1 || meta.Topics[0].ErrorCode != 0 {
		return nil, fmt.Errorf("metadata of %s: %+v", topic, meta.Topics)
	}
	for _, mp := range meta.Topics[0].Partitions {
		if mp.Partition == p && mp.Leader >= 0 {
			return &leaderOf{leader: mp.Leader, topicID: meta.Topics[0].TopicID}, nil
		}
	}
	return nil, fmt.Errorf("%s-%d has no leader", topic, p)
}

// fetchCommitted sends one read_committed Fetch for p at offset to its
// leader.
func fetchCommitted(ctx context.Context, cl *kgo.Client, topic string, p int32, at *leaderOf, offset int64) (*kmsg.FetchResponseTopicPartition, error) {
	c, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MaxBytes, req.IsolationLevel = -1, 100, 4<<20, 1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, at.topicID
	rpart := kmsg.NewFetchRequestTopicPartition()
	rpart.Partition, rpart.FetchOffset, rpart.PartitionMaxBytes, rpart.CurrentLeaderEpoch = p, offset, 4<<20, -1
	rt.Partitions = append(rt.Partitions, rpart)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(c, cl.Broker(int(at.leader)))
	if err != nil {
		return nil, err
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		if resp.ErrorCode != 0 {
			return nil, kerr.ErrorForCode(resp.ErrorCode)
		}
		return nil, fmt.Errorf("fetch of %s-%d: %d topics in the answer", topic, p, len(resp.Topics))
	}
	return &resp.Topics[0].Partitions[0], nil
}

// CheckCopy checks a transactional copy of a topic: a read-process-write
// job consumed src in a group and wrote each value to the same partition
// of dst in transactions that also committed the group's offsets. Exactly
// once means each partition of dst, read at read_committed, holds the
// values of src below the group's committed offset, each once and in
// src's order: a value missing is a lost copy, one more than that (an
// aborted record visible, a duplicate, a transaction whose offsets did not
// commit with it) is a Duplicate, a different one is Foreign.
func CheckCopy(src, dst map[int32]*Log, committed map[int32]int64) Anomalies {
	an := Anomalies{}
	for _, p := range sortedParts(src) {
		var want []int
		for i, off := range src[p].Offsets {
			if off < committed[p] {
				want = append(want, src[p].Values[i])
			}
		}
		var got []int
		if d := dst[p]; d != nil {
			got = d.Values
		}
		for i := 0; i < max(len(want), len(got)); i++ {
			switch {
			case i >= len(got):
				an.Add(Lost, fmt.Sprintf("copy of partition %d: %d values, the source has %d below the committed offset %d (first missing: %d)", p, len(got), len(want), committed[p], want[i]))
			case i >= len(want):
				an.Add(Duplicate, fmt.Sprintf("copy of partition %d: %d values, only %d below the committed offset %d (first extra: %d at copy offset %d)", p, len(got), len(want), committed[p], got[i], dst[p].Offsets[i]))
			case got[i] != want[i]:
				an.Add(Foreign, fmt.Sprintf("copy of partition %d: value %d at copy offset %d, the source's %d-th committed value is %d", p, got[i], dst[p].Offsets[i], i, want[i]))
			default:
				continue
			}
			break
		}
	}
	return an
}
