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
	admit := func(ip string) bool { ok, _ := l.admit(ip, now); return ok }
	if !admit("10.0.0.1") || !admit("10.0.0.1") || admit("10.0.0.1") {
		t.Fatal("per-ip limit of 2")
	}
	if admit("10.0.0.9") {
		t.Fatal("override of 0 admitted")
	}
	if !admit("10.0.0.8") || !admit("10.0.0.8") || admit("10.0.0.8") {
		t.Fatal("max.connections of 4 (override 3 would allow a third)")
	}
	l.release("10.0.0.1")
	if !admit("10.0.0.1") {
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
