package engine

// DescribeLogDirs (key 35), versions 1-4 (Kafka 4 dropped 0).
//
// Sluice keeps every partition in its one data directory, so the answer is
// one dir (its absolute path) listing the requested partitions (all of them
// for a null topic list) with their size on disk. Requested topics or
// partitions this broker does not have are left out, as Kafka does. There
// are no future replicas and no followers: OffsetLag is 0 and IsFuture
// false. v4 adds the file system's total and usable bytes (statfs; -1 if it
// fails). v3+'s top-level error is always 0.

import (
	"path/filepath"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
	"golang.org/x/sys/unix"
)

func init() { register(kmsg.DescribeLogDirs, 1, 4, (*Broker).handleDescribeLogDirs) }

func (b *Broker) handleDescribeLogDirs(r *Request) {
	req := r.Msg.(*kmsg.DescribeLogDirsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeLogDirsResponse)
	dir := kmsg.NewDescribeLogDirsResponseDir()
	dir.Dir = b.cfg.DataDir
	if abs, err := filepath.Abs(b.cfg.DataDir); err == nil {
		dir.Dir = abs
	}
	dir.TotalBytes, dir.UsableBytes = diskSpace(b.cfg.DataDir)
	if req.Topics == nil {
		for _, t := range b.Topics() {
			dir.Topics = appendLogDirTopic(dir.Topics, t, nil)
		}
	} else {
		for _, rt := range req.Topics {
			if t := b.Topic(rt.Topic); t != nil {
				// kmsg decodes an empty list as nil; it still means none.
				dir.Topics = appendLogDirTopic(dir.Topics, t, append([]int32{}, rt.Partitions...))
			}
		}
	}
	resp.Dirs = []kmsg.DescribeLogDirsResponseDir{dir}
	r.Respond(resp)
}

// appendLogDirTopic adds a topic's partitions (all when want is nil, else
// those listed that exist); a topic with none is left out.
func appendLogDirTopic(out []kmsg.DescribeLogDirsResponseDirTopic, t *Topic, want []int32) []kmsg.DescribeLogDirsResponseDirTopic {
	dt := kmsg.NewDescribeLogDirsResponseDirTopic()
	dt.Topic = t.Name
	for _, p := range t.Partitions() {
		if p == nil || want != nil && !slices.Contains(want, p.Index) { // nil: hosted elsewhere
			continue
		}
		dp := kmsg.NewDescribeLogDirsResponseDirTopicPartition()
		dp.Partition, dp.Size = p.Index, p.size()
		dt.Partitions = append(dt.Partitions, dp)
	}
	if len(dt.Partitions) == 0 {
		return out
	}
	return append(out, dt)
}

// diskSpace returns the total and usable bytes of the file system holding
// dir, or -1, -1 when statfs fails.
func diskSpace(dir string) (total, usable int64) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return -1, -1
	}
	bsize := int64(st.Bsize)
	return int64(st.Blocks) * bsize, int64(st.Bavail) * bsize
}
