package main

import (
	"crypto/tls"
	"os"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
)

// properties reads a server.properties file into a map.
func properties(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			out[k] = v
		}
	}
	return out
}

// TestSASLSSLNodeConfig: a sasl_ssl node's properties name no plaintext
// listener, put the client, inter-broker and controller listeners on
// SASL_SSL with SCRAM-SHA-512 and PLAIN, point at the run's PKI files and
// set a short session lifetime; its format adds both SCRAM users. A
// plaintext node keeps PLAINTEXT and no security keys.
func TestSASLSSLNodeConfig(t *testing.T) {
	sec, err := newSecurity(secSASLSSL, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	nd := &node{id: 2, dir: t.TempDir(), dataDir: "/nonexistent", sec: sec}
	if err := nd.writeConfig("broker,controller", "controller.quorum.voters=1@x:9093", brokerConfig("std")); err != nil {
		t.Fatal(err)
	}
	p := properties(t, nd.config)
	want := map[string]string{
		"listeners":                                        "SASL_SSL://" + nd.addr() + ",CONTROLLER://" + nd.controllerAddr(),
		"listener.security.protocol.map":                   "SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL",
		"security.inter.broker.protocol":                   "SASL_SSL",
		"sasl.mechanism.inter.broker.protocol":             "SCRAM-SHA-512",
		"sasl.mechanism.controller.protocol":               "PLAIN",
		"sasl.enabled.mechanisms":                          "SCRAM-SHA-512",
		"listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
		"ssl.keystore.location":                            sec.pki.KeystoreFile,
		"ssl.truststore.location":                          sec.pki.CAFile,
		"connections.max.reauth.ms":                        "10000",
	}
	for k, v := range want {
		if p[k] != v {
			t.Errorf("%s=%q, want %q", k, p[k], v)
		}
	}
	for k, v := range p {
		if strings.Contains(v, "PLAINTEXT") {
			t.Errorf("%s=%s names a plaintext listener", k, v)
		}
	}
	for _, f := range []string{sec.pki.KeystoreFile, sec.pki.CAFile} {
		if _, err := os.Stat(f); err != nil {
			t.Error(err)
		}
	}
	if args := strings.Join(sec.formatArgs(), " "); !strings.Contains(args, "name=broker,") || !strings.Contains(args, "name=chaos,") {
		t.Errorf("format args %q: want SCRAM users broker and chaos", args)
	}

	plain, err := newSecurity("", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	nd = &node{id: 1, dir: t.TempDir(), dataDir: "/nonexistent", sec: plain}
	if err := nd.writeConfig("broker,controller", "controller.quorum.voters=1@x:9093", nil); err != nil {
		t.Fatal(err)
	}
	p = properties(t, nd.config)
	if !strings.HasPrefix(p["listeners"], "PLAINTEXT://") || p["security.inter.broker.protocol"] != "" || len(plain.formatArgs()) != 0 {
		t.Errorf("plaintext node: listeners=%s, inter-broker %q, format %v", p["listeners"], p["security.inter.broker.protocol"], plain.formatArgs())
	}
	if _, err := newSecurity("ssl", t.TempDir()); err == nil {
		t.Error("--security ssl accepted")
	}
}

// TestSASLSSLClientOpts: the harness's clients of a sasl_ssl run dial TLS
// trusting the run's CA and log in with SCRAM-SHA-512; a plaintext run's
// have neither. (Making a client dials nothing.)
func TestSASLSSLClientOpts(t *testing.T) {
	sec, err := newSecurity(secSASLSSL, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(sec.clientOpts([]string{nodeAddr(1) + ":9092"})...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if tc, _ := cl.OptValue(kgo.DialTLSConfig).(*tls.Config); tc == nil || tc.RootCAs == nil || !tc.RootCAs.Equal(sec.tls.RootCAs) {
		t.Errorf("TLS config %v: want one trusting the run's CA", tc)
	}
	mechs, _ := cl.OptValue(kgo.SASL).([]sasl.Mechanism)
	if len(mechs) != 1 || mechs[0].Name() != "SCRAM-SHA-512" {
		t.Errorf("SASL mechanisms %v, want SCRAM-SHA-512", mechs)
	}

	plain, _ := newSecurity(secPlaintext, t.TempDir())
	pc, err := kgo.NewClient(plain.clientOpts([]string{nodeAddr(1) + ":9092"})...)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if tc, _ := pc.OptValue(kgo.DialTLSConfig).(*tls.Config); tc != nil {
		t.Error("plaintext client dials TLS")
	}
	if mechs, _ := pc.OptValue(kgo.SASL).([]sasl.Mechanism); len(mechs) != 0 {
		t.Errorf("plaintext client logs in with %v", mechs)
	}
}
