package server_test

import (
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
)

// startACLBroker runs a broker with a PLAINTEXT listener (User:ANONYMOUS)
// and a SASL_PLAINTEXT one with PLAIN users admin, alice and bob; the
// StandardAuthorizer is on and User:admin a super user.
func startACLBroker(t *testing.T, backend string) *testbroker.Broker {
	return testbroker.StartNet(t, backend, set(
		"listeners", "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms", "PLAIN",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config",
		`org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-pw" user_alice="alice-pw" user_bob="bob-pw";`,
		"authorizer.class.name", engine.StandardAuthorizerClass,
		"super.users", "User:admin",
	))
}

func saslClient(t *testing.T, tb *testbroker.Broker, user string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(tb.ListenerAddr("SASL_PLAINTEXT")),
		kgo.SASL(plain.Auth{User: user, Pass: user + "-pw"}.AsMechanism()), kgo.RequestRetries(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// TestACLsOverSASL: principals come from SASL PLAIN; ACLs made by the
// super user decide what each may do, a revoked ACL takes effect at the
// next request, an unauthenticated listener's ANONYMOUS sees nothing, and
// a user quota throttles the authenticated user.
func TestACLsOverSASL(t *testing.T) {
	for _, backend := range netBackends(t) {
		t.Run(backend, func(t *testing.T) {
			tb := startACLBroker(t, backend)
			ctx := ctxT(t)
			adm := kadm.NewClient(saslClient(t, tb, "admin"))
			if _, err := adm.CreateTopics(ctx, 1, 1, nil, "orders", "payroll"); err != nil {
				t.Fatal(err)
			}
			acls := kadm.NewACLs().Allow("User:alice").AllowHosts("*").Topics("orders").ResourcePatternType(kadm.ACLPatternLiteral).
				Operations(kadm.OpWrite, kadm.OpRead, kadm.OpDescribe)
			if res, err := adm.CreateACLs(ctx, acls); err != nil || res[0].Err != nil {
				t.Fatalf("create acls: %v %+v", err, res)
			}

			alice := saslClient(t, tb, "alice", kgo.DefaultProduceTopic("orders"))
			if err := alice.ProduceSync(ctx, kgo.StringRecord("from alice")).FirstErr(); err != nil {
				t.Fatalf("alice produce: %v", err)
			}
			bob := saslClient(t, tb, "bob", kgo.DefaultProduceTopic("orders"))
			if err := bob.ProduceSync(ctx, kgo.StringRecord("from bob")).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
				t.Fatalf("bob produce: %v", err)
			}
			anon := kadm.NewClient(tb.Client(t))
			if topics, err := anon.ListTopics(ctx); err != nil || len(topics) != 0 {
				t.Fatalf("ANONYMOUS lists %v (%v)", topics.Names(), err)
			}
			if topics, err := kadm.NewClient(alice).ListTopics(ctx); err != nil || !slicesEqual(topics.Names(), []string{"orders"}) {
				t.Fatalf("alice lists %v (%v)", topics.Names(), err)
			}

			// Revoked: the next produce is refused, on the same connection.
			res, err := adm.DeleteACLs(ctx, acls)
			deleted := 0
			for _, r := range res {
				deleted += len(r.Deleted)
			}
			if err != nil || deleted != 3 {
				t.Fatalf("delete acls: %v, %d deleted", err, deleted)
			}
			if err := alice.ProduceSync(ctx, kgo.StringRecord("after revoke")).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
				t.Fatalf("alice after revoke: %v", err)
			}
		})
	}
}

func slicesEqual(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

// TestKafkaACLAndQuotaTools runs Kafka 4.4's kafka-acls (--add, --list,
// --remove) and kafka-configs (client quotas of users and client ids)
// against the SASL listener as the super user, and checks the result
// through the broker.
//
//	SLUICE_KAFKA_CLASSPATH='/work/main/interop/java/target/deps/*' \
//	  go test ./internal/server -run TestKafkaACLAndQuotaTools
func TestKafkaACLAndQuotaTools(t *testing.T) {
	if os.Getenv("SLUICE_KAFKA_CLASSPATH") == "" {
		t.Skip("set SLUICE_KAFKA_CLASSPATH to Kafka's jars to run Kafka's tools")
	}
	tb := startACLBroker(t, "")
	admin := writeProps(t, t.TempDir(), "admin.properties", "security.protocol", "SASL_PLAINTEXT", "sasl.mechanism", "PLAIN",
		"sasl.jaas.config", `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-pw";`)
	addr := tb.ListenerAddr("SASL_PLAINTEXT")
	acls := func(args ...string) string {
		return mustTool(t, "", "org.apache.kafka.tools.AclCommand", append([]string{"--bootstrap-server", addr, "--command-config", admin}, args...)...)
	}
	acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Write", "--topic", "orders")
	acls("--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", "app-", "--resource-pattern-type", "prefixed")
	acls("--add", "--deny-principal", "User:bob", "--operation", "All", "--topic", "*")
	out := acls("--list", "--principal", "User:alice")
	for _, want := range []string{"name=orders, patternType=LITERAL", "name=app-, patternType=PREFIXED", "operation=WRITE", "operation=READ"} {
		if !strings.Contains(out, want) {
			t.Fatalf("kafka-acls --list lacks %q:\n%s", want, tail(out, 20))
		}
	}
	if n := tb.Broker.ACLCount(); n != 4 {
		t.Fatalf("%d ACLs in the image after kafka-acls --add, want 4", n)
	}
	acls("--remove", "--force", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "orders")
	if out := acls("--list", "--topic", "orders"); strings.Contains(out, "operation=WRITE") || !strings.Contains(out, "operation=READ") {
		t.Fatalf("after --remove of WRITE:\n%s", tail(out, 20))
	}

	cfg := func(args ...string) string {
		return mustTool(t, "", "org.apache.kafka.tools.ConfigCommand", append([]string{"--bootstrap-server", addr, "--command-config", admin}, args...)...)
	}
	cfg("--alter", "--entity-type", "users", "--entity-name", "alice", "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2097152")
	cfg("--alter", "--entity-type", "clients", "--entity-default", "--add-config", "request_percentage=50")
	if out := cfg("--describe", "--entity-type", "users", "--entity-name", "alice"); !strings.Contains(out, "producer_byte_rate=1048576") {
		t.Fatalf("kafka-configs --describe users alice:\n%s", tail(out, 10))
	}
	if out := cfg("--describe", "--entity-type", "clients", "--entity-default"); !strings.Contains(out, "request_percentage=50") {
		t.Fatalf("kafka-configs --describe clients default:\n%s", tail(out, 10))
	}
	cfg("--alter", "--entity-type", "users", "--entity-name", "alice", "--delete-config", "consumer_byte_rate")
	d, err := kadm.NewClient(saslClient(t, tb, "admin")).DescribeClientQuotas(ctxT(t), false, nil)
	if err != nil || len(d) != 2 {
		t.Fatalf("quotas: %v %+v", err, d)
	}
}

// TestConnectionLimits: over max.connections.per.ip a connection is
// closed by the broker, unanswered if it sent a request, on every
// backend; closing one frees its slot. (127.0.0.1 is the only address a test can come from, so the
// override of another address shows only in the unit test.)
func TestConnectionLimits(t *testing.T) {
	for _, backend := range netBackends(t) {
		t.Run(backend, func(t *testing.T) {
			tb := testbroker.StartNet(t, backend, set("max.connections.per.ip", "2"))
			dial := func() *rawClient {
				c, err := net.Dial("tcp", tb.Addr)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				c.SetDeadline(time.Now().Add(10 * time.Second))
				return &rawClient{c: c}
			}
			a, b := dial(), dial()
			for _, rc := range []*rawClient{a, b} {
				if _, err := rc.roundTrip(kmsg.NewPtrApiVersionsRequest()); err != nil {
					t.Fatalf("a connection within the limit: %v", err)
				}
			}
			if _, err := dial().roundTrip(kmsg.NewPtrApiVersionsRequest()); err == nil {
				t.Fatal("a third connection from 127.0.0.1 was served")
			}
			// One that sends nothing is closed by the broker all the same.
			if n, err := dial().c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("a refused idle connection was left open (read %d, %v)", n, err)
			}
			a.c.Close()
			// The broker notices the close in its own time; a new
			// connection is admitted once it has.
			deadline := time.Now().Add(10 * time.Second)
			for {
				if _, err := dial().roundTrip(kmsg.NewPtrApiVersionsRequest()); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("the closed connection's slot was never freed")
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}
