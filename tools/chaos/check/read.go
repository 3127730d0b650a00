package check

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ReadLogs reads every partition of topic from its start to its high
// watermark with a fresh consumer of seeds, re-reading the HWs until they
// stop moving; records at or above the HW a consumer may have seen are
// dropped. Values that are not numbers read as -1. opts are more options
// of both clients (TLS, SASL).
func ReadLogs(ctx context.Context, seeds []string, topic string, partitions int, opts ...kgo.Opt) (map[int32]*Log, error) {
	adm, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	offs := map[int32]kgo.Offset{}
	logs := map[int32]*Log{}
	for p := range int32(partitions) {
		offs[p] = kgo.NewOffset().AtStart()
		logs[p] = &Log{}
	}
	cons, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()), kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)...)
	if err != nil {
		return nil, err
	}
	defer cons.Close()
	target, err := endOffsets(ctx, kadm.NewClient(adm), topic, partitions)
	for err == nil {
		if reached(logs, target) {
			var again map[int32]int64
			if again, err = endOffsets(ctx, kadm.NewClient(adm), topic, partitions); err == nil && maps.Equal(again, target) {
				break
			}
			target = again
			continue
		}
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("consuming to the HW %v: %w", target, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			l := logs[r.Partition]
			v, err := strconv.Atoi(string(r.Value))
			if err != nil {
				v = -1
			}
			l.Offsets, l.Values = append(l.Offsets, r.Offset), append(l.Values, v)
		})
	}
	if err != nil {
		return nil, err
	}
	for p, l := range logs {
		l.HW = target[p]
		for len(l.Offsets) > 0 && l.Offsets[len(l.Offsets)-1] >= l.HW {
			l.Offsets, l.Values = l.Offsets[:len(l.Offsets)-1], l.Values[:len(l.Values)-1]
		}
	}
	return logs, nil
}

// reached reports whether every log holds a record at its target HW - 1.
func reached(logs map[int32]*Log, target map[int32]int64) bool {
	for p, hw := range target {
		if n := len(logs[p].Offsets); hw > 0 && (n == 0 || logs[p].Offsets[n-1] < hw-1) {
			return false
		}
	}
	return true
}

// endOffsets asks for every partition's HW until one answer has them all.
func endOffsets(ctx context.Context, adm *kadm.Client, topic string, partitions int) (map[int32]int64, error) {
	for {
		out := map[int32]int64{}
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		ends, err := adm.ListEndOffsets(c, topic)
		cancel()
		if err == nil && ends.Error() == nil {
			ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
			if len(out) == partitions {
				return out, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("end offsets of %s: %w (last error %v)", topic, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
