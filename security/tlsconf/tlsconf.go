// Package tlsconf turns Kafka's ssl.* settings of one listener into a
// crypto/tls server configuration, reloaded when the key or trust store
// files change, and maps client certificates to principals
// (ssl.principal.mapping.rules).
//
// Keystores: ssl.keystore.type PEM (a file holding the private key and the
// certificate chain, or inline ssl.keystore.key and
// ssl.keystore.certificate.chain) or PKCS12 (ssl.keystore.location and
// ssl.keystore.password). Truststores: PEM (a file or inline
// ssl.truststore.certificates) or PKCS12. JKS stores and encrypted PEM keys
// are refused with a message saying how to convert them: Go has no reader
// for either.
package tlsconf

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"software.sslmate.com/src/go-pkcs12"
)

// Getter returns a listener's value of a key ("" when unset), the
// listener.name.<listener>.<key> override before the broker's key.
type Getter func(key string) string

// Reloader serves a tls.Config built from a listener's settings and
// rebuilds it when a store file changes (looked at no more than once per
// checkEvery, on a handshake). A rebuild that fails keeps the previous
// config and is logged.
type Reloader struct {
	get Getter
	log *slog.Logger

	mu struct {
		sync.Mutex
		cfg     *tls.Config
		files   map[string]time.Time // store file → its mtime when read
		checked time.Time
	}
}

const checkEvery = time.Second

// New builds the listener's TLS configuration from get.
func New(get Getter, log *slog.Logger) (*Reloader, error) {
	r := &Reloader{get: get, log: log}
	cfg, files, err := build(get)
	if err != nil {
		return nil, err
	}
	r.mu.cfg, r.mu.files, r.mu.checked = cfg, files, time.Now()
	return r, nil
}

// Config is the server config to listen with: each handshake gets the
// current configuration.
func (r *Reloader) Config() *tls.Config {
	return &tls.Config{GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
		return r.current(), nil
	}}
}

func (r *Reloader) current() *tls.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if now.Sub(r.mu.checked) < checkEvery || !changed(r.mu.files) {
		return r.mu.cfg
	}
	r.mu.checked = now
	cfg, files, err := build(r.get)
	if err != nil {
		r.log.Error("TLS stores changed but cannot be loaded; keeping the previous ones", "err", err)
		r.mu.files = files
		return r.mu.cfg
	}
	r.log.Info("TLS key or trust store reloaded")
	r.mu.cfg, r.mu.files = cfg, files
	return cfg
}

// Reload rebuilds now, whatever the files' times say.
func (r *Reloader) Reload() error {
	cfg, files, err := build(r.get)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.mu.cfg, r.mu.files, r.mu.checked = cfg, files, time.Now()
	r.mu.Unlock()
	return nil
}

func changed(files map[string]time.Time) bool {
	for f, t := range files {
		st, err := os.Stat(f)
		if err != nil || !st.ModTime().Equal(t) {
			return true
		}
	}
	return false
}

// build reads the stores and returns the config and the files it read.
func build(get Getter) (*tls.Config, map[string]time.Time, error) {
	files := map[string]time.Time{}
	read := func(key string) ([]byte, error) {
		path := get(key)
		st, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		files[path] = st.ModTime()
		return os.ReadFile(path)
	}
	cert, err := keystore(get, read)
	if err != nil {
		return nil, files, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	if cfg.ClientCAs, err = truststore(get, read); err != nil {
		return nil, files, err
	}
	if cfg.ClientAuth, err = clientAuth(get("ssl.client.auth")); err != nil {
		return nil, files, err
	}
	if cfg.ClientAuth != tls.NoClientCert && cfg.ClientCAs == nil {
		return nil, files, errors.New("ssl.client.auth asks for client certificates but no truststore is set")
	}
	if cfg.MinVersion, cfg.MaxVersion, err = protocols(get("ssl.enabled.protocols")); err != nil {
		return nil, files, err
	}
	if cfg.CipherSuites, err = cipherSuites(get("ssl.cipher.suites")); err != nil {
		return nil, files, err
	}
	return cfg, files, nil
}

func keystore(get Getter, read func(string) ([]byte, error)) (tls.Certificate, error) {
	typ := strings.ToUpper(get("ssl.keystore.type"))
	inlineKey, inlineChain := get("ssl.keystore.key"), get("ssl.keystore.certificate.chain")
	if typ == "" {
		typ = "JKS"
		if inlineKey != "" || strings.HasSuffix(get("ssl.keystore.location"), ".pem") {
			typ = "PEM"
		}
	}
	switch typ {
	case "PEM":
		if inlineKey != "" || inlineChain != "" {
			return pemKeyPair([]byte(inlineChain), []byte(inlineKey), get("ssl.key.password"))
		}
		if get("ssl.keystore.location") == "" {
			return tls.Certificate{}, errors.New("no keystore: set ssl.keystore.location or ssl.keystore.key and ssl.keystore.certificate.chain")
		}
		data, err := read("ssl.keystore.location")
		if err != nil {
			return tls.Certificate{}, err
		}
		return pemKeyPair(data, data, get("ssl.key.password"))
	case "PKCS12":
		data, err := read("ssl.keystore.location")
		if err != nil {
			return tls.Certificate{}, err
		}
		key, leaf, chain, err := pkcs12.DecodeChain(data, get("ssl.keystore.password"))
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("ssl.keystore.location: PKCS12: %w", err)
		}
		c := tls.Certificate{Certificate: [][]byte{leaf.Raw}, PrivateKey: key, Leaf: leaf}
		for _, ca := range chain {
			c.Certificate = append(c.Certificate, ca.Raw)
		}
		return c, nil
	}
	return tls.Certificate{}, fmt.Errorf("ssl.keystore.type %s is not supported: use PEM or PKCS12 (keytool -importkeystore -deststoretype PKCS12 converts a JKS store)", typ)
}

// pemKeyPair reads a certificate chain and a private key from PEM (both
// may be in one file, as Kafka's PEM keystore file has them).
func pemKeyPair(chain, key []byte, password string) (tls.Certificate, error) {
	var c tls.Certificate
	var keyDER []byte
	for rest := key; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		switch b.Type {
		case "ENCRYPTED PRIVATE KEY":
			return c, errors.New("encrypted PEM private keys are not supported: give the key unencrypted (openssl pkcs8 -topk8 -nocrypt) and protect the file")
		case "PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY":
			keyDER = b.Bytes
		}
	}
	for rest := chain; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			c.Certificate = append(c.Certificate, b.Bytes)
		}
	}
	if len(c.Certificate) == 0 || keyDER == nil {
		return c, errors.New("PEM keystore needs a private key and at least one certificate")
	}
	k, err := parseKey(keyDER)
	if err != nil {
		return c, err
	}
	c.PrivateKey = k
	if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
		return c, fmt.Errorf("PEM keystore certificate: %w", err)
	}
	_ = password // only encrypted keys use it, and those are refused above
	return c, nil
}

func parseKey(der []byte) (crypto.PrivateKey, error) {
	if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return k, nil
	}
	if k, err := x509.ParseECPrivateKey(der); err == nil {
		return k, nil
	}
	return nil, errors.New("PEM keystore: unreadable private key")
}

// truststore returns the CAs client certificates are checked against; nil
// when no truststore is configured.
func truststore(get Getter, read func(string) ([]byte, error)) (*x509.CertPool, error) {
	inline, loc := get("ssl.truststore.certificates"), get("ssl.truststore.location")
	if inline == "" && loc == "" {
		return nil, nil
	}
	typ := strings.ToUpper(get("ssl.truststore.type"))
	if typ == "" {
		typ = "JKS"
		if inline != "" || strings.HasSuffix(loc, ".pem") || strings.HasSuffix(loc, ".crt") {
			typ = "PEM"
		}
	}
	pool := x509.NewCertPool()
	switch typ {
	case "PEM":
		data := []byte(inline)
		if inline == "" {
			var err error
			if data, err = read("ssl.truststore.location"); err != nil {
				return nil, err
			}
		}
		if !pool.AppendCertsFromPEM(data) {
			return nil, errors.New("PEM truststore holds no certificate")
		}
		return pool, nil
	case "PKCS12":
		data, err := read("ssl.truststore.location")
		if err != nil {
			return nil, err
		}
		certs, err := pkcs12.DecodeTrustStore(data, get("ssl.truststore.password"))
		if err != nil {
			return nil, fmt.Errorf("ssl.truststore.location: PKCS12: %w", err)
		}
		for _, c := range certs {
			pool.AddCert(c)
		}
		return pool, nil
	}
	return nil, fmt.Errorf("ssl.truststore.type %s is not supported: use PEM or PKCS12", typ)
}

func clientAuth(v string) (tls.ClientAuthType, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "none":
		return tls.NoClientCert, nil
	case "requested":
		return tls.VerifyClientCertIfGiven, nil
	case "required":
		return tls.RequireAndVerifyClientCert, nil
	}
	return 0, fmt.Errorf("ssl.client.auth=%q: want none, requested or required", v)
}

var protocolVersions = map[string]uint16{
	"TLSv1": tls.VersionTLS10, "TLSv1.1": tls.VersionTLS11, "TLSv1.2": tls.VersionTLS12, "TLSv1.3": tls.VersionTLS13,
}

// protocols maps ssl.enabled.protocols (default TLSv1.2,TLSv1.3) to the
// version range Go allows (the lowest to the highest listed).
func protocols(v string) (lo, hi uint16, err error) {
	if strings.TrimSpace(v) == "" {
		v = "TLSv1.2,TLSv1.3"
	}
	for _, p := range strings.Split(v, ",") {
		ver, ok := protocolVersions[strings.TrimSpace(p)]
		if !ok {
			return 0, 0, fmt.Errorf("ssl.enabled.protocols: unknown protocol %q", p)
		}
		if lo == 0 || ver < lo {
			lo = ver
		}
		hi = max(hi, ver)
	}
	return lo, hi, nil
}

// cipherSuites maps ssl.cipher.suites (IANA names, as Java spells them) to
// Go's TLS 1.2 suites. TLS 1.3 suites are always on in Go; naming them is
// accepted.
func cipherSuites(v string) ([]uint16, error) {
	if strings.TrimSpace(v) == "" {
		return nil, nil
	}
	byName := map[string]uint16{}
	for _, s := range append(tls.CipherSuites(), tls.InsecureCipherSuites()...) {
		byName[s.Name] = s.ID
	}
	var out []uint16
	for _, n := range strings.Split(v, ",") {
		n = strings.TrimSpace(n)
		switch {
		case n == "":
		case strings.HasPrefix(n, "TLS_AES_") || strings.HasPrefix(n, "TLS_CHACHA20_"):
		case byName[n] != 0:
			out = append(out, byName[n])
		default:
			return nil, fmt.Errorf("ssl.cipher.suites: unknown or unsupported suite %q", n)
		}
	}
	return out, nil
}
