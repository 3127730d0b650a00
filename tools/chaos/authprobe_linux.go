package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// authProbe logs in to every running, unpaused node of a sasl_ssl run
// every probeEvery with a fresh client (TLS, SCRAM-SHA-512 as clientUser)
// and counts the logins a node refused with SASL_AUTHENTICATION_FAILED:
// the workload's clients reconnect only when they must, so the probe is
// what finds how long after its start a node refuses a valid user.
type authProbe struct {
	c      *cluster
	cancel context.CancelFunc
	done   chan struct{}

	mu struct {
		sync.Mutex
		probes, refused int
		// sinceStart is the longest time from a node's start to a
		// refusal of it; byNode counts refusals per node.
		sinceStart time.Duration
		byNode     map[int32]int
		first      string // the first refusal in full
	}
}

const probeEvery = 500 * time.Millisecond

func startAuthProbe(c *cluster) *authProbe {
	ctx, cancel := context.WithCancel(context.Background())
	p := &authProbe{c: c, cancel: cancel, done: make(chan struct{})}
	p.mu.byNode = map[int32]int{}
	go p.loop(ctx)
	return p
}

func (p *authProbe) loop(ctx context.Context) {
	defer close(p.done)
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, nd := range p.c.snapshot() {
			if nd.running() && !nd.paused() {
				p.probe(ctx, nd)
			}
		}
	}
}

// probe logs in to nd once; only a refusal counts (a node that does not
// answer is the faults' business).
func (p *authProbe) probe(ctx context.Context, nd *node) {
	started := nd.startedAt()
	cl, err := kgo.NewClient(p.c.sec.clientOpts([]string{nd.addr()}, kgo.DialTimeout(time.Second), kgo.RequestRetries(0))...)
	if err != nil {
		return
	}
	defer cl.Close()
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = kmsg.NewPtrMetadataRequest().RequestWith(rctx, cl)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mu.probes++
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		return
	}
	p.mu.refused++
	p.mu.byNode[nd.id]++
	since := time.Since(started)
	p.mu.sinceStart = max(p.mu.sinceStart, since)
	if p.mu.first == "" {
		p.mu.first = fmt.Sprintf("node %d, %v after its start: %v", nd.id, since.Round(time.Millisecond), err)
	}
}

func (p *authProbe) stop() {
	p.cancel()
	<-p.done
}

// summary is the probe's line in the report.
func (p *authProbe) summary() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.refused == 0 {
		return fmt.Sprintf("0 of %d logins refused", p.mu.probes)
	}
	return fmt.Sprintf("%d of %d logins refused (by node %v), the latest %v after the node's start; first: %s",
		p.mu.refused, p.mu.probes, p.mu.byNode, p.mu.sinceStart.Round(10*time.Millisecond), p.mu.first)
}
