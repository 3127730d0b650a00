package compare

import (
	"github.com/sluice-broker/sluice/bench"

	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Reading a Report: tables of medians with Sluice ÷ other ratios, the
// targets of issue 6, SVG charts and BENCHMARKS.md's generated sections.

// brokersOf lists the brokers that have runs, in the configured order.
func (rep *Report) brokersOf() []BrokerKind {
	var out []BrokerKind
	for _, b := range rep.Options.Brokers {
		for _, r := range rep.Runs {
			if r.Broker == b {
				out = append(out, b)
				break
			}
		}
	}
	return out
}

// ratio is Sluice's median over other's, or NaN.
func (rep *Report) ratio(workload, metric string, other BrokerKind) float64 {
	s, ns := rep.Median(workload, Sluice, metric)
	o, no := rep.Median(workload, other, metric)
	if ns == 0 || no == 0 || o == 0 {
		return math.NaN()
	}
	return s / o
}

func fmtRatio(v float64) string {
	if math.IsNaN(v) {
		return "–"
	}
	if v >= 10 {
		return fmt.Sprintf("%.0f×", v)
	}
	if v >= 0.1 {
		return fmt.Sprintf("%.2f×", v)
	}
	return fmt.Sprintf("%.3f×", v)
}

func fmtMetric(metric string, v float64) string {
	switch metric {
	case "zc_fraction", "sendfile_fraction":
		return fmt.Sprintf("%.4f", v)
	case "client_cpu_share":
		return fmt.Sprintf("%.2f", v)
	case "recs_per_produce", "recs_per_fetch":
		return fmt.Sprintf("%.1f", v)
	}
	return fmtValue(v)
}

// table is rows of cells for one workload: metric label, one column per
// broker, then Sluice ÷ each other broker. With spread, a broker's cell
// also shows the lowest and highest round.
func (rep *Report) table(w Workload, spread bool) (header []string, rows [][]string) {
	bs := rep.brokersOf()
	header = []string{"figure"}
	for _, b := range bs {
		header = append(header, b.Title())
	}
	var others []BrokerKind
	if containsKind(bs, Sluice) {
		for _, b := range bs {
			if b != Sluice {
				others = append(others, b)
				header = append(header, "Sluice/"+b.Title())
			}
		}
	}
	for _, m := range w.Metrics {
		row := []string{metricDefs[m].label}
		any := false
		for _, b := range bs {
			v, n := rep.Median(w.Name, b, m)
			if n == 0 {
				row = append(row, "–")
				continue
			}
			any = true
			cell := fmtMetric(m, v)
			if lo, hi := rep.spread(w.Name, b, m); spread && n > 1 && lo != hi {
				cell += fmt.Sprintf(" <sub>%s–%s</sub>", fmtMetric(m, lo), fmtMetric(m, hi))
			}
			row = append(row, cell)
		}
		for _, o := range others {
			row = append(row, fmtRatio(rep.ratio(w.Name, m, o)))
		}
		if any {
			rows = append(rows, row)
		}
	}
	return header, rows
}

// WriteSummary prints the tables as text.
func (rep *Report) WriteSummary(w io.Writer) {
	fmt.Fprintf(w, "\nbenchcompare (%s suite): %d round(s), medians\n", rep.Options.Suite, rep.Options.Rounds)
	if l := rep.Limits; l != nil {
		fmt.Fprintf(w, "machine: loopback sendfile %.0f MB/s at %.3f CPU-s/GB; sequential write %.0f MB/s (%.0f with fdatasync); receive + write %.0f MB/s at %.3f CPU-s/GB\n",
			l.SendfileMBps, l.SendfileCPUPerGB, l.WriteMBps, l.WriteSyncMBps, l.ReceiveWriteMBps, l.ReceiveWriteCPUPerGB)
	}
	for _, wl := range rep.Workloads {
		h, rows := rep.table(wl, false)
		fmt.Fprintf(w, "\n%s\n", wl.Title)
		widths := make([]int, len(h))
		for _, r := range append([][]string{h}, rows...) {
			for i, c := range r {
				widths[i] = max(widths[i], len([]rune(c)))
			}
		}
		for _, r := range append([][]string{h}, rows...) {
			for i, c := range r {
				pad := widths[i] - len([]rune(c))
				if i == 0 {
					fmt.Fprintf(w, "  %s%s", c, strings.Repeat(" ", pad))
				} else {
					fmt.Fprintf(w, "  %s%s", strings.Repeat(" ", pad), c)
				}
			}
			fmt.Fprintln(w)
		}
	}
	for _, t := range rep.Targets() {
		fmt.Fprintf(w, "target %-60s goal %-8s measured %-8s %s\n", t.Name, t.Goal, t.Measured, t.Verdict)
	}
	for _, r := range rep.Runs {
		if r.Err != "" {
			fmt.Fprintf(w, "run failed: round %d %s %s: %s\n", r.Round, r.Workload, r.Broker, r.Err)
		}
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}

// Target is one goal of issue 6, reported (not asserted).
type Target struct {
	Name, Goal, Measured, Verdict string
}

// Targets evaluates the goals that the report's runs have figures for.
func (rep *Report) Targets() []Target {
	if rep.Options.Suite != SuiteKafka {
		return nil
	}
	var out []Target
	has := func(w string) bool {
		for _, x := range rep.Workloads {
			if x.Name == w {
				return true
			}
		}
		return false
	}
	atLeast := func(name string, v, goal float64, unit string) {
		if math.IsNaN(v) {
			return
		}
		t := Target{Name: name, Goal: fmt.Sprintf("≥ %g%s", goal, unit), Measured: fmt.Sprintf("%.3g%s", v, unit)}
		if v >= goal {
			t.Verdict = "met"
		} else {
			t.Verdict = fmt.Sprintf("missed: %.0f%% of goal", 100*v/goal)
		}
		out = append(out, t)
	}
	atMost := func(name string, v, goal float64, unit string) {
		if math.IsNaN(v) {
			return
		}
		t := Target{Name: name, Goal: fmt.Sprintf("≤ %g%s", goal, unit), Measured: fmt.Sprintf("%.3g%s", v, unit)}
		if v <= goal {
			t.Verdict = "met"
		} else {
			t.Verdict = fmt.Sprintf("missed: %.1f× the goal", v/goal)
		}
		out = append(out, t)
	}
	for _, w := range rep.Workloads {
		if strings.HasPrefix(w.Name, "produce-") {
			atLeast("Sluice/Kafka produce MB/s, "+w.Name, rep.ratio(w.Name, "produce_mbps", Kafka), 2, "×")
		}
	}
	for _, p := range []string{"1p", "16p"} {
		for _, acks := range []string{"1", "all"} {
			w := "raw-produce-" + p + "-acks" + acks
			if has(w) {
				atLeast("Sluice/Kafka raw produce MB/s, "+w, rep.ratio(w, "produce_mbps", Kafka), 2, "×")
				atMost("Sluice/Kafka broker CPU per GB, "+w, rep.ratio(w, "cpu_per_gb", Kafka), 0.25, "×")
			}
		}
	}
	if has("raw-fetch") {
		atMost("Sluice/Kafka broker CPU per GB, raw-fetch", rep.ratio("raw-fetch", "cpu_per_gb", Kafka), 0.25, "×")
		// The same per record: Kafka's bytes include the cut batches it
		// sends again (resp_bytes_per_rec).
		atMost("Sluice/Kafka broker CPU per record, raw-fetch", rep.ratio("raw-fetch", "cpu_per_mrec", Kafka), 0.25, "×")
	}
	if has("catch-up") {
		atLeast("Sluice/Kafka catch-up consume MB/s (franz-go)", rep.ratio("catch-up", "consume_mbps", Kafka), 2, "×")
	}
	if has("raw-fetch") {
		atLeast("Sluice/Kafka catch-up consume MB/s (raw fetch)", rep.ratio("raw-fetch", "consume_mbps", Kafka), 2, "×")
		atLeast("Sluice/Kafka catch-up consume records/s (raw fetch)", rep.ratio("raw-fetch", "consume_rps", Kafka), 2, "×")
		if v, n := rep.Median("raw-fetch", Sluice, "sendfile_fraction"); n > 0 {
			atLeast("Sluice raw fetch ÷ loopback sendfile", v, 0.8, "")
		}
	}
	if has("latency-20MBps") {
		atMost("Sluice/Kafka produce-ack p99 at 20 MB/s", rep.ratio("latency-20MBps", "ack_p99", Kafka), 0.2, "×")
		atMost("Sluice/Kafka end-to-end p99 at 20 MB/s", rep.ratio("latency-20MBps", "e2e_p99", Kafka), 0.2, "×")
	}
	// Peak RSS: the largest median over workloads, each broker.
	worst := func(b BrokerKind) float64 {
		m := 0.0
		for _, w := range rep.Workloads {
			if v, n := rep.Median(w.Name, b, "rss_mb"); n > 0 {
				m = math.Max(m, v)
			}
		}
		return m
	}
	if s, k := worst(Sluice), worst(Kafka); s > 0 && k > 0 {
		atMost("Sluice/Kafka broker peak RSS (largest over workloads)", s/k, 0.1, "×")
	}
	for _, w := range []string{"catch-up", "raw-fetch"} {
		if v, n := rep.Median(w, Sluice, "zc_fraction"); n > 0 {
			atLeast("Sluice zero-copy fraction of fetch traffic, "+w, v, 0.99, "")
		}
	}
	return out
}

// aheadTolerance is how much worse than Kafka's a Sluice median must be to
// count as Kafka being ahead (rounding and noise aside).
const aheadTolerance = 0.02

// kafkaAhead lists the broker figures where Sluice's median is worse than
// Kafka's by more than aheadTolerance. The load generator's own CPU is not
// a broker figure.
func (rep *Report) kafkaAhead() []string {
	var out []string
	for _, w := range rep.Workloads {
		for _, m := range w.Metrics {
			def := metricDefs[m]
			s, ns := rep.Median(w.Name, Sluice, m)
			k, nk := rep.Median(w.Name, Kafka, m)
			if ns == 0 || nk == 0 || m == "sendfile_fraction" || m == "client_cpu_s" || m == "client_cpu_share" ||
				m == "recs_per_produce" || m == "recs_per_fetch" {
				continue
			}
			if m == "cpu_s" && slices.Contains(w.Metrics, "cpu_per_gb") {
				continue // throughputs differ: CPU per GB is the fair figure
			}
			if (def.higher && s < k*(1-aheadTolerance)) || (!def.higher && s > k*(1+aheadTolerance)) {
				out = append(out, fmt.Sprintf("%s — %s: Kafka %s, Sluice %s", w.Name, def.label, fmtMetric(m, k), fmtMetric(m, s)))
			}
		}
	}
	return out
}

// chartSpec is one SVG file.
type chartSpec struct {
	file  string
	title string // shown under the chart in the markdown
	chart Chart
}

// charts returns the report's charts.
func (rep *Report) charts() []chartSpec {
	bs := rep.brokersOf()
	prefix := string(rep.Options.Suite) + "-"
	bars := func(file, title, unit, metric string, names []string, labels []string, log bool) *chartSpec {
		c := Chart{Title: title, Unit: unit, Categories: labels, Log: log}
		have := false
		for _, b := range bs {
			s := Series{Name: b.Title(), Color: b.Color()}
			for _, n := range names {
				v, k := rep.Median(n, b, metric)
				if k == 0 {
					v = math.NaN()
				} else {
					have = true
				}
				s.Values = append(s.Values, v)
			}
			c.Series = append(c.Series, s)
		}
		if !have {
			return nil
		}
		return &chartSpec{file: prefix + file, title: title, chart: c}
	}
	pcts := []string{"p50", "p90", "p99", "p99.9", "max"}
	lines := func(file, title, workload string, pick func(*bench.Result) bench.LatencySummary) *chartSpec {
		c := Chart{Title: title, Unit: "ms (log scale)", Categories: pcts, Log: true, Lines: true}
		have := false
		for _, b := range bs {
			s := Series{Name: b.Title(), Color: b.Color()}
			for _, p := range pcts {
				var vs []float64
				for i := range rep.Runs {
					r := &rep.Runs[i]
					if r.Workload == workload && r.Broker == b && r.Result != nil && r.Err == "" {
						if v, ok := pick(r.Result).Percentile(p); ok && pick(r.Result).Count > 0 {
							vs = append(vs, v)
						}
					}
				}
				if len(vs) == 0 {
					s.Values = append(s.Values, math.NaN())
					continue
				}
				have = true
				s.Values = append(s.Values, median(vs))
			}
			c.Series = append(c.Series, s)
		}
		if !have {
			return nil
		}
		return &chartSpec{file: prefix + file, title: title, chart: c}
	}
	var names, labels []string
	for _, w := range rep.Workloads {
		names = append(names, w.Name)
		labels = append(labels, w.Name)
	}
	var specs []*chartSpec
	switch rep.Options.Suite {
	case SuiteKafka:
		var pn, pl []string
		for _, w := range rep.Workloads {
			if strings.HasPrefix(w.Name, "produce-") {
				pn = append(pn, w.Name)
				pl = append(pl, strings.ReplaceAll(strings.TrimPrefix(w.Name, "produce-"), "-", " "))
			}
		}
		consumeTitle := "Catch-up consume throughput (MB/s)"
		if l := rep.Limits; l != nil {
			consumeTitle = fmt.Sprintf("Catch-up consume throughput (MB/s; loopback sendfile limit %.0f)", l.SendfileMBps)
		}
		specs = append(specs,
			bars("produce.svg", "Max-throughput produce, 1 KiB records (MB/s)", "MB/s", "produce_mbps", pn, pl, false),
			bars("consume.svg", consumeTitle, "MB/s", "consume_mbps", []string{"catch-up", "raw-fetch"}, []string{"franz-go consumer", "raw fetch loop"}, false),
			lines("latency-ack.svg", "Produce-ack latency at 20,000 records/s (~20 MB/s)", "latency-20MBps", ack),
			lines("latency-e2e.svg", "End-to-end latency at 20,000 records/s (~20 MB/s)", "latency-20MBps", e2e),
			lines("many-producers-ack.svg", "Produce-ack latency, 100 producers × 50 records/s", "many-producers", ack),
			bars("rss.svg", "Broker peak RSS per workload (MB, log scale)", "MB", "rss_mb", names, shortLabels(labels), true),
			bars("cpu.svg", "Broker CPU seconds per run (log scale)", "CPU s", "cpu_s", names, shortLabels(labels), true),
		)
	case SuiteKfake:
		// Produce and consume come from two workloads: build it by hand.
		c := Chart{Title: "One producer / one consumer, 1 KiB records, 4 partitions (MB/s)", Unit: "MB/s", Categories: []string{"produce", "consume"}}
		have := false
		for _, b := range bs {
			p, n1 := rep.Median("i3-produce", b, "produce_mbps")
			cv, n2 := rep.Median("i3-consume", b, "consume_mbps")
			have = have || n1+n2 > 0
			c.Series = append(c.Series, Series{Name: b.Title(), Color: b.Color(), Values: []float64{nanIfZero(p, n1), nanIfZero(cv, n2)}})
		}
		if have {
			specs = append(specs, &chartSpec{file: prefix + "throughput.svg", title: c.Title, chart: c})
		}
		specs = append(specs, lines("latency-ack.svg", "Produce-ack latency at 2,000 records/s", "i3-latency", ack))
	}
	var out []chartSpec
	for _, s := range specs {
		if s != nil {
			out = append(out, *s)
		}
	}
	return out
}

func nanIfZero(v float64, n int) float64 {
	if n == 0 {
		return math.NaN()
	}
	return v
}

func shortLabels(ls []string) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		l = strings.TrimPrefix(l, "produce-")
		l = strings.ReplaceAll(l, "-acks", " acks=")
		l = strings.ReplaceAll(l, "many-producers", "100 clients")
		l = strings.ReplaceAll(l, "latency-20MBps", "20 MB/s")
		out[i] = l
	}
	return out
}

// WriteCharts writes the report's SVG charts into dir.
func (rep *Report) WriteCharts(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, c := range rep.charts() {
		if err := os.WriteFile(filepath.Join(dir, c.file), []byte(c.chart.SVG()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// spread is the lowest and highest round of a figure.
func (rep *Report) spread(workload string, b BrokerKind, metric string) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for i := range rep.Runs {
		r := &rep.Runs[i]
		if r.Workload != workload || r.Broker != b {
			continue
		}
		if v, ok := metricDefs[metric].get(r, rep.Limits); ok {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	return lo, hi
}
