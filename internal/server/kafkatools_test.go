package server_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-broker/sluice/internal/testbroker"
)

// runTool runs one of Kafka's command-line tools (its main class) with the
// jars of $SLUICE_KAFKA_CLASSPATH, feeding stdin; it returns the combined
// output and whether the tool succeeded.
func runTool(t *testing.T, stdin, class string, args ...string) (string, bool) {
	t.Helper()
	cmd := exec.Command("java", append([]string{"-cp", os.Getenv("SLUICE_KAFKA_CLASSPATH"), class}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

func mustTool(t *testing.T, stdin, class string, args ...string) string {
	t.Helper()
	out, ok := runTool(t, stdin, class, args...)
	if !ok {
		t.Fatalf("%s %s failed:\n%s", class, strings.Join(args, " "), tail(out, 15))
	}
	return out
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func writeProps(t *testing.T, dir, name string, kv ...string) string {
	var b strings.Builder
	for i := 0; i < len(kv); i += 2 {
		fmt.Fprintf(&b, "%s=%s\n", kv[i], kv[i+1])
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestKafkaToolsSecurity runs Kafka 4.4's own tools, which are Java
// clients, against SASL_SSL and mutual-TLS listeners with client
// properties files: kafka-configs creates a SCRAM-SHA-512 user (the
// command in the README), kafka-topics, the console producer and the
// console consumer use it; a wrong password and a client without a
// certificate are refused.
//
//	SLUICE_KAFKA_CLASSPATH='/work/main/interop/java/target/deps/*' \
//	  go test ./internal/server -run TestKafkaToolsSecurity
func TestKafkaToolsSecurity(t *testing.T) {
	if os.Getenv("SLUICE_KAFKA_CLASSPATH") == "" {
		t.Skip("set SLUICE_KAFKA_CLASSPATH to Kafka's jars to run Kafka's tools")
	}
	pki := newPKI(t)
	clientPEM := pki.write(t, "client.pem", clientKeyPEM(t, pki))
	tb := testbroker.Start(t, set(
		"listeners", "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0,MTLS://127.0.0.1:0",
		"listener.security.protocol.map", "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,MTLS:SSL",
		"sasl.enabled.mechanisms", "SCRAM-SHA-512",
		"ssl.keystore.location", pki.keyPEM,
		"listener.name.mtls.ssl.client.auth", "required",
		"listener.name.mtls.ssl.truststore.location", pki.caPEM,
	))
	dir := t.TempDir()
	mustTool(t, "", "org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", tb.Addr, "--alter",
		"--entity-type", "users", "--entity-name", "alice", "--add-config", "SCRAM-SHA-512=[iterations=8192,password=alice-secret]")
	// kafka-configs describes users' quotas too (DescribeClientQuotas,
	// which the quota work serves); until then check through kadm.
	switch out, ok := runTool(t, "", "org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", tb.Addr, "--describe", "--entity-type", "users"); {
	case ok && strings.Contains(out, "SCRAM-SHA-512=iterations=8192"):
	case strings.Contains(out, "does not support DESCRIBE_CLIENT_QUOTAS"):
		d, err := tb.Admin(t).DescribeUserSCRAMs(ctxT(t), "alice")
		if err != nil || len(d["alice"].CredInfos) != 1 || d["alice"].CredInfos[0].Iterations != 8192 {
			t.Fatalf("alice's credentials: %+v %v", d, err)
		}
	default:
		t.Fatalf("kafka-configs --describe users:\n%s", tail(out, 10))
	}

	scramProps := func(pass string) string {
		return writeProps(t, dir, "scram-"+pass+".properties",
			"security.protocol", "SASL_SSL", "sasl.mechanism", "SCRAM-SHA-512",
			"sasl.jaas.config", `org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="`+pass+`";`,
			"ssl.truststore.type", "PEM", "ssl.truststore.location", pki.caPEM)
	}
	good := scramProps("alice-secret")
	saslAddr := tb.ListenerAddr("SASL_SSL")
	mustTool(t, "", "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", saslAddr, "--command-config", good,
		"--create", "--topic", "cli-secure", "--partitions", "1")
	mustTool(t, "one\ntwo\nthree\n", "org.apache.kafka.tools.ConsoleProducer", "--bootstrap-server", saslAddr,
		"--producer.config", good, "--topic", "cli-secure")
	out := mustTool(t, "", "org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", saslAddr,
		"--consumer.config", good, "--topic", "cli-secure", "--from-beginning", "--max-messages", "3", "--timeout-ms", "20000")
	if !strings.Contains(out, "one\ntwo\nthree") {
		t.Fatalf("console consumer over SASL_SSL:\n%s", tail(out, 10))
	}
	if out, ok := runTool(t, "", "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", saslAddr, "--command-config", scramProps("wrong"), "--list"); ok || !strings.Contains(out, "SaslAuthenticationException") {
		t.Fatalf("a wrong password was not refused with SaslAuthenticationException:\n%s", tail(out, 10))
	}

	mtlsAddr := tb.ListenerAddr("MTLS")
	withCert := writeProps(t, dir, "mtls.properties", "security.protocol", "SSL",
		"ssl.keystore.type", "PEM", "ssl.keystore.location", clientPEM,
		"ssl.truststore.type", "PEM", "ssl.truststore.location", pki.caPEM)
	if out := mustTool(t, "", "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", mtlsAddr, "--command-config", withCert, "--list"); !strings.Contains(out, "cli-secure") {
		t.Fatalf("kafka-topics over mutual TLS:\n%s", tail(out, 10))
	}
	noCert := writeProps(t, dir, "nocert.properties", "security.protocol", "SSL", "ssl.truststore.type", "PEM", "ssl.truststore.location", pki.caPEM,
		"request.timeout.ms", "5000", "default.api.timeout.ms", "10000")
	if out, ok := runTool(t, "", "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", mtlsAddr, "--command-config", noCert, "--list"); ok {
		t.Fatalf("kafka-topics without a client certificate was served:\n%s", tail(out, 10))
	}
}

// clientKeyPEM is the client's key and certificate as one PEM file (Kafka's
// PEM keystore file).
func clientKeyPEM(t *testing.T, p *testPKI) []byte {
	der, err := x509MarshalPKCS8(p.client.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	return append(pemOf("PRIVATE KEY", der), pemOf("CERTIFICATE", p.client.Certificate[0])...)
}
