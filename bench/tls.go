package bench

// TLS for the load generator. With Config.TLS every connection of a run is
// TLS: franz-go's (admin, producers, consumers) and the raw modes'. The
// client offers TLS 1.2 and 1.3 and only the X25519 key exchange: Go would
// otherwise lead with the hybrid X25519MLKEM768, which a Go broker accepts
// and a Java 17 broker does not know, and a comparison would then measure
// two different handshakes.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ClientTLS is the TLS configuration of the load generator's connections,
// trusting the PEM certificates in caFile (the system's roots if "").
func ClientTLS(caFile string) (*tls.Config, error) {
	tc := &tls.Config{
		MinVersion:       tls.VersionTLS12,
		CurvePreferences: []tls.CurveID{tls.X25519},
	}
	if caFile == "" {
		return tc, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	tc.RootCAs = x509.NewCertPool()
	if !tc.RootCAs.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificate", caFile)
	}
	return tc, nil
}

// tlsConfig is the run's client TLS configuration, nil without Config.TLS.
func (c *Config) tlsConfig() (*tls.Config, error) {
	if !c.TLS && c.TLSCA == "" {
		return nil, nil
	}
	return ClientTLS(c.TLSCA)
}

// clientOpts are the options every franz-go client of the run starts from.
func (r *run) clientOpts() []kgo.Opt {
	opts := []kgo.Opt{kgo.SeedBrokers(r.cfg.Brokers...)}
	if r.tls != nil {
		opts = append(opts, kgo.DialTLSConfig(r.tls.Clone()))
	}
	return opts
}

// dialConn opens a connection to addr, over TLS when tc is not nil (the
// handshake done before it returns).
func dialConn(ctx context.Context, addr string, tc *tls.Config) (net.Conn, error) {
	if tc == nil {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
	d := tls.Dialer{Config: serverName(tc, addr)}
	return d.DialContext(ctx, "tcp", addr)
}

// serverName is tc naming addr's host (an IP address is checked against
// the certificate's IP SANs).
func serverName(tc *tls.Config, addr string) *tls.Config {
	if tc.ServerName != "" {
		return tc
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return tc
	}
	tc = tc.Clone()
	tc.ServerName = host
	return tc
}
