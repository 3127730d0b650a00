package server_test

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/internal/testbroker"
	"github.com/sluice-broker/sluice/storage"
)

// TestFetchedRegionsAreReleasedOnEveryPath: a fetch answer holds the
// segment descriptors of its records until the network layer releases it
// (storage.Region). With 4 cached descriptors and fetches of 6 partitions,
// so that descriptors are evicted while their records are in flight, every
// backend, plaintext and TLS, releases each answer exactly once whether it
// was sent, the client closed the connection before it was sent or while
// it was being sent, or it was a parked fetch answered after the client
// left or at shutdown: consumers read every record, no Region is released
// twice (that panics), and once the broker has stopped no descriptor is
// left open or counted.
func TestFetchedRegionsAreReleasedOnEveryPath(t *testing.T) {
	storage.SetMaxOpenLogFiles(4)
	t.Cleanup(func() { storage.SetMaxOpenLogFiles(4096) })
	pki := newPKI(t)
	for _, backend := range netBackends(t) {
		t.Run(backend, func(t *testing.T) {
			_, baseline := storage.OpenLogFiles()
			tb := testbroker.StartNet(t, backend, set(
				"listeners", "PLAINTEXT://127.0.0.1:0,SECURE://127.0.0.1:0",
				"listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,SECURE:SSL",
				"ssl.keystore.type", "PKCS12", "ssl.keystore.location", pki.keyP12, "ssl.keystore.password", "ks-pass",
			))
			plain, secure := tb.ListenerAddr("PLAINTEXT"), tb.ListenerAddr("SECURE")
			tlsOpt := kgo.DialTLSConfig(pki.clientTLS(false))
			const parts, perPart = 6, 200
			produceSpread(t, "rel", parts, perPart, kgo.SeedBrokers(plain))
			consumeAll(t, "rel", parts*perPart, kgo.SeedBrokers(plain))
			consumeAll(t, "rel", parts*perPart, kgo.SeedBrokers(secure), tlsOpt)

			dialPlain := func() net.Conn { return dialRaw(t, plain, nil) }
			dialTLS := func() net.Conn { return dialRaw(t, secure, pki.clientTLS(false)) }
			for _, dial := range []func() net.Conn{dialPlain, dialTLS} {
				for range 10 {
					abandonFetch(t, dial(), parts, 0, 0, 0) // closed before or during the send
					abandonFetch(t, dial(), parts, 0, 0, 64)
				}
				abandonFetch(t, dial(), parts, perPart, 10_000, 0) // parked, then the client leaves
			}
			produceSpread(t, "rel", parts, 1, kgo.SeedBrokers(plain)) // answers the parked fetches
			parked := dialPlain()
			abandonFetch(t, parked, parts, perPart+1, 30_000, -1) // parked until shutdown
			parkedTLS := dialTLS()
			abandonFetch(t, parkedTLS, parts, perPart+1, 30_000, -1)
			dataDir := tb.Config.DataDir
			tb.Stop(t)
			parked.Close()
			parkedTLS.Close()

			if _, lending := storage.OpenLogFiles(); lending != baseline {
				t.Fatalf("%d descriptors still held by unreleased Regions after shutdown (%d before)", lending-baseline, baseline)
			}
			if n := openLogDescriptors(t, dataDir); n != 0 {
				t.Fatalf("%d .log descriptors under the data directory open after shutdown", n)
			}
		})
	}
}

// produceSpread produces n 4 KiB records to each of the topic's parts
// partitions, creating the topic first if needed.
func produceSpread(t *testing.T, topic string, parts, n int, opts ...kgo.Opt) {
	t.Helper()
	ctx := ctxT(t)
	cl, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, int32(parts), 1, nil, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		t.Fatal(err)
	}
	for p := range parts {
		for range n {
			cl.Produce(ctx, &kgo.Record{Partition: int32(p), Value: make([]byte, 4096)}, nil)
		}
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

// consumeAll reads n records of topic from the start with large fetches.
func consumeAll(t *testing.T, topic string, n int, opts ...kgo.Opt) {
	t.Helper()
	ctx := ctxT(t)
	cl, err := kgo.NewClient(append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(16<<20), kgo.FetchMaxPartitionBytes(1<<20))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for got := 0; got < n; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", got, n)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		got += fs.NumRecords()
	}
}

func dialRaw(t *testing.T, addr string, cfg *tls.Config) net.Conn {
	t.Helper()
	var c net.Conn
	var err error
	if cfg != nil {
		c, err = tls.Dial("tcp", addr, cfg)
	} else {
		c, err = net.Dial("tcp", addr)
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// abandonFetch sends a fetch of every partition of "rel" from offset
// (waiting up to waitMs for a byte) on c, reads readFirst bytes of the
// answer, and closes c; readFirst < 0 leaves c open for the caller.
func abandonFetch(t *testing.T, c net.Conn, parts int, offset int64, waitMs int32, readFirst int) {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID = -1
	req.MaxWaitMillis = waitMs
	req.MinBytes = 1
	req.MaxBytes = 16 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "rel"
	for p := range parts {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = int32(p)
		rp.FetchOffset = offset
		rp.PartitionMaxBytes = 1 << 20
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	if _, err := c.Write(formatter.AppendRequest(nil, req, 1)); err != nil {
		t.Fatal(err)
	}
	if readFirst < 0 {
		return
	}
	if readFirst > 0 {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Read(make([]byte, readFirst)); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
}

// openLogDescriptors counts this process's descriptors open on .log files
// under dir (deleted ones included).
func openLogDescriptors(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	n := 0
	for _, e := range ents {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil && strings.HasPrefix(target, dir) && strings.Contains(target, ".log") {
			n++
		}
	}
	return n
}
