package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/netpoll"
)

// TestConfigFileOneRead: one server.properties carries engine keys, their
// aliases and the network keys; the broker runs with all of them, the
// flags override the file, and DescribeConfigs reports the file's values
// as static.
func TestConfigFileOneRead(t *testing.T) {
	dir, addr := t.TempDir(), freeAddr(t)
	props := filepath.Join(t.TempDir(), "server.properties")
	os.WriteFile(props, []byte(strings.Join([]string{
		"process.roles=broker,controller", // stock Kafka, accepted and ignored
		"broker.id=7",
		"log.retention.ms=5000",
		"log.retention.hours=1", // the more specific log.retention.ms wins
		"sluice.net=epoll",
		"sluice.net.loops=2",
	}, "\n")), 0o644)
	p := startProc(t, dir, addr, "--config", props, "--net", "std")
	// The listener accepts before "listening" is logged: wait for the line.
	p.waitLog("listening")
	if out := p.stderr.String(); !strings.Contains(out, "net=std") || strings.Contains(out, "unknown config key") {
		t.Errorf("want the --net flag over the file, no unknown keys:\n%s", out)
	}
	rcs, err := kadm.NewClient(client(t, addr)).DescribeBrokerConfigs(context.Background(), 7)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On("7", nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe broker 7: %v %v", err, rc.Err)
	}
	want := map[string]string{"node.id": "7", "broker.id": "7", "log.retention.ms": "5000", "sluice.net": "std", "sluice.net.loops": "2"}
	for _, c := range rc.Configs {
		if v, ok := want[c.Key]; ok {
			if c.MaybeValue() != v || c.Source != kmsg.ConfigSourceStaticBrokerConfig {
				t.Errorf("%s: %q from %v, want %q from the file", c.Key, c.MaybeValue(), c.Source, v)
			}
			delete(want, c.Key)
		}
	}
	if len(want) != 0 {
		t.Errorf("not described: %v", want)
	}

	bad := filepath.Join(t.TempDir(), "bad.properties")
	os.WriteFile(bad, []byte("sluice.net=fast\n"), 0o644)
	out, err := exec.Command(binPath, "serve", "--config", bad, "--data-dir", t.TempDir(), "--listen", freeAddr(t)).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "sluice.net") {
		t.Fatalf("bad backend accepted or not named: err=%v\n%s", err, out)
	}
}

// TestNetBackendsKnown: every backend netpoll serves is a valid sluice.net.
func TestNetBackendsKnown(t *testing.T) {
	c := engine.DefaultConfig()
	for _, b := range []string{netpoll.BackendUring, netpoll.BackendEpoll, netpoll.BackendStd, "auto"} {
		if err := c.Set("sluice.net", b); err != nil {
			t.Errorf("%s: %v", b, err)
		}
	}
}
