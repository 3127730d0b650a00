package main

// The security scenario (-security): one client against the single
// broker's SASL_SSL listener (SCRAM-SHA-512) and its SSL listener that
// requires client certificates (interop/driver/security.go makes the CA
// and keys and passes SLUICE_SASL_SSL_BOOTSTRAP, SLUICE_MTLS_BOOTSTRAP and
// SLUICE_TLS_DIR). Each client reaches the listeners through its own TLS
// and SASL settings and manages its SCRAM user with its own admin API.

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// secureListener is how a client reaches one of the secure listeners.
type secureListener struct {
	bootstrap      string
	tls            *tls.Config
	user, password string // SCRAM-SHA-512 when user is set
}

// secureClient is a client that can also go to a secure listener and
// manage SCRAM credentials.
type secureClient interface {
	client
	// on is a new client of the same library on listener l.
	on(l secureListener) client
	// upsertSCRAM gives user a SCRAM-SHA-512 credential (8192 iterations).
	upsertSCRAM(ctx context.Context, user, password string) error
	// describeSCRAM says which mechanisms and iterations user has.
	describeSCRAM(ctx context.Context, user string) (string, error)
	deleteSCRAM(ctx context.Context, user string) error
	// authFailed reports whether err is the client's form of
	// SASL_AUTHENTICATION_FAILED.
	authFailed(err error) bool
}

const (
	secureRecords    = 50
	secureIterations = 8192
	// refusedWait bounds how long a refused client is given to deliver
	// anything (or to say why it cannot).
	refusedWait = 15 * time.Second
	// quietWait is how long a consumer that keeps retrying a refused
	// connection (franz-go's does) is watched for records.
	quietWait = 8 * time.Second
)

func runSecurityScenario(ctx context.Context, name string, c client) bool {
	defer c.close()
	rep := &reporter{}
	fmt.Printf("##interop version %s\n", c.version())
	sc, ok := c.(secureClient)
	if !ok {
		rep.fail("scram-user", fmt.Errorf("%s has no security scenario", name))
		return false
	}
	sasl, mtls, dir := os.Getenv("SLUICE_SASL_SSL_BOOTSTRAP"), os.Getenv("SLUICE_MTLS_BOOTSTRAP"), os.Getenv("SLUICE_TLS_DIR")
	if sasl == "" || mtls == "" || dir == "" {
		rep.fail("scram-user", errors.New("the driver gave no secure listeners"))
		return false
	}
	trust, cert, err := loadTLS(dir)
	if err != nil {
		rep.fail("scram-user", err)
		return false
	}
	user, password := name+"-user", name+"-secret"
	scram := func(pw string) client {
		return sc.on(secureListener{bootstrap: sasl, tls: trust.Clone(), user: user, password: pw})
	}
	withCert := trust.Clone()
	withCert.Certificates = []tls.Certificate{cert}
	step := func(d time.Duration) (context.Context, context.CancelFunc) { return context.WithTimeout(ctx, d) }

	sctx, cancel := step(30 * time.Second)
	err = sc.upsertSCRAM(sctx, user, password)
	var described string
	if err == nil {
		described, err = sc.describeSCRAM(sctx, user)
	}
	if err == nil && described != fmt.Sprintf("SCRAM-SHA-512/%d", secureIterations) {
		err = fmt.Errorf("described %s as %q", user, described)
	}
	cancel()
	rep.check("scram-user", err, user+" has "+described)

	saslTopic, mtlsTopic := name+"-sasl-ssl", name+"-mtls"
	sctx, cancel = step(60 * time.Second)
	detail, err := secureRoundTrip(sctx, scram(password), saslTopic)
	cancel()
	rep.check("sasl-ssl", err, detail)

	sctx, cancel = step(60 * time.Second)
	detail, err = refused(sctx, sc, scram("not-"+password), saslTopic)
	if err == nil {
		err = expectRecords(sctx, c, saslTopic, secureRecords)
	}
	cancel()
	rep.check("wrong-password", err, detail)

	sctx, cancel = step(60 * time.Second)
	detail, err = secureRoundTrip(sctx, sc.on(secureListener{bootstrap: mtls, tls: withCert}), mtlsTopic)
	cancel()
	rep.check("mtls", err, detail)

	sctx, cancel = step(60 * time.Second)
	detail, err = noCertificate(sctx, sc.on(secureListener{bootstrap: mtls, tls: trust.Clone()}), mtlsTopic)
	cancel()
	rep.check("mtls-no-cert", err, detail)

	sctx, cancel = step(60 * time.Second)
	err = sc.deleteSCRAM(sctx, user)
	if err == nil {
		detail, err = refused(sctx, sc, scram(password), saslTopic)
	}
	cancel()
	rep.check("deleted-user", err, "credential deleted; "+detail)
	return !rep.failed
}

// loadTLS reads the run's CA (to verify the broker) and the client's key
// and certificate.
func loadTLS(dir string) (*tls.Config, tls.Certificate, error) {
	ca, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		return nil, tls.Certificate{}, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, tls.Certificate{}, errors.New("no certificate in ca.pem")
	}
	client := filepath.Join(dir, "client.pem") // key, certificate and CA in one file
	cert, err := tls.LoadX509KeyPair(client, client)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, cert, err
}

// secureRoundTrip creates topic through c, produces secureRecords with
// acks=all and consumes them in a consumer group, exactly.
func secureRoundTrip(ctx context.Context, c client, topic string) (string, error) {
	defer c.close()
	if err := c.createTopics(ctx, []string{topic}, codecPartitions); err != nil {
		return "", fmt.Errorf("create %s: %w", topic, err)
	}
	if err := expectPartitions(ctx, c, []string{topic}, codecPartitions); err != nil {
		return "", err
	}
	// Timestamps from now: franz-go counts a record's delivery timeout
	// from its timestamp.
	sent := makeRecords(topic, secureRecords, time.Now().Truncate(time.Millisecond))
	if err := c.produce(ctx, topic, "none", false, sent); err != nil {
		return "", fmt.Errorf("produce: %w", err)
	}
	cl := &collector{counts: map[string]int{}}
	done := cl.await(topic, secureRecords)
	m, err := startMember(ctx, c, topic+"-group", topic, "eager", cl)
	if err != nil {
		return "", fmt.Errorf("join group: %w", err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		n, _ := cl.summary(topic)
		err = fmt.Errorf("the group consumed %d of %d records before the deadline", n, secureRecords)
	case err = <-m.done:
		m.done <- err
		err = fmt.Errorf("member stopped: %w", err)
	}
	if serr := m.stop(); err == nil {
		err = serr
	}
	if err != nil {
		return "", err
	}
	cl.mu.Lock()
	got := append([]record(nil), cl.all...)
	cl.mu.Unlock()
	if err := verifyExact(sent, got); err != nil {
		return "", err
	}
	return fmt.Sprintf("topic of %d partitions created, %d records produced (acks=all) and consumed in a group, exactly",
		codecPartitions, secureRecords), nil
}

// refused checks that bad (a client with credentials the broker must
// refuse) can neither produce to topic nor read a record of it, and that
// the client says why: the SASL authentication failure.
func refused(ctx context.Context, sc secureClient, bad client, topic string) (string, error) {
	defer bad.close()
	pctx, cancel := context.WithTimeout(ctx, refusedWait)
	perr := bad.produce(pctx, topic, "none", false, makeRecords(topic+"-refused", 5, time.Now().Truncate(time.Millisecond)))
	cancel()
	if perr == nil {
		return "", errors.New("the producer was served")
	}
	if !sc.authFailed(perr) {
		return "", fmt.Errorf("the producer failed, but not with the SASL authentication error: %w", perr)
	}
	cctx, cancel := context.WithTimeout(ctx, quietWait)
	got, cerr := bad.consume(cctx, topic, 1)
	cancel()
	if len(got) > 0 {
		return "", fmt.Errorf("the consumer read %d records", len(got))
	}
	// A consumer may keep retrying a refused connection rather than fail
	// (franz-go does): then reading nothing until the deadline is the
	// check; any other failure must be the authentication one.
	switch {
	case sc.authFailed(cerr):
		return fmt.Sprintf("producer: %s; consumer: no record, %s", shortErr(perr), shortErr(cerr)), nil
	case errors.Is(cerr, context.DeadlineExceeded):
		return fmt.Sprintf("producer: %s; consumer: no record in %v (it kept retrying)", shortErr(perr), quietWait), nil
	}
	return "", fmt.Errorf("the consumer read nothing, but failed with something else than the SASL authentication error: %v", cerr)
}

// noCertificate checks that a client without a certificate is told so by
// the mutual-TLS listener (a metadata request fails naming the
// certificate) and that its consumer reads nothing.
func noCertificate(ctx context.Context, bare client, topic string) (string, error) {
	defer bare.close()
	mctx, cancel := context.WithTimeout(ctx, refusedWait)
	_, merr := bare.partitionCount(mctx, topic)
	cancel()
	if merr == nil {
		return "", errors.New("a client without a certificate was served metadata")
	}
	if !strings.Contains(merr.Error(), "certificate") {
		return "", fmt.Errorf("metadata refused, but the error does not name the certificate: %w", merr)
	}
	cctx, cancel := context.WithTimeout(ctx, quietWait)
	got, cerr := bare.consume(cctx, topic, 1)
	cancel()
	if len(got) > 0 {
		return "", fmt.Errorf("a client without a certificate read %d records", len(got))
	}
	return fmt.Sprintf("metadata: %s; consumer: no record (%s)", shortErr(merr), shortErr(cerr)), nil
}

// expectRecords checks through the PLAINTEXT client that topic holds
// exactly n records (the refused producer wrote none).
func expectRecords(ctx context.Context, c client, topic string, n int64) error {
	// A client may not know yet of a topic another client made (kafka-go
	// routes by metadata it refreshes every 6 s): ask again, bounded.
	var earliest, latest map[int32]int64
	err := errors.New("not asked")
	for deadline := time.Now().Add(15 * time.Second); err != nil && time.Now().Before(deadline); {
		if earliest, latest, err = c.listOffsets(ctx, topic); err != nil {
			logf("list offsets of %s: %v", topic, err)
			time.Sleep(500 * time.Millisecond)
		}
	}
	if err != nil {
		return fmt.Errorf("list offsets of %s: %w", topic, err)
	}
	var total int64
	for p, end := range latest {
		total += end - earliest[p]
	}
	if total != n {
		return fmt.Errorf("%s holds %d records, want the %d produced with the right password", topic, total, n)
	}
	return nil
}

func shortErr(err error) string {
	s := oneLine(err.Error())
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// randomSalt is a SCRAM salt for the clients that want one from the caller.
func randomSalt() []byte {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return b
}
