package main

// The single broker's secure listeners, for the security scenario: a
// SASL_SSL listener with SCRAM-SHA-512 and an SSL listener that requires
// client certificates, beside the PLAINTEXT one every other scenario
// uses. The CA, broker and client keys are made fresh for each run under
// the work directory (never committed).

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// secureListeners writes the keys and returns the server.properties lines
// and the environment the security scenario reads.
func secureListeners(work, plainAddr string) (props string, env []string, err error) {
	dir := filepath.Join(work, "tls")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	caKey, ca, err := makeCert("Sluice interop CA", nil, nil)
	if err != nil {
		return "", nil, err
	}
	bKey, bCert, err := makeCert("broker", caKey, ca)
	if err != nil {
		return "", nil, err
	}
	cKey, cCert, err := makeCert("interop-client", caKey, ca)
	if err != nil {
		return "", nil, err
	}
	files := map[string][]byte{"ca.pem": pemBlock("CERTIFICATE", ca.Raw)}
	for name, kc := range map[string]struct {
		k *ecdsa.PrivateKey
		c *x509.Certificate
	}{"broker.pem": {bKey, bCert}, "client.pem": {cKey, cCert}} {
		der, err := x509.MarshalPKCS8PrivateKey(kc.k)
		if err != nil {
			return "", nil, err
		}
		files[name] = append(append(pemBlock("PRIVATE KEY", der), pemBlock("CERTIFICATE", kc.c.Raw)...), pemBlock("CERTIFICATE", ca.Raw)...)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return "", nil, err
		}
	}
	saslPort, err := freePort()
	if err != nil {
		return "", nil, err
	}
	mtlsPort, err := freePort()
	if err != nil {
		return "", nil, err
	}
	sasl, mtls := fmt.Sprintf("127.0.0.1:%d", saslPort), fmt.Sprintf("127.0.0.1:%d", mtlsPort)
	props = strings.Join([]string{
		"listeners=PLAINTEXT://" + plainAddr + ",SASL_SSL://" + sasl + ",MTLS://" + mtls,
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,MTLS:SSL",
		"sasl.enabled.mechanisms=SCRAM-SHA-512",
		"ssl.keystore.type=PEM",
		"ssl.keystore.location=" + filepath.Join(dir, "broker.pem"),
		"listener.name.mtls.ssl.client.auth=required",
		"listener.name.mtls.ssl.truststore.type=PEM",
		"listener.name.mtls.ssl.truststore.location=" + filepath.Join(dir, "ca.pem"),
	}, "\n") + "\n"
	env = []string{"SLUICE_SASL_SSL_BOOTSTRAP=" + sasl, "SLUICE_MTLS_BOOTSTRAP=" + mtls, "SLUICE_TLS_DIR=" + dir}
	return props, env, nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// makeCert makes a P-256 certificate for 127.0.0.1 signed by signer (self
// signed, as a CA, when signer is nil).
func makeCert(cn string, signer *ecdsa.PrivateKey, parent *x509.Certificate) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"Sluice interop"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:     []string{"localhost"},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	if signer == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		signer, parent = key, tmpl
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return nil, nil, err
	}
	c, err := x509.ParseCertificate(der)
	return key, c, err
}
