package engine

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

func TestListenersParse(t *testing.T) {
	c := DefaultConfig()
	props := `listeners=INTERNAL://10.0.0.1:9091,SASL_SSL://0.0.0.0:9092,CONTROLLER://10.0.0.1:9192,SSL://:9093
advertised.listeners=SASL_SSL://kafka1.example.com:9092
listener.security.protocol.map=INTERNAL:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:PLAINTEXT,SSL:SSL
inter.broker.listener.name=INTERNAL
listener.name.sasl_ssl.ssl.keystore.location=/k.pem
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=x required;
ssl.keystore.location=/default.pem
connections.max.reauth.ms=1000
`
	unknown, err := c.ApplyProperties(strings.NewReader(props))
	if err != nil || len(unknown) > 0 {
		t.Fatalf("unknown %v err %v", unknown, err)
	}
	ls, err := c.BrokerListeners()
	if err != nil {
		t.Fatal(err)
	}
	want := []Listener{
		{Name: "INTERNAL", Protocol: "PLAINTEXT", Addr: "10.0.0.1:9091"},
		{Name: "SASL_SSL", Protocol: "SASL_SSL", Addr: "0.0.0.0:9092", Advertised: "kafka1.example.com:9092"},
		{Name: "SSL", Protocol: "SSL", Addr: ":9093"},
	}
	if !reflect.DeepEqual(ls, want) || c.Listen != "10.0.0.1:9091" || c.ControllerListen != "10.0.0.1:9192" {
		t.Fatalf("listeners %+v listen %q controller %q", ls, c.Listen, c.ControllerListen)
	}
	if c.SecurityValue("SASL_SSL", "ssl.keystore.location") != "/k.pem" || c.SecurityValue("SSL", "ssl.keystore.location") != "/default.pem" {
		t.Fatal("listener overrides")
	}
	if got := listenersString(&c); got != "INTERNAL://10.0.0.1:9091,SASL_SSL://0.0.0.0:9092,SSL://:9093,CONTROLLER://10.0.0.1:9192" {
		t.Fatalf("described listeners %q", got)
	}
	eps, err := advertisedEndpoints(&c)
	if err != nil || eps[0].name != "INTERNAL" || eps[1].host != "kafka1.example.com" || eps[2].host != "localhost" {
		t.Fatalf("endpoints %+v %v", eps, err)
	}
}

func TestListenersRefused(t *testing.T) {
	for name, props := range map[string]string{
		"bad address":  "listeners=PLAINTEXT://nohostport",
		"twice":        "listeners=PLAINTEXT://:1,PLAINTEXT://:2",
		"bad protocol": "listener.security.protocol.map=X:TLS",
	} {
		c := DefaultConfig()
		if _, err := c.ApplyProperties(strings.NewReader(props)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	c := DefaultConfig()
	c.ApplyProperties(strings.NewReader("listeners=CLIENT://:9092"))
	if _, err := c.BrokerListeners(); err == nil {
		t.Error("a listener without a protocol was accepted")
	}
	c = DefaultConfig()
	c.ApplyProperties(strings.NewReader("process.roles=broker,controller\ncontroller.quorum.voters=1@127.0.0.1:9192\nlisteners=SSL://:9093,SASL_SSL://:9094,CONTROLLER://:9192\nsecurity.inter.broker.protocol=SASL_SSL\ninter.broker.listener.name=SSL"))
	if _, err := c.BrokerListeners(); err == nil {
		t.Error("inter.broker.listener.name and security.inter.broker.protocol naming two listeners were accepted")
	}
	c = DefaultConfig()
	c.ApplyProperties(strings.NewReader("process.roles=broker,controller\ncontroller.quorum.voters=1@127.0.0.1:9192\nlisteners=PLAINTEXT://:9092,CONTROLLER://:9192\nsecurity.inter.broker.protocol=SASL_SSL"))
	if _, err := c.BrokerListeners(); err == nil {
		t.Error("security.inter.broker.protocol=SASL_SSL without a SASL_SSL listener was accepted")
	}
}

// TestInterBrokerListenerBySecurityProtocol: security.inter.broker.protocol
// picks the listener of that name as the inter-broker one (registered
// first, Listen and Advertise its address), whatever order the keys come
// in; the controller listener's protocol comes from the protocol map.
func TestInterBrokerListenerBySecurityProtocol(t *testing.T) {
	for _, props := range []string{
		"listeners=PLAINTEXT://:9092,SASL_SSL://:9094,CONTROLLER://:9192\nsecurity.inter.broker.protocol=SASL_SSL\nlistener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:SSL",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,CONTROLLER:SSL\nsecurity.inter.broker.protocol=SASL_SSL\nlisteners=PLAINTEXT://:9092,SASL_SSL://:9094,CONTROLLER://:9192",
	} {
		c := DefaultConfig()
		if _, err := c.ApplyProperties(strings.NewReader("process.roles=broker,controller\ncontroller.quorum.voters=1@127.0.0.1:9192\n" + props)); err != nil {
			t.Fatal(err)
		}
		if c.InterBrokerName() != ProtocolSASLSSL || c.Listen != ":9094" {
			t.Errorf("inter-broker listener %s at %q, want SASL_SSL at :9094", c.InterBrokerName(), c.Listen)
		}
		if _, err := c.BrokerListeners(); err != nil {
			t.Error(err)
		}
		if p := c.ControllerProtocol(); p != ProtocolSSL {
			t.Errorf("controller listener protocol %s, want SSL", p)
		}
	}
	c := DefaultConfig()
	if p := c.ControllerProtocol(); p != ProtocolPlaintext {
		t.Errorf("an unmapped CONTROLLER listener is %s, want PLAINTEXT", p)
	}
}

// TestReadmeSecurityExample: the README's three-node SASL_SSL config is a
// valid config of this broker, every key known, with no PLAINTEXT
// listener: the inter-broker and controller listeners are SASL_SSL.
func TestReadmeSecurityExample(t *testing.T) {
	data, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(data), "# node1.properties (node2, 3: node.id and the addresses change)\n")
	block, _, _ = strings.Cut(block, "```")
	if !ok || block == "" {
		t.Fatal("README's SASL_SSL example not found")
	}
	c := DefaultConfig()
	unknown, err := c.ApplyProperties(strings.NewReader(block))
	if err != nil || len(unknown) > 0 {
		t.Fatalf("unknown %v err %v", unknown, err)
	}
	ls, err := c.BrokerListeners()
	if err != nil || len(ls) != 1 || ls[0].Protocol != ProtocolSASLSSL || c.InterBrokerName() != ProtocolSASLSSL {
		t.Fatalf("%+v %v", ls, err)
	}
	if c.ControllerProtocol() != ProtocolSASLSSL || c.InterBroker.SASLMechanism != "SCRAM-SHA-512" || c.InterBroker.ControllerSASLMechanism != "PLAIN" {
		t.Fatalf("controller listener %s, mechanisms %+v", c.ControllerProtocol(), c.InterBroker)
	}
}
