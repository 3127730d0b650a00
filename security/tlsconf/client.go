package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
)

// ClientConfig is the configuration a node dials another node's listener
// with, from the same listener keys the node serves it with, as Kafka's
// brokers do: the truststore checks the peer's certificate (the system's
// roots without one) and the keystore's certificate is offered when the
// peer asks for one (mutual TLS). With checkHost (Kafka's
// ssl.endpoint.identification.algorithm=https, its default) the
// certificate must also name the host dialled. Both stores are taken from
// the Reloader at each handshake, so a reload reaches new connections.
func (r *Reloader) ClientConfig(checkHost bool) *tls.Config {
	cur := r.current()
	return &tls.Config{
		MinVersion:   cur.MinVersion,
		MaxVersion:   cur.MaxVersion,
		CipherSuites: cur.CipherSuites,
		// The peer's chain is verified in VerifyConnection, against the
		// truststore of the moment rather than a pool fixed here.
		InsecureSkipVerify: true,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &r.current().Certificates[0], nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyPeer(cs, r.current().ClientCAs, checkHost)
		},
	}
}

// verifyPeer checks the peer's chain against roots (the system's when
// nil) and, with checkHost, that it names the server name dialled.
func verifyPeer(cs tls.ConnectionState, roots *x509.CertPool, checkHost bool) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("tls: the peer sent no certificate")
	}
	opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	if checkHost {
		opts.DNSName = cs.ServerName
	}
	_, err := cs.PeerCertificates[0].Verify(opts)
	return err
}
