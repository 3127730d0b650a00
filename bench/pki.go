package bench

// A throwaway certificate authority and broker certificate for TLS runs,
// made fresh each time (never committed), in the PEM form both Sluice and
// Kafka read as ssl.keystore.type=PEM.

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// PKI is where WritePKI put the files.
type PKI struct {
	CAFile string // the CA certificate (PEM): the clients' trust
	// KeystoreFile holds the broker's PKCS#8 key (unencrypted) and its
	// certificate chain, for ssl.keystore.type=PEM, ssl.keystore.location.
	KeystoreFile string
	KeyType      string
}

// Key types WritePKI makes.
const (
	KeyRSA2048 = "rsa2048"
	KeyP256    = "p256"
)

// WritePKI makes a CA and a broker certificate for 127.0.0.1 and
// localhost with keys of keyType, valid for a day, under dir.
func WritePKI(dir, keyType string) (PKI, error) {
	return WritePKIFor(dir, keyType, []net.IP{net.IPv4(127, 0, 0, 1)})
}

// WritePKIFor is WritePKI with a broker certificate valid for ips (and
// localhost), for brokers that dial each other at other addresses than
// 127.0.0.1 (the chaos harness's network namespaces).
func WritePKIFor(dir, keyType string, ips []net.IP) (PKI, error) {
	p := PKI{CAFile: filepath.Join(dir, "ca.pem"), KeystoreFile: filepath.Join(dir, "broker.pem"), KeyType: keyType}
	caKey, err := newKey(keyType)
	if err != nil {
		return p, err
	}
	ca, err := signCert(nil, caKey, caKey, nil)
	if err != nil {
		return p, err
	}
	bKey, err := newKey(keyType)
	if err != nil {
		return p, err
	}
	leaf, err := signCert(ips, bKey, caKey, ca)
	if err != nil {
		return p, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(bKey)
	if err != nil {
		return p, err
	}
	ks := append(pemBlock("PRIVATE KEY", der), pemBlock("CERTIFICATE", leaf.Raw)...)
	ks = append(ks, pemBlock("CERTIFICATE", ca.Raw)...)
	if err := os.WriteFile(p.KeystoreFile, ks, 0o600); err != nil {
		return p, err
	}
	return p, os.WriteFile(p.CAFile, pemBlock("CERTIFICATE", ca.Raw), 0o644)
}

func newKey(keyType string) (crypto.Signer, error) {
	switch keyType {
	case KeyRSA2048:
		return rsa.GenerateKey(rand.Reader, 2048)
	case KeyP256:
		return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	return nil, fmt.Errorf("unknown key type %q (%s or %s)", keyType, KeyRSA2048, KeyP256)
}

// signCert makes a certificate for key's public half signed by signer (as
// a CA when parent is nil: self-signed, named Sluice bench CA); a leaf is
// named after its first IP and valid for all of ips.
func signCert(ips []net.IP, key, signer crypto.Signer, parent *x509.Certificate) (*x509.Certificate, error) {
	cn := "Sluice bench CA"
	if parent != nil && len(ips) > 0 {
		cn = ips[0].String()
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"Sluice bench"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
		parent = tmpl
	} else {
		tmpl.IPAddresses = ips
		tmpl.DNSNames = []string{"localhost"}
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		if _, ok := key.(*rsa.PrivateKey); ok {
			tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		return nil, err
	}
	return x509.ParseCertificate(der)
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
