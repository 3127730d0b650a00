package testcluster

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/tools/chaos/check"
)

// TestDiskFullStopsBroker fills the data dir of a broker that leads a
// partition and follows the others, under an idempotent acks=all producer
// (RF=3, min.insync.replicas=2). The first log that fails on ENOSPC stops
// the broker through the controlled shutdown, as Kafka halts when its last
// log dir goes offline: the process exits with the failure, the other two
// take over its leadership, and no acknowledged record is lost. Once the
// disk has room again the broker restarts, recovers its torn tails and
// rejoins every ISR.
//
// The data dir is a 32 MiB tmpfs, so the test needs root.
func TestDiskFullStopsBroker(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounts a tmpfs: needs root")
	}
	const (
		topic      = "filling"
		partitions = 3
	)
	c := Start(t, 4, Options{
		Roles: []string{"broker,controller", "broker,controller", "broker,controller", "broker"},
		Extra: []string{"min.insync.replicas=2"},
	})
	full := c.Node(4)
	full.Stop()
	mountTmpfs(t, full, 32)
	full.Restart()
	c.WaitBrokers(4, 30*time.Second)

	// Broker 4 leads partition 0 and follows 1 and 2.
	createAssigned(t, c, topic, [][]int32{{4, 1, 2}, {1, 2, 4}, {2, 4, 1}})
	waitAssignedISR(t, c, topic, partitions, 3)

	h := check.NewHistory()
	stopProducing := produceRoundRobin(c, topic, partitions, h)
	time.Sleep(time.Second)
	filler := fillDir(t, full.DataDir)

	err, exited := full.Wait(60 * time.Second)
	if !exited {
		t.Fatalf("broker 4 still runs with a full data dir:\n%s", full.Log())
	}
	if !strings.Contains(full.Log(), "data dir failed") {
		t.Errorf("broker 4 exited (%v) without naming the failed data dir:\n%s", err, full.Log())
	}
	t.Logf("broker 4 exited: %v", err)
	waitUntil(t, 30*time.Second, "leaders on the other brokers", func() bool {
		leaders, _ := topicLeaders(t, c, c.Node(1), topic)
		for _, l := range leaders {
			if l < 0 || l == 4 {
				return false
			}
		}
		return len(leaders) == partitions
	})
	time.Sleep(time.Second) // acknowledged while broker 4 is away

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	full.Restart()
	waitAssignedISR(t, c, topic, partitions, 3)
	stopProducing()

	logs := consumeAll(t, c, topic, partitions)
	an := h.Check(logs, nil)
	sent, acked, failed := h.Counts()
	t.Logf("records: sent %d, acked %d, failed %d", sent, acked, failed)
	reportAnomalies(t, an)
	if acked == 0 {
		t.Fatal("nothing was acknowledged")
	}
}

// mountTmpfs moves the stopped node's data dir onto a tmpfs of sizeMB,
// unmounted when the test ends (after the node is killed).
func mountTmpfs(t *testing.T, nd *Node, sizeMB int) {
	t.Helper()
	saved := t.TempDir()
	if out, err := exec.Command("cp", "-a", nd.DataDir+"/.", saved).CombinedOutput(); err != nil {
		t.Fatalf("save data dir: %v %s", err, out)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.Itoa(sizeMB)+"m", "tmpfs", nd.DataDir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v %s", err, out)
	}
	t.Cleanup(func() {
		nd.Kill()
		exec.Command("umount", "-l", nd.DataDir).Run()
	})
	if out, err := exec.Command("cp", "-a", saved+"/.", nd.DataDir).CombinedOutput(); err != nil {
		t.Fatalf("restore data dir: %v %s", err, out)
	}
}

// fillDir writes zeros into a file in dir until the file system is full
// and returns the file's path.
func fillDir(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return path
			}
			t.Fatalf("fill %s: %v", dir, err)
		}
	}
}

// createAssigned creates topic with the given replicas per partition.
func createAssigned(t *testing.T, c *Cluster, topic string, replicas [][]int32) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 20000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	for p, rs := range replicas {
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = int32(p), rs
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctxT(t, 30*time.Second), c.Client())
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	if code := resp.Topics[0].ErrorCode; code != 0 {
		t.Fatalf("create %s: error %d", topic, code)
	}
}

// waitAssignedISR waits until every partition of topic has a leader and
// n replicas in its ISR, as node 1 sees it.
func waitAssignedISR(t *testing.T, c *Cluster, topic string, partitions, n int) {
	t.Helper()
	waitUntil(t, 60*time.Second, "a full ISR", func() bool {
		leaders, isrs := topicLeaders(t, c, c.Node(1), topic)
		if len(leaders) != partitions {
			return false
		}
		for p, l := range leaders {
			if l < 0 || len(isrs[p]) != n {
				return false
			}
		}
		return true
	})
}
