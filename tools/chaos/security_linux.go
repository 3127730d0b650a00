package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-broker/sluice/bench"
)

// Security modes of --security.
const (
	secPlaintext = "plaintext"
	secSASLSSL   = "sasl_ssl"
)

// The principals of a sasl_ssl run: nodes log in to each other as broker
// (SCRAM-SHA-512 on the inter-broker listener, PLAIN on the controller
// one), every client of the harness as chaos. Both are super users, so
// the workloads need no ACLs.
const (
	brokerUser, brokerPass = "broker", "broker-secret"
	clientUser, clientPass = "chaos", "chaos-secret"
)

// reauthMs is connections.max.reauth.ms of a sasl_ssl run: short, so
// every connection logs in again several times during the faults.
const reauthMs = 10000

// security is how a run's nodes and clients talk: plaintext (the zero
// value), or every listener SASL_SSL with no plaintext port.
type security struct {
	mode string
	// pki is the run's throwaway CA and broker certificate (sasl_ssl).
	pki bench.PKI
	// tls is the clients' TLS configuration: the run's CA as the only
	// root (nil for plaintext).
	tls *tls.Config
}

// newSecurity prepares mode under dir: for sasl_ssl a CA and one broker
// certificate valid for every address a node of the run can have.
func newSecurity(mode, dir string) (*security, error) {
	switch mode {
	case "", secPlaintext:
		return &security{mode: secPlaintext}, nil
	case secSASLSSL:
	default:
		return nil, fmt.Errorf("--security %q: want %s or %s", mode, secPlaintext, secSASLSSL)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var ips []net.IP
	for id := int32(1); id <= maxNodeID; id++ {
		ips = append(ips, net.ParseIP(nodeAddr(id)))
	}
	pki, err := bench.WritePKIFor(dir, bench.KeyP256, ips)
	if err != nil {
		return nil, err
	}
	ca, err := os.ReadFile(pki.CAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s: no certificate", pki.CAFile)
	}
	return &security{mode: mode, pki: pki, tls: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}, nil
}

// maxNodeID bounds the node ids (and so the addresses) of a run; the
// broker certificate of a sasl_ssl run covers all of them.
const maxNodeID = 64

func (s *security) secured() bool { return s != nil && s.mode == secSASLSSL }

// listeners is the listeners line of a node serving clients at client and
// the quorum at controller.
func (s *security) listeners(client, controller string) string {
	if s.secured() {
		return "listeners=SASL_SSL://" + client + ",CONTROLLER://" + controller
	}
	return "listeners=PLAINTEXT://" + client + ",CONTROLLER://" + controller
}

// nodeConfig is the security part of every node's properties: for
// sasl_ssl, the client listener is also the inter-broker one, both it and
// the controller listener are SASL_SSL, nodes log in with SCRAM-SHA-512
// and PLAIN, and sessions last reauthMs.
func (s *security) nodeConfig() []string {
	if !s.secured() {
		return nil
	}
	plain := fmt.Sprintf(`org.apache.kafka.common.security.plain.PlainLoginModule required username="%s" password="%s" user_%[1]s="%[2]s";`, brokerUser, brokerPass)
	scramLogin := fmt.Sprintf(`org.apache.kafka.common.security.scram.ScramLoginModule required username="%s" password="%s";`, brokerUser, brokerPass)
	return []string{
		"listener.security.protocol.map=SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL",
		"security.inter.broker.protocol=SASL_SSL",
		"sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
		"sasl.mechanism.controller.protocol=PLAIN",
		"sasl.enabled.mechanisms=SCRAM-SHA-512",
		"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=" + scramLogin,
		"listener.name.controller.sasl.enabled.mechanisms=PLAIN",
		"listener.name.controller.plain.sasl.jaas.config=" + plain,
		"ssl.keystore.type=PEM",
		"ssl.keystore.location=" + s.pki.KeystoreFile,
		"ssl.truststore.type=PEM",
		"ssl.truststore.location=" + s.pki.CAFile,
		"authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
		fmt.Sprintf("super.users=User:%s;User:%s", brokerUser, clientUser),
		fmt.Sprintf("connections.max.reauth.ms=%d", reauthMs),
	}
}

// formatArgs are the `sluice format` flags that put the SCRAM users in
// the bootstrap metadata.
func (s *security) formatArgs() []string {
	if !s.secured() {
		return nil
	}
	return []string{
		"--add-scram", fmt.Sprintf("SCRAM-SHA-512=[name=%s,password=%s]", brokerUser, brokerPass),
		"--add-scram", fmt.Sprintf("SCRAM-SHA-512=[name=%s,password=%s]", clientUser, clientPass),
	}
}

// opts are the TLS and SASL options of every client of the harness: TLS
// trusting the run's CA and a SCRAM-SHA-512 login as clientUser for
// sasl_ssl, none for plaintext.
func (s *security) opts() []kgo.Opt {
	if !s.secured() {
		return nil
	}
	return []kgo.Opt{kgo.DialTLSConfig(s.tls),
		kgo.SASL(scram.Auth{User: clientUser, Pass: clientPass}.AsSha512Mechanism())}
}

// clientOpts are seeds, opts and more.
func (s *security) clientOpts(seeds []string, more ...kgo.Opt) []kgo.Opt {
	return append(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, s.opts()...), more...)
}
