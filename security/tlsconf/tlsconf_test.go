package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"software.sslmate.com/src/go-pkcs12"
)

func keyPair(t *testing.T) (*ecdsa.PrivateKey, *x509.Certificate, []byte, []byte) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "b"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	kder, _ := x509.MarshalPKCS8PrivateKey(key)
	return key, cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

func getter(m map[string]string) Getter { return func(k string) string { return m[k] } }

func TestStores(t *testing.T) {
	key, cert, certPEM, keyPEM := keyPair(t)
	dir := t.TempDir()
	pemFile := filepath.Join(dir, "ks.pem")
	os.WriteFile(pemFile, append(keyPEM, certPEM...), 0o600)
	p12, _ := pkcs12.Modern2023.Encode(key, cert, nil, "pw")
	p12File := filepath.Join(dir, "ks.p12")
	os.WriteFile(p12File, p12, 0o600)
	ts, _ := pkcs12.Modern2023.EncodeTrustStore([]*x509.Certificate{cert}, "tpw")
	tsFile := filepath.Join(dir, "ts.p12")
	os.WriteFile(tsFile, ts, 0o600)

	good := map[string]map[string]string{
		"PEM inline": {"ssl.keystore.type": "PEM", "ssl.keystore.key": string(keyPEM), "ssl.keystore.certificate.chain": string(certPEM),
			"ssl.truststore.type": "PEM", "ssl.truststore.certificates": string(certPEM), "ssl.client.auth": "requested"},
		"PEM file":   {"ssl.keystore.type": "PEM", "ssl.keystore.location": pemFile},
		"PKCS12":     {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": p12File, "ssl.keystore.password": "pw", "ssl.truststore.type": "PKCS12", "ssl.truststore.location": tsFile, "ssl.truststore.password": "tpw", "ssl.client.auth": "required"},
		"suites+1.2": {"ssl.keystore.location": pemFile, "ssl.enabled.protocols": "TLSv1.2", "ssl.cipher.suites": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256"},
	}
	for name, m := range good {
		r, err := New(getter(m), slog.Default())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cfg := r.current()
		if cfg.Certificates[0].Leaf.SerialNumber.Int64() != 7 {
			t.Fatalf("%s: wrong certificate", name)
		}
		if m["ssl.client.auth"] == "required" && (cfg.ClientAuth != tls.RequireAndVerifyClientCert || cfg.ClientCAs == nil) {
			t.Fatalf("%s: client auth %v", name, cfg.ClientAuth)
		}
		if name == "suites+1.2" && (cfg.MaxVersion != tls.VersionTLS12 || len(cfg.CipherSuites) != 1) {
			t.Fatalf("%s: versions %x-%x suites %v", name, cfg.MinVersion, cfg.MaxVersion, cfg.CipherSuites)
		}
	}
	bad := map[string]map[string]string{
		"JKS":              {"ssl.keystore.location": "/x.jks"},
		"encrypted key":    {"ssl.keystore.type": "PEM", "ssl.keystore.key": "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n", "ssl.keystore.certificate.chain": string(certPEM)},
		"wrong password":   {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": p12File, "ssl.keystore.password": "nope"},
		"no truststore":    {"ssl.keystore.location": pemFile, "ssl.client.auth": "required"},
		"bad client auth":  {"ssl.keystore.location": pemFile, "ssl.client.auth": "always"},
		"unknown protocol": {"ssl.keystore.location": pemFile, "ssl.enabled.protocols": "SSLv3"},
		"unknown suite":    {"ssl.keystore.location": pemFile, "ssl.cipher.suites": "TLS_FOO"},
		"missing file":     {"ssl.keystore.location": filepath.Join(dir, "none.pem")},
	}
	for name, m := range bad {
		if _, err := New(getter(m), slog.Default()); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestMappingRules(t *testing.T) {
	m, err := ParseMappingRules(`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.\/]*).*$/$1/U,DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	for dn, want := range map[string]string{
		"CN=kafka-server1,OU=ServiceUsers,O=Org":                     "kafka-server1",
		"CN=Duke,OU=JavaSoft,O=Sun,L=Santa Clara,ST=California,C=US": "duke@javasoft",
		"cn=duke,ou=javasoft,dc=sun,dc=com":                          "DUKE@JAVASOFT",
		"OU=x,CN=svc/a.b":                                            "SVC/A.B",
		"O=nothing":                                                  "O=nothing",
	} {
		if got := m.Name(dn); got != want {
			t.Errorf("%q → %q, want %q", dn, got, want)
		}
	}
	for _, bad := range []string{"RULE:abc", "RULE:a/b", "NOPE", "RULE:(/x/"} {
		if _, err := ParseMappingRules(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if m, _ := ParseMappingRules(""); m.Name("CN=a") != "CN=a" {
		t.Error("empty rules are not DEFAULT")
	}
}

func FuzzMappingRules(f *testing.F) {
	f.Add(`RULE:^CN=(.*?),OU=.*$/$1/L,DEFAULT`, "CN=a,OU=b")
	f.Add(`RULE:\/(x)\//$1/U`, "/x/")
	f.Fuzz(func(t *testing.T, rules, dn string) {
		if len(rules) > 4096 {
			return
		}
		m, err := ParseMappingRules(rules)
		if err != nil {
			return
		}
		if out := m.Name(dn); strings.Count(out, "") > 1<<20 {
			t.Fatal("mapping exploded")
		}
	})
}
