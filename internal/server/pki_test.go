package server_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"software.sslmate.com/src/go-pkcs12"
)

// testPKI is a CA, a broker certificate for 127.0.0.1 and a client
// certificate, generated per test (no key is ever committed), written out
// in the store formats Kafka's configs name.
type testPKI struct {
	dir     string
	caPEM   string // the CA certificate (PEM file)
	keyPEM  string // the broker's key and chain in one PEM file
	keyP12  string // the broker's PKCS12 keystore (password "ks-pass")
	trustPK string // PKCS12 truststore with the CA (password "ts-pass")
	pool    *x509.CertPool
	client  tls.Certificate // CN=Alice,OU=eng,O=Sluice
	broker  tls.Certificate
}

func newPKI(t testing.TB) *testPKI {
	t.Helper()
	p := &testPKI{dir: t.TempDir(), pool: x509.NewCertPool()}
	caKey, caCert := newCert(t, "Test CA", nil, nil, true)
	p.pool.AddCert(caCert)
	bKey, bCert := newCert(t, "broker", caKey, caCert, false)
	cKey, cCert := newCert(t, "Alice", caKey, caCert, false)
	p.broker = tls.Certificate{Certificate: [][]byte{bCert.Raw, caCert.Raw}, PrivateKey: bKey, Leaf: bCert}
	p.client = tls.Certificate{Certificate: [][]byte{cCert.Raw}, PrivateKey: cKey, Leaf: cCert}

	p.caPEM = p.write(t, "ca.pem", pemOf("CERTIFICATE", caCert.Raw))
	der, err := x509.MarshalPKCS8PrivateKey(bKey)
	if err != nil {
		t.Fatal(err)
	}
	p.keyPEM = p.write(t, "broker.pem", append(append(pemOf("PRIVATE KEY", der), pemOf("CERTIFICATE", bCert.Raw)...), pemOf("CERTIFICATE", caCert.Raw)...))
	ks, err := pkcs12.Modern2023.Encode(bKey, bCert, []*x509.Certificate{caCert}, "ks-pass")
	if err != nil {
		t.Fatal(err)
	}
	p.keyP12 = p.write(t, "broker.p12", ks)
	ts, err := pkcs12.Modern2023.EncodeTrustStore([]*x509.Certificate{caCert}, "ts-pass")
	if err != nil {
		t.Fatal(err)
	}
	p.trustPK = p.write(t, "truststore.p12", ts)
	return p
}

func (p *testPKI) write(t testing.TB, name string, data []byte) string {
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func pemOf(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func newCert(t testing.TB, cn string, signer *ecdsa.PrivateKey, parent *x509.Certificate, ca bool) (*ecdsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn, OrganizationalUnit: []string{"eng"}, Organization: []string{"Sluice"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if ca {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	}
	if signer == nil {
		signer, parent = key, tmpl
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, c
}

// clientTLS is a client config trusting the test CA, with the client
// certificate when withCert.
func (p *testPKI) clientTLS(withCert bool) *tls.Config {
	c := &tls.Config{RootCAs: p.pool, ServerName: "127.0.0.1"}
	if withCert {
		c.Certificates = []tls.Certificate{p.client}
	}
	return c
}

func x509MarshalPKCS8(key any) ([]byte, error) { return x509.MarshalPKCS8PrivateKey(key) }
