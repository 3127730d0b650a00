package testcluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-broker/sluice/metadata"
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
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-secret"}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
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
