package testcluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// TestRestartedBrokerNeverRefusesAValidLogin: a broker SIGKILLed and
// restarted must not answer a SCRAM login before its metadata image holds
// the user. It used to serve its listeners as soon as it had bound them,
// with an empty image, and refused valid logins (SASL_AUTHENTICATION_FAILED,
// final for franz-go and fatal to a transactional producer) for up to
// ~1.7 s after every restart; the chaos harness's login probe found it.
// Now a cluster broker serves once its image reaches its registration
// record: logins that come early wait in the listener's backlog. The test
// logs in as alice over and over from the moment the process is started
// again, each time on a new connection, and no attempt may be refused.
func TestRestartedBrokerNeverRefusesAValidLogin(t *testing.T) {
	jaas := `org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret" user_broker="broker-secret" user_admin="admin-secret";`
	asAdmin := []kgo.Opt{kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism())}
	c := Start(t, 3, Options{ClientOpts: asAdmin, Extra: []string{
		"listeners=SASL_PLAINTEXT://{PLAINTEXT},CONTROLLER://{CONTROLLER}",
		"listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
		"security.inter.broker.protocol=SASL_PLAINTEXT",
		"sasl.mechanism.inter.broker.protocol=PLAIN",
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-512",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config=" + jaas,
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := kadm.NewClient(c.Client())
	createScramUser(ctx, t, adm, "alice", "alice-secret", 4096)
	victim := c.Nodes[2]
	login := func() error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(victim.Addr),
			kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()),
			kgo.RequestRetries(0), kgo.DialTimeout(2*time.Second))
		if err != nil {
			return err
		}
		defer cl.Close()
		rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
		defer rcancel()
		_, err = kmsg.NewPtrApiVersionsRequest().RequestWith(rctx, cl)
		return err
	}
	c.WaitFor(30*time.Second, "alice logs in on node 3", func() bool { return login() == nil })

	for round := 1; round <= 2; round++ {
		victim.Kill()
		victim.Restart()
		start := time.Now()
		ok, refusedConn := 0, 0
		for ok < 20 && time.Since(start) < 60*time.Second {
			err := login()
			switch {
			case err == nil:
				ok++
			case errors.Is(err, kerr.SaslAuthenticationFailed):
				t.Fatalf("round %d: alice's login refused %v after the restart: %v", round, time.Since(start).Round(time.Millisecond), err)
			default: // not listening yet
				refusedConn++
				time.Sleep(5 * time.Millisecond)
			}
		}
		if ok < 20 {
			t.Fatalf("round %d: only %d logins in 60 s after the restart", round, ok)
		}
		t.Logf("round %d: first successful logins after %d failed connections, 20 logins in %v", round, refusedConn, time.Since(start).Round(time.Millisecond))
	}
}
