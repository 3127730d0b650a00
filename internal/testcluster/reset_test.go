package testcluster

import (
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// resetControllerConns destroys, on the controller's side, every
// established connection of the CONTROLLER listener at addr (ss -K, as a
// middlebox dropping idle connections would: the peers get a reset). It
// skips the test where the kernel cannot destroy sockets.
func resetControllerConns(t *testing.T, addr string) int {
	t.Helper()
	_, port, _ := net.SplitHostPort(addr)
	out, err := exec.Command("ss", "-K", "-t", "-n", "state", "established", "src", "127.0.0.1", "sport", "=", ":"+port).CombinedOutput()
	n := strings.Count(string(out), "127.0.0.1:"+port)
	if err != nil || n == 0 {
		t.Skipf("cannot destroy sockets with ss -K here (needs root and CONFIG_INET_DIAG_DESTROY): %v %s", err, out)
	}
	return n
}

// Regression (issue 10, noticed in review): an idle heartbeat connection
// reset while its broker lives was read as the broker's death, and the
// broker was fenced after the 500 ms grace because its next heartbeat was
// up to broker.heartbeat.interval.ms (2 s) away. Every connection of the
// active controller's CONTROLLER listener is reset, three times, mid
// interval: each broker sees its heartbeat connection close, reconnects
// and heartbeats at once, so no broker is fenced and no leadership moves.
func TestHeartbeatConnectionsReset(t *testing.T) {
	c := Start(t, 3, Options{})
	adm := kadm.NewClient(c.Client())
	createTopic(t, adm, "reset", 3, 3)
	var active int32
	c.WaitFor(10*time.Second, "an active controller", func() bool { active = c.ActiveController(); return active > 0 })
	var leaders map[int32]int32
	c.WaitFor(10*time.Second, "leaders", func() bool {
		leaders, _ = topicLeaders(t, c, c.Node(active), "reset")
		return len(leaders) == 3 && leaders[0] >= 0 && leaders[1] >= 0 && leaders[2] >= 0
	})
	for round := range 3 {
		time.Sleep(700 * time.Millisecond)
		n := resetControllerConns(t, c.Node(active).ControllerAddr)
		time.Sleep(2500 * time.Millisecond) // past the grace and a heartbeat interval
		after, _ := topicLeaders(t, c, c.Node(active), "reset")
		t.Logf("round %d: %d connections reset; leaders %v", round, n, after)
		for p, l := range leaders {
			if after[p] != l {
				t.Errorf("round %d: reset-%d moved from %d to %d after a connection reset", round, p, l, after[p])
			}
		}
	}
	c.WaitBrokers(3, 5*time.Second) // none fenced
	for _, nd := range c.Nodes {
		if strings.Contains(nd.Log(), "fenced=true") {
			t.Errorf("node %d was fenced:\n%s", nd.ID, nd.Log())
		}
	}
}
