package compare

import (
	"strings"
	"testing"

	"github.com/sluice-broker/sluice/bench"
)

// TestTLSMarkdownRatios: the TLS tables show each figure's median and
// range per broker with Sluice ÷ Kafka, leave failed runs out, and give
// each broker's TLS ÷ plaintext from its own runs.
func TestTLSMarkdownRatios(t *testing.T) {
	o := tlsOptions{Brokers: []BrokerKind{Kafka, Sluice}, Rounds: 3, Command: "benchcompare tls", KeyType: bench.KeyRSA2048,
		Only: []string{"produce", "connect-scram"}}
	rep := &tlsReport{Options: o, Workloads: tlsWorkloads(o)}
	if len(rep.Workloads) != 3 {
		t.Fatalf("workloads %+v", rep.Workloads)
	}
	produce := func(w string, b BrokerKind, mbps, cpu float64, load string) tlsRun {
		return tlsRun{Workload: w, Broker: b, LoadAvg: load, CPUSeconds: cpu, ClientCPU: cpu,
			Result: &bench.Result{Produce: bench.Throughput{Bytes: int64(mbps * 1e7), MBPerSec: mbps}}}
	}
	rep.Runs = []tlsRun{
		produce("produce-plaintext", Kafka, 200, 4, "3.00 1 1"),
		produce("produce-plaintext", Kafka, 100, 4, "5.00 1 1"),
		produce("produce-plaintext", Kafka, 300, 4, "4.00 1 1"),
		produce("produce-plaintext", Sluice, 400, 2, "2.00 1 1"),
		produce("produce-ssl", Kafka, 100, 4, "2.50 1 1"),
		produce("produce-ssl", Sluice, 300, 3, "2.50 1 1"),
		{Workload: "produce-ssl", Broker: Sluice, Err: "broker went away", Result: &bench.Result{}},
		{Workload: "connect-scram", Broker: Kafka, CPUSeconds: 2, Connect: &bench.ConnectResult{Connections: 200, PerSec: 20, TLS: "TLS 1.3 TLS_AES_256_GCM_SHA384 X25519"}},
		{Workload: "connect-scram", Broker: Sluice, CPUSeconds: 1, Connect: &bench.ConnectResult{Connections: 1000, PerSec: 100, TLS: "TLS 1.3 TLS_AES_128_GCM_SHA256 X25519"}},
	}
	var b strings.Builder
	rep.writeMarkdown(&b)
	md := b.String()
	for _, want := range []string{
		"load average at the runs' starts 2.0–5.0 (median 2.8, 1-minute)",
		"Kafka 4.4.0 TLS 1.3 TLS_AES_256_GCM_SHA384 X25519, Sluice TLS 1.3 TLS_AES_128_GCM_SHA256 X25519",
		"| produce MB/s | 200 <sub>100–300</sub> | 400 | 2.00× |",
		"| broker CPU s per GB | 2 <sub>1.33–4</sub> | 0.5 | 0.25× |",
		"| produce MB/s | 100 | 300 | 3.00× |", // the failed run is left out
		"| connections/s | 20 | 100 | 5.00× |",
		"| broker CPU ms per connection | 10 | 1 | 0.10× |",
		"| produce | produce MB/s | 0.50× | 0.75× |",
		"| produce | broker CPU s per GB | 2.00× | 2.00× |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

// TestSecurePropsListeners: both brokers get the three listeners and the
// same PEM keystore; Kafka also its controller listener, protocol map and
// the SCRAM login module entry its SASL listener needs.
func TestSecurePropsListeners(t *testing.T) {
	pki := bench.PKI{KeystoreFile: "/tmp/ks.pem"}
	s := secureProps(Sluice, pki, 1, 2, 3, 4)
	if !strings.Contains(s, "listeners=PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:3,SASL_SSL://127.0.0.1:4\n") ||
		!strings.Contains(s, "ssl.keystore.location=/tmp/ks.pem\n") || !strings.Contains(s, "log.segment.delete.delay.ms=0\n") ||
		strings.Contains(s, "CONTROLLER") {
		t.Fatalf("sluice:\n%s", s)
	}
	k := secureProps(Kafka, pki, 1, 2, 3, 4)
	for _, want := range []string{
		"listeners=PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:3,SASL_SSL://127.0.0.1:4,CONTROLLER://127.0.0.1:2\n",
		"advertised.listeners=PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:3,SASL_SSL://127.0.0.1:4\n",
		"listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_SSL:SASL_SSL\n",
		"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=",
		"log.segment.delete.delay.ms=0\n",
	} {
		if !strings.Contains(k, want) {
			t.Errorf("kafka lacks %q:\n%s", want, k)
		}
	}
}

// TestTLSListenerOrderAlternates: odd rounds run PLAINTEXT first, even
// rounds SSL first; connection workloads keep their place.
func TestTLSListenerOrderAlternates(t *testing.T) {
	ws := tlsWorkloads(tlsOptions{Only: []string{"produce", "catch-up", "connect-ssl"}})
	names := func(ws []tlsWorkload) string {
		var ns []string
		for _, w := range ws {
			ns = append(ns, w.Name)
		}
		return strings.Join(ns, " ")
	}
	if got := names(listenerOrder(ws, 1)); got != "produce-plaintext produce-ssl catch-up-plaintext catch-up-ssl connect-ssl" {
		t.Fatalf("round 1: %s", got)
	}
	if got := names(listenerOrder(ws, 2)); got != "produce-ssl produce-plaintext catch-up-ssl catch-up-plaintext connect-ssl" {
		t.Fatalf("round 2: %s", got)
	}
	if names(ws) != names(listenerOrder(ws, 1)) {
		t.Fatal("listenerOrder changed its argument")
	}
}
