package server

// Connection limits, with Kafka's keys: max.connections (all listeners),
// max.connections.per.ip with max.connections.per.ip.overrides
// (host:count,...), max.connection.creation.rate (new connections per
// second, broker-wide). A connection over a limit is refused and counts
// against nothing: its handler's deadline (netpoll.Deadliner) has passed,
// so the network layer closes it at once (goroutine backend) or at the
// event loop's next tick, and a request it sends first is not answered.
// (Kafka closes an over-limit connection per ip at accept, and makes one
// over max.connections or the creation rate wait in the accept queue
// instead.)

import (
	"fmt"
	"math"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/netpoll"
)

// connLimiter counts open connections per address and admits new ones.
type connLimiter struct {
	max, perIP int
	overrides  map[string]int
	rate       float64 // connections per second; +Inf for none

	mu struct {
		sync.Mutex
		total  int
		byIP   map[string]int
		tokens float64 // creation-rate bucket, at most rate
		last   time.Time
	}
}

func newConnLimiter(c engine.AuthzConfig) (*connLimiter, error) {
	l := &connLimiter{max: limit(c.MaxConnections), perIP: limit(c.MaxConnectionsPerIP), rate: math.Inf(1)}
	if c.MaxConnectionCreateRate > 0 && c.MaxConnectionCreateRate < math.MaxInt32 {
		l.rate = float64(c.MaxConnectionCreateRate)
	}
	var err error
	if l.overrides, err = parseIPOverrides(c.MaxConnectionsPerIPOver); err != nil {
		return nil, err
	}
	l.mu.byIP = map[string]int{}
	l.mu.tokens = l.rate
	return l, nil
}

func limit(n int32) int { return int(max(n, 0)) }

// parseIPOverrides reads host:count,host:count.
func parseIPOverrides(s string) (map[string]int, error) {
	out := map[string]int{}
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		i := strings.LastIndexByte(item, ':')
		n, err := strconv.Atoi(item[i+1:])
		if i <= 0 || err != nil || n < 0 {
			return nil, fmt.Errorf("max.connections.per.ip.overrides: %q is not host:count", item)
		}
		out[item[:i]] = n
	}
	return out, nil
}

// admit counts a new connection from ip, or reports why it is refused. A
// nil limiter (a handler built without one, in tests) admits everything.
func (l *connLimiter) admit(ip string, now time.Time) (bool, string) {
	if l == nil {
		return true, ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	perIP := l.perIP
	if n, ok := l.overrides[ip]; ok {
		perIP = n
	}
	if !math.IsInf(l.rate, 1) {
		if !l.mu.last.IsZero() {
			l.mu.tokens = min(l.rate, l.mu.tokens+now.Sub(l.mu.last).Seconds()*l.rate)
		}
		l.mu.last = now
	}
	switch {
	case l.mu.total >= l.max:
		return false, "max.connections"
	case l.mu.byIP[ip] >= perIP:
		return false, "max.connections.per.ip"
	case l.mu.tokens < 1:
		return false, "max.connection.creation.rate"
	}
	l.mu.tokens--
	l.mu.total++
	l.mu.byIP[ip]++
	return true, ""
}

// release uncounts a connection admitted from ip.
func (l *connLimiter) release(ip string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.mu.total--
	if l.mu.byIP[ip]--; l.mu.byIP[ip] <= 0 {
		delete(l.mu.byIP, ip)
	}
}

// ipOf is the address without the port.
func ipOf(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// refused is the handler of a connection over a limit: past its deadline
// from the start, and a request closes it.
type refused struct{}

func (refused) Serve(_ []byte, reply func(netpoll.Reply)) { reply(&engine.Response{Close: true}) }
func (refused) Closed()                                   {}
func (refused) Deadline() int64                           { return 1 } // long past: close now
