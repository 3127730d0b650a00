package engine_test

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/internal/testbroker"
)

// fullMetadataAt asks for every topic at version v with the topic
// authorized-operations flag (v8+) as given.
func fullMetadataAt(t *testing.T, addr string, v int16, topicOps bool) *kmsg.MetadataResponse {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = v
	req.IncludeTopicAuthorizedOperations = topicOps
	if v == 0 {
		req.Topics = []kmsg.MetadataRequestTopic{}
	}
	return adminRaw(t, addr, req).(*kmsg.MetadataResponse)
}

// partitionCounts maps each listed topic to its partition count, from the
// cached full answer and from a by-name answer, which is always built
// afresh: the two must agree after every change.
func partitionCounts(t *testing.T, addr string, v int16, topicOps bool) map[string]int {
	t.Helper()
	full := fullMetadataAt(t, addr, v, topicOps)
	counts := map[string]int{}
	var names []string
	for _, tp := range full.Topics {
		counts[*tp.Topic] = len(tp.Partitions)
		names = append(names, *tp.Topic)
		if topicOps && v >= 8 && tp.AuthorizedOperations <= 0 {
			t.Errorf("v%d %s: authorized operations %d, asked for", v, *tp.Topic, tp.AuthorizedOperations)
		}
	}
	if len(names) == 0 {
		return counts
	}
	byName := metadataAt(t, addr, v, false, names)
	for i, tp := range byName.Topics {
		got := full.Topics[i]
		if *tp.Topic != *got.Topic || !slices.EqualFunc(tp.Partitions, got.Partitions, samePartition) {
			t.Errorf("v%d: the full answer for %s differs from the by-name answer:\n%+v\n%+v", v, *tp.Topic, got.Partitions, tp.Partitions)
		}
	}
	return counts
}

func samePartition(a, b kmsg.MetadataResponseTopicPartition) bool {
	return a.Partition == b.Partition && a.Leader == b.Leader && a.LeaderEpoch == b.LeaderEpoch &&
		slices.Equal(a.Replicas, b.Replicas) && slices.Equal(a.ISR, b.ISR) && a.ErrorCode == b.ErrorCode
}

// TestFullMetadataCacheFollowsChanges asks for every topic at several
// versions and flags (each a cache entry) around topic creation, growth
// and deletion and a restart: every answer shows the change, and agrees
// with the uncached by-name answer.
func TestFullMetadataCacheFollowsChanges(t *testing.T) {
	tb := testbroker.Start(t)
	type variant struct {
		v        int16
		topicOps bool
	}
	variants := []variant{{0, false}, {1, false}, {9, true}, {9, false}, {12, false}}
	internal := partitionCounts(t, tb.Addr, 12, false) // __consumer_offsets
	expect := func(what string, want map[string]int) {
		t.Helper()
		maps.Copy(want, internal)
		for _, vr := range variants {
			for range 2 { // the first may build, the second is a hit
				got := partitionCounts(t, tb.Addr, vr.v, vr.topicOps)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("%s: v%d (topic ops %v) lists %v, want %v", what, vr.v, vr.topicOps, got, want)
				}
			}
		}
	}
	expect("empty", map[string]int{})
	createTopic(t, tb, "cache-a", 3)
	expect("after a creation", map[string]int{"cache-a": 3})
	createTopic(t, tb, "cache-b", 1)
	adm := tb.Admin(t)
	if _, err := adm.CreatePartitions(adminCtx(t), 2, "cache-a"); err != nil {
		t.Fatal(err)
	}
	expect("after adding partitions", map[string]int{"cache-a": 5, "cache-b": 1})
	if _, err := adm.DeleteTopics(adminCtx(t), "cache-b"); err != nil {
		t.Fatal(err)
	}
	expect("after a deletion", map[string]int{"cache-a": 5})
	tb.Restart(t)
	expect("after a restart", map[string]int{"cache-a": 5})
}
