package testcluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-broker/sluice/metadata"
	"github.com/sluice-broker/sluice/security/sasl"
)

// TestClusterSASLSSL: three nodes with a SASL_SSL client listener beside
// the PLAINTEXT inter-broker one. A SCRAM-SHA-512 user made through one
// broker (forwarded to the controller) can log in on every broker; Metadata
// over SASL_SSL lists every broker at its SASL_SSL endpoint, so a franz-go
// client produces acks=all to an RF=3 topic and reads it back with no
// plaintext connection.
func TestClusterSASLSSL(t *testing.T) {
	certPEM, pool := selfSignedPEM(t)
	c := StartInProcess(t, 3,
		"listeners=PLAINTEXT://{PLAINTEXT},SASL_SSL://127.0.0.1:0,CONTROLLER://{CONTROLLER}",
		"inter.broker.listener.name=PLAINTEXT",
		"sasl.enabled.mechanisms=SCRAM-SHA-512",
		"ssl.keystore.type=PEM",
		"ssl.keystore.location="+certPEM,
		"offsets.topic.replication.factor=3",
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(c.Client())
	createScramUser(ctx, t, adm, "alice", "alice-secret", 4096)
	c.WaitFor(30*time.Second, "alice's credential on every broker", func() bool {
		for _, nd := range c.Nodes {
			if _, ok := nd.Broker().ScramCredential("alice", metadata.ScramSHA512); !ok {
				return false
			}
		}
		return true
	})

	var plaintext []string
	var secure []string
	for _, nd := range c.Nodes {
		plaintext = append(plaintext, nd.Addr)
		secure = append(secure, nd.ListenerAddr("SASL_SSL"))
	}
	tlsCfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	opts := []kgo.Opt{kgo.SeedBrokers(secure[0]),
		kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()),
		kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
			for _, p := range plaintext {
				if host == p {
					return nil, fmt.Errorf("dialed the PLAINTEXT listener %s", host)
				}
			}
			return (&tls.Dialer{Config: tlsCfg}).DialContext(ctx, network, host)
		}),
	}
	cl, err := kgo.NewClient(append(opts, kgo.DefaultProduceTopic("secure-rf3"), kgo.RequiredAcks(kgo.AllISRAcks()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 3, 3, nil, "secure-rf3"); err != nil {
		t.Fatal(err)
	}
	meta, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range meta.Brokers {
		if addr := net.JoinHostPort(b.Host, fmt.Sprint(b.Port)); addr != secure[b.NodeID-1] && !sameHostPort(addr, secure[b.NodeID-1]) {
			t.Fatalf("broker %d advertised %s on SASL_SSL, its listener is %s", b.NodeID, addr, secure[b.NodeID-1])
		}
	}
	if len(meta.Brokers) != 3 {
		t.Fatalf("metadata lists %d brokers", len(meta.Brokers))
	}
	for i := range 60 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 3), Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	cons, err := kgo.NewClient(append(opts, kgo.ConsumeTopics("secure-rf3"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for got := 0; got < 60; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 60", got)
		}
		got += fs.NumRecords()
	}
}

func sameHostPort(a, b string) bool {
	_, pa, _ := net.SplitHostPort(a)
	_, pb, _ := net.SplitHostPort(b)
	return pa == pb
}

// selfSignedPEM writes a self-signed certificate for 127.0.0.1 and its key
// as one PEM keystore file.
func selfSignedPEM(t *testing.T) (string, *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "broker"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	data := append(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})...)
	path := filepath.Join(t.TempDir(), "broker.pem")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return path, pool
}

// TestClusterSASLSSLOnlyNoPlaintext: three nodes whose only listeners
// are SASL_SSL, the broker one also the inter-broker listener
// (security.inter.broker.protocol) and the controller one mapped to
// SASL_SSL. The brokers log in to each other as User:broker (a super
// user) with PLAIN, or with SCRAM-SHA-512 from the bootstrap metadata
// (sluice format --add-scram), and to the controllers with PLAIN: the
// quorum forms, brokers register and heartbeat, followers fetch (acks=all
// with min.insync.replicas=3 succeeds, so every follower has the records)
// and transaction markers reach other brokers' partitions. No listener
// answers a plaintext Kafka request, the ISR stays full, and a follower
// Fetch sent as a principal without CLUSTER_ACTION is refused.
func TestClusterSASLSSLOnlyNoPlaintext(t *testing.T) {
	for _, mech := range []string{"PLAIN", "SCRAM-SHA-512"} {
		t.Run(mech, func(t *testing.T) { saslSSLOnly(t, mech) })
	}
}

func saslSSLOnly(t *testing.T, interBrokerMech string) {
	certPEM, pool := selfSignedPEM(t)
	jaas := `org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret" user_broker="broker-secret" user_admin="admin-secret";`
	tlsCfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	asAdmin := []kgo.Opt{kgo.DialTLSConfig(tlsCfg), kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism())}
	opts := InProcOptions{ClientOpts: asAdmin}
	if interBrokerMech != "PLAIN" {
		opts.Bootstrap = []metadata.Record{scramRecord(t, "broker", "broker-secret")}
	}
	c := StartInProcessWith(t, 3, opts,
		"listeners=SASL_SSL://{PLAINTEXT},CONTROLLER://{CONTROLLER}",
		"listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL",
		"security.inter.broker.protocol=SASL_SSL",
		"sasl.mechanism.inter.broker.protocol="+interBrokerMech,
		"sasl.mechanism.controller.protocol=PLAIN",
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
		"listener.name.sasl_ssl.plain.sasl.jaas.config="+jaas,
		`listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-secret";`,
		"listener.name.controller.sasl.enabled.mechanisms=PLAIN",
		"listener.name.controller.plain.sasl.jaas.config="+jaas,
		"ssl.keystore.type=PEM",
		"ssl.keystore.location="+certPEM,
		"ssl.truststore.type=PEM",
		"ssl.truststore.location="+certPEM,
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		"super.users=User:broker;User:admin",
		"offsets.topic.replication.factor=3",
		"transaction.state.log.replication.factor=3",
		"transaction.state.log.min.isr=2",
		"transaction.state.log.num.partitions=3",
		"share.coordinator.state.topic.num.partitions=3",
	)
	for _, nd := range c.Nodes {
		if a := nd.ListenerAddr("PLAINTEXT"); a != "" {
			t.Fatalf("node %d has a PLAINTEXT listener at %s", nd.ID, a)
		}
		for _, addr := range []string{nd.Addr, nd.ControllerAddr} {
			if plaintextAnswers(t, addr) {
				t.Fatalf("node %d answered a plaintext ApiVersions on %s", nd.ID, addr)
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	admin := c.Client()
	adm := kadm.NewClient(admin)
	createScramUser(ctx, t, adm, "alice", "alice-secret", 4096)
	if _, err := adm.CreateTopic(ctx, 3, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("3")}, "only-secure"); err != nil {
		t.Fatal(err)
	}
	acls := kadm.NewACLs().Allow("User:alice").AllowHosts("*").Topics("only-secure").
		ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead, kadm.OpWrite, kadm.OpDescribe)
	if res, err := adm.CreateACLs(ctx, acls); err != nil || len(res) == 0 || res[0].Err != nil {
		t.Fatalf("alice's ACLs: %v %+v", err, res)
	}
	// Brokers apply the metadata log on their own time, as Kafka's do: a
	// broker that has not applied the ACLs yet refuses alice's produce.
	c.WaitFor(30*time.Second, "alice's credential and ACLs on every broker", func() bool {
		for _, nd := range c.Nodes {
			if _, ok := nd.Broker().ScramCredential("alice", metadata.ScramSHA512); !ok || nd.Broker().ACLCount() < 3 {
				return false
			}
		}
		return true
	})

	asAlice := []kgo.Opt{kgo.SeedBrokers(c.Bootstrap()...), kgo.DialTLSConfig(tlsCfg),
		kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism())}
	alice, err := kgo.NewClient(append(asAlice, kgo.DefaultProduceTopic("only-secure"), kgo.RequiredAcks(kgo.AllISRAcks()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	for i := range 60 {
		if err := alice.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 3), Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d (acks=all, min.insync.replicas=3): %v", i, err)
		}
	}
	topics, err := adm.ListTopics(ctx, "only-secure")
	if err != nil {
		t.Fatal(err)
	}
	td := topics["only-secure"]
	for _, p := range td.Partitions {
		if len(p.ISR) != 3 {
			t.Fatalf("partition %d ISR %v after acks=all produces over SASL_SSL", p.Partition, p.ISR)
		}
	}

	// A follower's Fetch as alice, who has READ but not CLUSTER_ACTION.
	p0 := td.Partitions[0]
	follower := p0.Replicas[0]
	if follower == p0.Leader {
		follower = p0.Replicas[1]
	}
	fetch := kmsg.NewPtrFetchRequest()
	fetch.ReplicaID, fetch.ReplicaState.ID, fetch.ReplicaState.Epoch = follower, follower, -1
	fetch.MaxWaitMillis, fetch.MaxBytes = 0, 1<<20
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic, ft.TopicID = "only-secure", td.ID
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition, fp.CurrentLeaderEpoch, fp.PartitionMaxBytes = 0, -1, 1<<20
	ft.Partitions = append(ft.Partitions, fp)
	fetch.Topics = append(fetch.Topics, ft)
	fr, err := fetch.RequestWith(ctx, alice.Broker(int(p0.Leader)))
	if err != nil {
		t.Fatal(err)
	}
	if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 || fr.Topics[0].Partitions[0].ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("follower fetch as alice: %+v, want TOPIC_AUTHORIZATION_FAILED", fr.Topics)
	}

	// A transaction over partitions led by different brokers: the
	// coordinator's markers go to the other leaders over SASL_SSL.
	tx, err := kgo.NewClient(append(asAdmin, kgo.SeedBrokers(c.Bootstrap()...), kgo.DefaultProduceTopic("only-secure"),
		kgo.TransactionalID("only-secure-txn"), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	if err := tx.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for p := range int32(3) {
		if err := tx.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("txn")}).FirstErr(); err != nil {
			t.Fatalf("transactional produce to %d: %v", p, err)
		}
	}
	if err := tx.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	cons, err := kgo.NewClient(append(asAlice, kgo.ConsumeTopics("only-secure"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	committed := 0
	for got := 0; got < 63; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read committed %d of 63", got)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if string(r.Value) == "txn" {
				committed++
			}
		})
		got += fs.NumRecords()
	}
	if committed != 3 {
		t.Fatalf("read %d of the transaction's 3 records", committed)
	}

	// A share group: each share-partition's leader persists its state at
	// the share coordinator, on another broker for some, through the
	// franz-go client it makes over SASL_SSL.
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	gres := kmsg.NewIncrementalAlterConfigsRequestResource()
	gres.ResourceType, gres.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "ssg"
	gres.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "share.auto.offset.reset", Value: kmsg.StringPtr("earliest")}}
	alter.Resources = []kmsg.IncrementalAlterConfigsRequestResource{gres}
	if resp, err := alter.RequestWith(ctx, admin); err != nil || resp.Resources[0].ErrorCode != 0 {
		t.Fatalf("share group config: %v %+v", err, resp)
	}
	sc := c.Client(kgo.ShareGroup("ssg"), kgo.ConsumeTopics("only-secure"))
	shared := map[[2]int64]bool{}
	for len(shared) < 63 { // 60 records and the transaction's 3
		fs := sc.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("share group read %d of 63 records", len(shared))
		}
		fs.EachRecord(func(r *kgo.Record) { shared[[2]int64{int64(r.Partition), r.Offset}] = true })
	}
	sc.MarkAcks(kgo.AckAccept)
	if err := sc.FlushAcks(ctx); err != nil {
		t.Fatal(err)
	}
	// The acknowledgements reach the share coordinators: every
	// share-partition's persisted start offset is its end.
	ends, err := adm.ListEndOffsets(ctx, "only-secure")
	if err != nil {
		t.Fatal(err)
	}
	c.WaitFor(30*time.Second, "every share-partition's start offset persisted at its end", func() bool {
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		g := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		g.GroupID = "ssg"
		g.Topics = []kmsg.DescribeShareGroupOffsetsRequestGroupTopic{{Topic: "only-secure", Partitions: []int32{0, 1, 2}}}
		req.Groups = append(req.Groups, g)
		resp, err := req.RequestWith(ctx, admin)
		if err != nil || len(resp.Groups) != 1 || len(resp.Groups[0].Topics) != 1 {
			return false
		}
		for _, p := range resp.Groups[0].Topics[0].Partitions {
			if end, ok := ends.Lookup("only-secure", p.Partition); !ok || p.StartOffset != end.Offset {
				return false
			}
		}
		return len(resp.Groups[0].Topics[0].Partitions) == 3
	})
}

// plaintextAnswers reports whether addr answers an ApiVersions request
// sent without TLS.
func plaintextAnswers(t *testing.T, addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(0)
	if _, err := conn.Write(kmsg.NewRequestFormatter().AppendRequest(nil, req, 7)); err != nil {
		return false
	}
	var hdr [8]byte
	if _, err := io.ReadFull(conn, hdr[:]); err != nil {
		return false
	}
	return binary.BigEndian.Uint32(hdr[4:]) == 7
}

// scramRecord is user's SCRAM-SHA-512 credential as sluice format
// --add-scram writes it.
func scramRecord(t *testing.T, user, password string) metadata.Record {
	salt := []byte("bootstrap-salt-for-" + user)
	salted, err := sasl.SaltPassword(sasl.ScramSHA512, password, salt, 4096)
	if err != nil {
		t.Fatal(err)
	}
	c, err := sasl.NewScramCredential(sasl.ScramSHA512, salt, salted, 4096)
	if err != nil {
		t.Fatal(err)
	}
	return metadata.UserScramCredentialRecord{Name: user, Mechanism: metadata.ScramSHA512, Salt: c.Salt,
		StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}
}

// TestReadmeSASLSSLClusterRuns: the README's three-node SASL_SSL example,
// run as three `sluice serve` processes: its security lines as written
// (addresses, data dirs and store paths are the test's), every node
// formatted with the README's `sluice format --add-scram` flags. The
// brokers log in to each other with the bootstrapped SCRAM-SHA-512
// credential and to the controllers with PLAIN; the admin creates alice
// and her ACLs over SASL_SSL; alice produces acks=all to an RF=3 topic
// with min.insync.replicas=3 through a SIGKILL and restart of one node
// (its fetchers and raft connections dialled again over SASL_SSL) and
// reads every record back.
func TestReadmeSASLSSLClusterRuns(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, _ := strings.Cut(string(data), "# node1.properties (node2, 3: node.id and the addresses change)\n")
	block, _, _ = strings.Cut(block, "```")
	_, format, _ := strings.Cut(string(data), "sluice format --cluster-id")
	format, _, _ = strings.Cut(format, "cat > client.properties")
	formatArgs := regexp.MustCompile(`--add-scram '([^']*)'`).FindAllStringSubmatch(format, -1)
	if block == "" || len(formatArgs) != 2 {
		t.Fatalf("README's example not found (%d --add-scram flags)", len(formatArgs))
	}
	certPEM, pool := selfSignedPEM(t)
	extra := []string{}
	for _, l := range strings.Split(block, "\n") {
		k, _, _ := strings.Cut(l, "=")
		switch k {
		case "", "process.roles", "node.id", "listeners", "advertised.listeners", "controller.quorum.voters", "log.dirs",
			"ssl.keystore.location", "ssl.truststore.location":
			continue // the harness's or the test's
		}
		extra = append(extra, l)
	}
	extra = append(extra, "listeners=SASL_SSL://{PLAINTEXT},CONTROLLER://{CONTROLLER}",
		"ssl.keystore.location="+certPEM, "ssl.truststore.location="+certPEM)
	var flags []string
	for _, m := range formatArgs {
		flags = append(flags, "--add-scram", m[1])
	}
	tlsCfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}
	asAdmin := []kgo.Opt{kgo.DialTLSConfig(tlsCfg), kgo.SASL(scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism())}
	c := Start(t, 3, Options{Extra: extra, FormatArgs: flags, ClientOpts: asAdmin})

	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	adm := kadm.NewClient(c.Client())
	createScramUser(ctx, t, adm, "alice", "alice-secret", 8192)
	if _, err := adm.CreateTopic(ctx, 3, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("3")}, "readme"); err != nil {
		t.Fatal(err)
	}
	acls := kadm.NewACLs().Allow("User:alice").AllowHosts("*").Topics("readme").
		ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead, kadm.OpWrite, kadm.OpDescribe)
	if res, err := adm.CreateACLs(ctx, acls); err != nil || len(res) == 0 || res[0].Err != nil {
		t.Fatalf("alice's ACLs: %v %+v", err, res)
	}
	waitForACLsOnEveryNode(ctx, t, c, 3)
	alice := []kgo.Opt{kgo.SeedBrokers(c.Bootstrap()...), kgo.DialTLSConfig(tlsCfg),
		kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism())}
	prod, err := kgo.NewClient(append(alice, kgo.DefaultProduceTopic("readme"), kgo.RequiredAcks(kgo.AllISRAcks()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			if err := prod.ProduceSync(ctx, &kgo.Record{Partition: int32(i % 3), Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
	}
	produce(0, 30)
	victim := c.Nodes[2]
	victim.Kill()
	victim.Restart()
	c.WaitFor(60*time.Second, "every partition's ISR full again after the restart", func() bool {
		td, err := adm.ListTopics(ctx, "readme")
		if err != nil {
			return false
		}
		for _, p := range td["readme"].Partitions {
			if len(p.ISR) != 3 {
				return false
			}
		}
		return true
	})
	produce(30, 60) // min.insync.replicas=3: the restarted node fetches again
	cons, err := kgo.NewClient(append(alice, kgo.ConsumeTopics("readme"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	for got := 0; got < 60; {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of 60", got)
		}
		got += fs.NumRecords()
	}
}

// createScramUser creates (or updates) a SCRAM-SHA-512 user through adm.
func createScramUser(ctx context.Context, t testing.TB, adm *kadm.Client, user, password string, iterations int32) {
	t.Helper()
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: user, Mechanism: kadm.ScramSha512, Iterations: iterations, Password: password}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("creating SCRAM user %s: %v", user, err)
	}
}

// waitForACLsOnEveryNode waits until each node of c answers DescribeACLs
// with want bindings: brokers apply the metadata log asynchronously, so an
// ACL the controller committed may not yet be in force on every broker.
func waitForACLsOnEveryNode(ctx context.Context, t testing.TB, c *Cluster, want int) {
	t.Helper()
	var admins []*kadm.Client
	for _, nd := range c.Nodes {
		admins = append(admins, kadm.NewClient(c.clientOf(t, nd)))
	}
	c.WaitFor(30*time.Second, fmt.Sprintf("%d ACLs on every node", want), func() bool {
		for _, a := range admins {
			res, err := a.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow().AllowHosts().Operations(kadm.OpAny))
			if err != nil || len(res) == 0 || res[0].Err != nil || len(res[0].Described) < want {
				return false
			}
		}
		return true
	})
}
