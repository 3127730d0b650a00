package server

import (
	"testing"
	"time"

	"github.com/sluice-broker/sluice/engine"
)

func TestConnLimiter(t *testing.T) {
	cfg := engine.DefaultConfig().Authz
	cfg.MaxConnections, cfg.MaxConnectionsPerIP, cfg.MaxConnectionsPerIPOver = 4, 2, "10.0.0.9:0,10.0.0.8:3"
	l, err := newConnLimiter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1000, 0)
	for i, step := range []struct {
		ip   string
		want bool
		why  string
	}{
		{"10.0.0.1", true, ""}, {"10.0.0.1", true, ""}, {"10.0.0.1", false, "per-ip limit of 2"},
		{"10.0.0.9", false, "override of 0"},
		{"10.0.0.8", true, ""}, {"10.0.0.8", true, ""},
		{"10.0.0.8", false, "max.connections of 4 (the override of 3 would allow a third)"},
	} {
		if ok, _ := l.admit(step.ip, now); ok != step.want {
			t.Fatalf("step %d (%s): admitted %v; %s", i, step.ip, ok, step.why)
		}
	}
	l.release("10.0.0.1")
	if ok, _ := l.admit("10.0.0.1", now); !ok {
		t.Fatal("a released slot was not reused")
	}
	if _, err := newConnLimiter(engine.AuthzConfig{MaxConnectionsPerIPOver: "nonsense"}); err == nil {
		t.Fatal("bad overrides accepted")
	}
}

func TestConnCreationRate(t *testing.T) {
	cfg := engine.DefaultConfig().Authz
	cfg.MaxConnectionCreateRate = 2
	l, _ := newConnLimiter(cfg)
	now := time.Unix(1000, 0)
	n := 0
	for i := 0; i < 5; i++ {
		if ok, _ := l.admit("10.0.0.1", now); ok {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d of 5 admitted at once with a rate of 2/s", n)
	}
	if ok, _ := l.admit("10.0.0.1", now.Add(600*time.Millisecond)); !ok {
		t.Fatal("a token did not come back after 0.6 s")
	}
}
