package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/sluice-broker/sluice/tools/chaos/check"
)

// acks1Result is what acks=1 lost under leader kills: a measurement of
// Kafka's documented trade-off, not an anomaly.
type acks1Result struct {
	kills       int
	sent, acked int
	anomalies   check.Anomalies
}

// acks1Phase produces with acks=1 (no idempotence) to its own topic while
// leaders are SIGKILLed and restarted, then reads the topic back.
func (r *runner) acks1Phase() (*acks1Result, error) {
	const t = "chaos-acks1"
	c := r.c
	if err := createTopic(c.clientOpts(), t, r.o.partitions); err != nil {
		return nil, err
	}
	in := &injector{c: c, rng: rand.New(rand.NewPCG(r.o.seed, 13)), topic: t, parts: r.o.partitions, logf: r.logf}
	if err := c.waitFor(60*time.Second, "a full ISR", func() bool { return c.healed([]string{t}, in.counts()) }); err != nil {
		return nil, err
	}
	h := check.NewHistory()
	w, err := startWorkload(c.clientOpts(), h, t, r.o.partitions, 1, 0, 4*r.o.rate, false)
	if err != nil {
		return nil, err
	}
	r.logf("acks=1: %d leader kills", r.o.acks1Kills)
	time.Sleep(2 * time.Second)
	res := &acks1Result{}
	for range r.o.acks1Kills {
		f := &fault{kind: "kill-leader", partition: -1}
		r.runFault(in, h, f)
		res.kills++
		time.Sleep(time.Second)
	}
	if err := c.waitStable(in.topics(), in.counts(), stableFor, 3*time.Minute); err != nil {
		r.logf("acks=1: NOT HEALED: %v", err)
	}
	if err := w.stop(60 * time.Second); err != nil {
		r.logf("acks=1 workload stop: %v", err)
	}
	res.sent, res.acked, _ = h.Counts()
	res.anomalies, err = r.checkTopic(h, t, r.o.partitions, "")
	return res, err
}

// printReport writes the run's tables: the faults with their recovery
// times, the counts and anomalies by kind, and the acks=1 measurement.
func (r *runner) printReport(res *result, a1 *acks1Result) {
	p := func(format string, args ...any) { fmt.Fprintf(r.out, format+"\n", args...) }
	p("\n## Chaos run: seed %d, %d nodes, %d partitions (RF 3, min.insync.replicas 2), %v of faults, security %s\n",
		r.o.seed, r.o.nodes, r.o.partitions, r.o.duration, r.o.security)
	p("| # | fault | target | produce ok after | full ISR after heal | note |")
	p("|---|---|---|---|---|---|")
	for i, f := range res.faults {
		note := strings.TrimSpace(f.note + " " + f.err)
		if len(f.crashed) > 0 {
			note = strings.TrimSpace(fmt.Sprintf("nodes %v exited on their own; %s", f.crashed, note))
		}
		p("| %d | %s | %s | %s | %s | %s |", i+1, f.kind, f.detail, dur(f.produceRecovery), dur(f.isrRecovery), note)
	}
	p("\n### Recovery by fault kind (median / max)\n")
	p("| fault | count | produce ok after | full ISR after heal |")
	p("|---|---|---|---|")
	byKind := map[string][]*fault{}
	var kinds []string
	for _, f := range res.faults {
		if byKind[f.kind] == nil {
			kinds = append(kinds, f.kind)
		}
		byKind[f.kind] = append(byKind[f.kind], f)
	}
	for _, k := range kinds {
		var pr, isr []time.Duration
		for _, f := range byKind[k] {
			pr, isr = append(pr, f.produceRecovery), append(isr, f.isrRecovery)
		}
		p("| %s | %d | %s | %s |", k, len(byKind[k]), medMax(pr), medMax(isr))
	}
	p("\n### Records and anomalies (acks=all, idempotent)\n")
	p("| what | count |")
	p("|---|---|")
	p("| faults injected | %d |", len(res.faults))
	p("| faults not healed in 120 s | %d |", res.unhealed)
	p("| hiccups that moved leadership (flaps) | %d |", res.flaps())
	p("| values sent | %d |", res.sent)
	p("| acknowledged | %d |", res.acked)
	p("| failed (indeterminate) | %d |", res.failed)
	p("| polled by the group | %d |", res.polled)
	if res.copiers != "" {
		p("| transactional copiers | %s |", res.copiers)
	}
	if res.logins != "" {
		p("| SCRAM logins of a fresh client to each node every %v | %s |", probeEvery, res.logins)
	}
	for _, k := range check.Kinds {
		p("| anomaly: %s | %d |", k, len(res.anomalies[k]))
	}
	for _, k := range check.Kinds {
		for i, s := range res.anomalies[k] {
			if i == 20 {
				p("%s: … %d more", k, len(res.anomalies[k])-20)
				break
			}
			p("%s: %s", k, s)
		}
	}
	if a1 != nil {
		p("\n### acks=1 under %d leader kills (Kafka's trade-off, not counted as anomalies)\n", a1.kills)
		p("| what | count |")
		p("|---|---|")
		p("| values sent | %d |", a1.sent)
		p("| acknowledged | %d |", a1.acked)
		for _, k := range check.Kinds {
			if n := len(a1.anomalies[k]); n > 0 {
				p("| %s | %d |", k, n)
			}
		}
	}
	if res.anomalies.Total() > 0 || res.unhealed > 0 || res.flaps() > 0 {
		p("\nTo reproduce: seed %d, faults %q (fixed order: %v); broker logs:", r.o.seed, r.o.faults, r.o.fixed)
		for _, nd := range r.c.nodes {
			p("  node %d: %s", nd.id, nd.logPath)
		}
	}
}

func dur(d time.Duration) string {
	if d == 0 {
		return "—"
	}
	return d.Round(10 * time.Millisecond).String()
}

func medMax(ds []time.Duration) string {
	var ok []time.Duration
	for _, d := range ds {
		if d > 0 {
			ok = append(ok, d)
		}
	}
	if len(ok) == 0 {
		return "—"
	}
	slices.Sort(ok)
	return dur(ok[len(ok)/2]) + " / " + dur(ok[len(ok)-1])
}
