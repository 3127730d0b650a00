package compare

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Reading a ClusterReport: the figures of the three-node comparison as
// Sluice ÷ Kafka, for the summary, BENCHMARKS.md and charts.

// Stat summarizes samples: nearest-rank percentiles (p99 of fewer than 100
// samples is the largest), the median as the middle (or the mean of the two
// middle) samples.
type Stat struct {
	N        int
	Median   float64
	P50, P99 float64
	Min, Max float64
}

// Summarize is the Stat of vs (all zero when empty).
func Summarize(vs []float64) Stat {
	if len(vs) == 0 {
		return Stat{}
	}
	s := append([]float64(nil), vs...)
	sort.Float64s(s)
	return Stat{N: len(s), Median: median(s), P50: nearestRank(s, 50), P99: nearestRank(s, 99), Min: s[0], Max: s[len(s)-1]}
}

// nearestRank is the p-th percentile of sorted by the nearest-rank method:
// the smallest sample with at least p% of the samples at or below it.
func nearestRank(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	k := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(k, 1), len(sorted))-1]
}

// faultSamples pools a fault figure's samples of broker b over all rounds.
func (rep *ClusterReport) faultSamples(figure string, b BrokerKind) (ms []float64, errs []string) {
	for _, f := range rep.Faults {
		if f.Figure == figure && f.Broker == b {
			ms = append(ms, f.MS...)
			errs = append(errs, f.Errors...)
		}
	}
	return ms, errs
}

// replicationRatios is, per round where both ran, rf3-Np-max ÷ rf1-Np-max
// produce MB/s of broker b.
func (rep *ClusterReport) replicationRatios(parts int, b BrokerKind) []float64 {
	byRound := func(w string) map[int]float64 {
		out := map[int]float64{}
		for i := range rep.Runs {
			r := &rep.Runs[i]
			if r.Workload == w && r.Broker == b {
				if v, ok := metricDefs["produce_mbps"].get(r, nil); ok && v > 0 {
					out[r.Round] = v
				}
			}
		}
		return out
	}
	rf3, rf1 := byRound(fmt.Sprintf("rf3-%dp-max", parts)), byRound(fmt.Sprintf("rf1-%dp-max", parts))
	var out []float64
	for round, v := range rf3 {
		if base, ok := rf1[round]; ok {
			out = append(out, v/base)
		}
	}
	sort.Float64s(out)
	return out
}

// summaryRow is one line of the figures table.
type summaryRow struct {
	figure string
	kafka  string
	sluice string
	ratio  string
}

// cell renders a median with its range.
func cell(st Stat, unit func(float64) string) string {
	if st.N == 0 {
		return "–"
	}
	s := unit(st.Median)
	if st.N > 1 && st.Min != st.Max {
		s += fmt.Sprintf(" <sub>%s–%s</sub>", unit(st.Min), unit(st.Max))
	}
	return s
}

func ratioOf(s, k Stat, pick func(Stat) float64) string {
	if s.N == 0 || k.N == 0 || pick(k) == 0 {
		return "–"
	}
	return fmtRatio(pick(s) / pick(k))
}

// runStat is the Stat over rounds of a throughput metric.
func (rep *ClusterReport) runStat(workload string, b BrokerKind, metric string) Stat {
	var vs []float64
	for i := range rep.Runs {
		r := &rep.Runs[i]
		if r.Workload == workload && r.Broker == b {
			if v, ok := metricDefs[metric].get(r, nil); ok {
				vs = append(vs, v)
			}
		}
	}
	return Summarize(vs)
}

// summaryRows are the headline figures, in the brief's order.
func (rep *ClusterReport) summaryRows() []summaryRow {
	var rows []summaryRow
	med := func(s Stat) float64 { return s.Median }
	add := func(figure string, k, s Stat, unit func(float64) string, pick func(Stat) float64) {
		if k.N == 0 && s.N == 0 {
			return
		}
		rows = append(rows, summaryRow{figure, cell(k, unit), cell(s, unit), ratioOf(s, k, pick)})
	}
	num := func(v float64) string { return fmtValue(v) }
	for _, parts := range []int{1, 16} {
		w := fmt.Sprintf("rf3-%dp-max", parts)
		p := fmt.Sprintf("%d partition%s", parts, plural(parts))
		add("acks=all RF=3, "+p+": produce MB/s", rep.runStat(w, Kafka, "produce_mbps"), rep.runStat(w, Sluice, "produce_mbps"), num, med)
		add("acks=all RF=3, "+p+": broker CPU s per GB (3 brokers)", rep.runStat(w, Kafka, "cpu_per_gb"), rep.runStat(w, Sluice, "cpu_per_gb"), num, med)
		for _, r := range rep.Cluster.Rates {
			f, rate := fixedName(parts, r), fmtValue(r*1024/1e6)
			add(fmt.Sprintf("acks=all RF=3, %s: produce-ack p50 ms at %s MB/s", p, rate), rep.runStat(f, Kafka, "ack_p50"), rep.runStat(f, Sluice, "ack_p50"), num, med)
			add(fmt.Sprintf("acks=all RF=3, %s: produce-ack p99 ms at %s MB/s", p, rate), rep.runStat(f, Kafka, "ack_p99"), rep.runStat(f, Sluice, "ack_p99"), num, med)
		}
	}
	for _, parts := range []int{1, 16} {
		add(fmt.Sprintf("replication overhead, %d partition%s: RF=3 acks=all ÷ RF=1 acks=1 MB/s", parts, plural(parts)),
			Summarize(rep.replicationRatios(parts, Kafka)), Summarize(rep.replicationRatios(parts, Sluice)),
			func(v float64) string { return fmt.Sprintf("%.2f", v) }, med)
	}
	pct := func(name, figure string) {
		km, _ := rep.faultSamples(figure, Kafka)
		sm, _ := rep.faultSamples(figure, Sluice)
		k, s := Summarize(km), Summarize(sm)
		if k.N == 0 && s.N == 0 {
			return
		}
		n := func(st Stat) string {
			if st.N == 0 {
				return "–"
			}
			return fmt.Sprintf("%s <sub>n=%d</sub>", fmtValue(st.P50), st.N)
		}
		rows = append(rows, summaryRow{name + " p50 ms", n(k), n(s), ratioOf(s, k, func(s Stat) float64 { return s.P50 })})
		p99 := func(st Stat) string {
			if st.N == 0 {
				return "–"
			}
			return fmtValue(st.P99)
		}
		rows = append(rows, summaryRow{name + " p99 ms", p99(k), p99(s), ratioOf(s, k, func(s Stat) float64 { return s.P99 })})
	}
	pct("SIGKILL of the leader → first acks=all produce on the new leader,", "kill")
	pct("controlled shutdown (SIGTERM of a leader → exit),", "shutdown")
	pct("metadata propagation (CreateTopics answered → leader in every broker's Metadata),", "metadata")
	k, s := rep.scaleOK(Kafka), rep.scaleOK(Sluice)
	if k != nil || s != nil {
		size := func(r *ScaleResult) string {
			if r == nil {
				return "–"
			}
			return fmt.Sprint(r.Partitions)
		}
		rows = append(rows, summaryRow{"scale: partitions (RF=3, over 3 brokers)", size(k), size(s), ""})
		sc := func(name string, get func(*ScaleResult) []float64, unit func(float64) string) {
			var ks, ss Stat
			if k != nil {
				ks = Summarize(get(k))
			}
			if s != nil {
				ss = Summarize(get(s))
			}
			rows = append(rows, summaryRow{name, cell(ks, unit), cell(ss, unit), sameSize(k, s, ratioOf(ss, ks, med))})
		}
		mb := func(v float64) string { return fmtValue(v / 1e6) }
		sc("scale: resident memory per broker, MB (median of the 3, min–max)", func(r *ScaleResult) []float64 { return int64s(r.RSS) }, mb)
		sc("scale: idle CPU per broker, % of a core", func(r *ScaleResult) []float64 { return scaled(r.IdleCPU, 100) }, num)
		one := func(v float64) []float64 { return []float64{v} }
		secs := func(v float64) string { return fmtValue(v) }
		sc("scale: create the partitions, s", func(r *ScaleResult) []float64 { return one(r.CreateSeconds) }, secs)
		sc("scale: cold start of all 3 → every partition led, s", func(r *ScaleResult) []float64 { return one(r.ColdLedSeconds) }, secs)
		sc("scale: cold start of all 3 → every follower in sync, s", func(r *ScaleResult) []float64 { return one(r.ColdSeconds) }, secs)
		sc("scale: resident memory per broker after the cold start, MB", func(r *ScaleResult) []float64 { return int64s(r.ColdRSS) }, mb)
	}
	return rows
}

func sameSize(k, s *ScaleResult, ratio string) string {
	if k == nil || s == nil || k.Partitions != s.Partitions {
		return "–"
	}
	return ratio
}

// scaleOK is broker b's largest successful scale result, or nil.
func (rep *ClusterReport) scaleOK(b BrokerKind) *ScaleResult {
	var best *ScaleResult
	for i := range rep.Scale {
		r := &rep.Scale[i]
		if r.Broker == b && r.Err == "" && (best == nil || r.Partitions > best.Partitions) {
			best = r
		}
	}
	return best
}

func int64s(vs []int64) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = float64(v)
	}
	return out
}

func scaled(vs []float64, f float64) []float64 {
	out := make([]float64, len(vs))
	for i, v := range vs {
		out[i] = v * f
	}
	return out
}

// WriteClusterSummary prints the figures as text.
func (rep *ClusterReport) WriteClusterSummary(w io.Writer) {
	fmt.Fprintf(w, "\nbenchcompare kafka-cluster: %d round(s); load average %s before, %s after\n", rep.Options.Rounds, rep.LoadBefore, rep.LoadAfter)
	for _, r := range rep.summaryRows() {
		strip := func(s string) string {
			s = strings.ReplaceAll(s, " <sub>", " (")
			return strings.ReplaceAll(s, "</sub>", ")")
		}
		fmt.Fprintf(w, "  %-100s Kafka %-22s Sluice %-22s %s\n", r.figure, strip(r.kafka), strip(r.sluice), r.ratio)
	}
	for _, r := range rep.Scale {
		fmt.Fprintf(w, "scale %s %d: %s\n", r.Broker, r.Partitions, r.brief())
	}
	for _, n := range rep.allNotes() {
		fmt.Fprintln(w, "note:", n)
	}
}

// allNotes are the run's notes plus every failed step.
func (rep *ClusterReport) allNotes() []string {
	notes := append([]string(nil), rep.Notes...)
	for _, r := range rep.Runs {
		if r.Err != "" {
			notes = append(notes, fmt.Sprintf("round %d, %s on %s failed: %s", r.Round, r.Workload, r.Broker.Title(), firstLine(r.Err)))
		}
	}
	for _, f := range rep.Faults {
		for _, e := range f.Errors {
			notes = append(notes, fmt.Sprintf("round %d, %s on %s: %s", f.Round, f.Figure, f.Broker.Title(), firstLine(e)))
		}
	}
	for _, s := range rep.Scale {
		if s.Err != "" {
			notes = append(notes, fmt.Sprintf("scale, %d partitions on %s failed: %s", s.Partitions, s.Broker.Title(), firstLine(s.Err)))
		}
	}
	return notes
}

const clusterBegin = "<!-- BEGIN sluice-vs-kafka-cluster: generated by `make bench-kafka-cluster`; edits here are overwritten -->"
const clusterEnd = "<!-- END sluice-vs-kafka-cluster -->"

// UpdateClusterMarkdown rewrites the three-node section of the markdown
// file at path (appending it if the markers are not there yet).
func (rep *ClusterReport) UpdateClusterMarkdown(path, chartDir string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	return os.WriteFile(path, []byte(replaceSection(string(old), clusterBegin, clusterEnd, rep.ClusterMarkdown(path, chartDir))), 0o644)
}

// replaceSection puts body between begin and end in s, or appends the
// marked section when s lacks the markers.
func replaceSection(s, begin, end, body string) string {
	i, j := strings.Index(s, begin), strings.Index(s, end)
	if i < 0 || j < i {
		return strings.TrimRight(s, "\n") + "\n\n" + begin + "\n" + body + end + "\n"
	}
	return s[:i+len(begin)] + "\n" + body + s[j:]
}

// ClusterMarkdown renders the generated three-node section.
func (rep *ClusterReport) ClusterMarkdown(mdPath, chartDir string) string {
	var b strings.Builder
	m, o, co := rep.Machine, rep.Options, rep.Cluster
	fmt.Fprintf(&b, "_Measured %s at commit `%s`, %d round(s)%s; load average (1, 5, 15 min) %s before the run, %s after. Regenerate with `make bench-kafka-cluster`._\n\n",
		rep.Started.UTC().Format("2006-01-02 15:04 MST"), shortCommit(m.Commit), o.Rounds, quickNote(o), orUnknown(rep.LoadBefore), orUnknown(rep.LoadAfter))
	b.WriteString("### Method\n\n")
	fmt.Fprintf(&b, "- **Machine**: %d CPUs, %s, %s memory, kernel %s; all six broker processes (three per system, one system at a time) and the load generator share it and talk over 127.0.0.1.\n",
		m.CPUs, orUnknown(m.CPUModel), orUnknown(m.MemTotal), orUnknown(m.Kernel))
	if containsKind(o.Brokers, Kafka) {
		fmt.Fprintf(&b, "- **Kafka %s**: three KRaft nodes, each broker and controller voter (`controller.quorum.voters`, static quorum), each formatted with `kafka.tools.StorageTool` and started as `java %s -XX:+UseG1GC -XX:MaxGCPauseMillis=20 … kafka.Kafka server.properties` on %s. Kafka's defaults otherwise: `broker.session.timeout.ms` 9000, `replica.lag.time.max.ms` 30000, one replica fetcher.\n",
			m.Kafka, KafkaClusterHeap, orUnknown(m.JavaVersion))
		props := KafkaClusterProperties(1, "127.0.0.1:PORT1", "127.0.0.1:CPORT1", "1@127.0.0.1:CPORT1,2@127.0.0.1:CPORT2,3@127.0.0.1:CPORT3", "DATA_DIR/node1/logs")
		fmt.Fprintf(&b, "\n  <details><summary>Kafka node 1's server.properties</summary>\n\n  ```properties\n%s  ```\n  </details>\n\n", indent(props, "  "))
	}
	b.WriteString("- **Sluice**: three `sluice serve --config node.properties` processes, each a broker and controller voter, formatted with `sluice format --cluster-id ID --config node.properties`; defaults otherwise (also `broker.session.timeout.ms` 9000).\n")
	props := SluiceClusterProperties(1, "127.0.0.1:PORT1", "127.0.0.1:CPORT1", "1@127.0.0.1:CPORT1,2@127.0.0.1:CPORT2,3@127.0.0.1:CPORT3", "DATA_DIR/node1/logs")
	fmt.Fprintf(&b, "\n  <details><summary>Sluice node 1's config</summary>\n\n  ```properties\n%s  ```\n  </details>\n\n", indent(props, "  "))
	fmt.Fprintf(&b, "- **Rounds**: each round starts a fresh %d-node cluster of each system in turn (%s) on fresh data directories, warms it up with a %v acks=all produce (JIT), runs the throughput workloads (%v each, a new topic each), then the round's share of the fault figures, and destroys it. Throughput figures are medians over rounds, min–max in small print; ratios are Sluice ÷ Kafka of the medians.\n",
		co.Nodes, brokerOrder(o.Brokers), o.Warmup, o.Duration)
	b.WriteString("- **Load**: `sluice bench` (franz-go) in the runner's process, bootstrapping from all three nodes: 1 KiB random values, no compression, linger 0, batches up to 1 MB, idempotent producer with acks=all. Broker CPU is user+system time from `/proc/PID/stat` of all three nodes added up, over the run (topic creation included), divided by the GB the client produced.\n")
	fmt.Fprintf(&b, "- **Failover** (%d kills in all): a 1-partition RF=3 topic with min.insync.replicas=2; a franz-go producer (acks=all, idempotent, retry backoff 10 ms, metadata refreshed at most every 10 ms) produces one record synchronously, the partition's leader gets SIGKILL, and the producer at once produces records one at a time until one is acknowledged: that acknowledgement's time from the kill is the sample. The node is then restarted on its data dir and the next kill waits until the ISR is full again. Percentiles over all kills of all rounds (nearest rank: with fewer than 100 samples p99 is the largest).\n", co.Kills)
	fmt.Fprintf(&b, "- **Controlled shutdown** (%d in all): SIGTERM to the leader of a 1-partition RF=3 topic, timed to the process's exit; restarted, ISR full again before the next.\n", co.Shutdowns)
	fmt.Fprintf(&b, "- **Metadata propagation** (%d topics in all): CreateTopics of a 1-partition RF=3 topic; from its response until each of the three brokers, asked directly with a Metadata request every millisecond, names a leader; the sample is the last broker's.\n", co.Creates)
	join := func(ns []int) string {
		var out []string
		for _, n := range ns {
			out = append(out, fmt.Sprint(n))
		}
		return strings.Join(out, ", ")
	}
	sizes := "Sluice " + join(co.ScalePartitions) + "; Kafka " + join(co.KafkaScaleSizes)
	fmt.Fprintf(&b, "- **Scale**: a fresh cluster per system; topics of 1,000 partitions, RF=3, created one CreateTopics at a time up to the size (sizes tried: %s); once every ISR is full and 5 s have passed, each node's CPU over %v idle (no clients) and its resident memory (`VmRSS`); then all three nodes get SIGTERM at once, and are started again together: the times are from that start to every partition having a leader and to every ISR being full, in a node's Metadata polled every 0.5 s. Each step is bounded by %v (Kafka's by %v).\n",
		sizes, time.Duration(co.ScaleIdle), time.Duration(co.ScaleLimit), time.Duration(co.KafkaScaleLimit))
	if len(rep.LoadSamples) > 0 {
		fmt.Fprintf(&b, "- **Machine load** (1, 5, 15-minute load averages on 2 cores, other work included) as each step began: %s.\n", strings.Join(rep.LoadSamples, "; "))
	}
	if o.Nice != 0 {
		fmt.Fprintf(&b, "- **Priority**: the runner and the brokers ran at nice %d (every thread, so that the brokers inherit it).\n", o.Nice)
	}
	fmt.Fprintf(&b, "- **Command**: `%s`\n\n", strings.TrimSpace(o.Command))

	b.WriteString("### Figures\n\n")
	var rows [][]string
	for _, r := range rep.summaryRows() {
		rows = append(rows, []string{r.figure, r.kafka, r.sluice, r.ratio})
	}
	writeTable(&b, []string{"figure", "Kafka " + KafkaVersion, "Sluice", "Sluice ÷ Kafka"}, rows)
	if s := rep.sustainedNote(); s != "" {
		b.WriteString(s + "\n\n")
	}

	if len(rep.Workloads) > 0 {
		b.WriteString("### Throughput workloads\n\n")
		for _, w := range rep.Workloads {
			h, rows := rep.table(w, true)
			if len(rows) == 0 {
				continue
			}
			fmt.Fprintf(&b, "#### %s\n\n`sluice bench --brokers N1,N2,N3 %s --replication-factor %d", w.Title, benchFlags(w.Config), max(w.Config.ReplicationFactor, 1))
			if w.Config.MinInsyncReplicas > 0 {
				fmt.Fprintf(&b, " --min-insync-replicas %d", w.Config.MinInsyncReplicas)
			}
			b.WriteString("`\n\n")
			writeTable(&b, h, rows)
		}
	}
	if len(rep.Scale) > 0 {
		b.WriteString("### Scale runs\n\n")
		var rows [][]string
		for _, r := range rep.Scale {
			if r.Err != "" {
				rows = append(rows, []string{r.Broker.Title(), fmt.Sprint(r.Partitions), "failed: " + firstLine(r.Err), "", "", "", ""})
				continue
			}
			var rss []string
			for _, v := range r.RSS {
				rss = append(rss, fmtValue(float64(v)/1e6))
			}
			var cpu []string
			for _, v := range r.IdleCPU {
				cpu = append(cpu, fmt.Sprintf("%.1f%%", 100*v))
			}
			rows = append(rows, []string{r.Broker.Title(), fmt.Sprint(r.Partitions),
				fmt.Sprintf("%.1f s (+%.1f s to full ISRs)", r.CreateSeconds, r.InSyncSeconds),
				strings.Join(rss, ", "), strings.Join(cpu, ", "), fmt.Sprintf("%.1f s", r.StopSeconds),
				fmt.Sprintf("%.1f s / %.1f s", r.ColdLedSeconds, r.ColdSeconds)})
		}
		writeTable(&b, []string{"system", "partitions", "create", "RSS per node, MB", "idle CPU per node", "stop all (SIGTERM)", "cold start: all led / all in sync"}, rows)
	}
	if specs := rep.clusterCharts(); len(specs) > 0 && chartDir != "" {
		b.WriteString("### Charts\n\n")
		rel, err := filepath.Rel(filepath.Dir(mdPath), chartDir)
		if err != nil {
			rel = chartDir
		}
		for _, c := range specs {
			fmt.Fprintf(&b, "![%s](%s)\n\n", c.title, filepath.ToSlash(filepath.Join(rel, c.file)))
		}
	}
	if notes := rep.allNotes(); len(notes) > 0 {
		b.WriteString("### Run notes\n\n")
		for _, n := range notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "_Took %s._\n", rep.Finished.Sub(rep.Started).Round(time.Second))
	return b.String()
}

// clusterCharts: produce MB/s per workload, and the fault figures' p50.
func (rep *ClusterReport) clusterCharts() []chartSpec {
	var out []chartSpec
	bs := rep.brokersOf()
	var names, labels []string
	for _, w := range rep.Workloads {
		if strings.HasSuffix(w.Name, "-max") {
			names = append(names, w.Name)
			labels = append(labels, strings.TrimSuffix(w.Name, "-max"))
		}
	}
	if len(names) > 0 {
		c := Chart{Title: "Three nodes: max-throughput produce, 1 KiB records (MB/s)", Unit: "MB/s", Categories: labels}
		have := false
		for _, b := range bs {
			s := Series{Name: b.Title(), Color: b.Color()}
			for _, n := range names {
				v, k := rep.Median(n, b, "produce_mbps")
				have = have || k > 0
				s.Values = append(s.Values, nanIfZero(v, k))
			}
			c.Series = append(c.Series, s)
		}
		if have {
			out = append(out, chartSpec{file: "cluster-produce.svg", title: c.Title, chart: c})
		}
	}
	figs := []struct{ key, label string }{{"kill", "SIGKILL → produce"}, {"shutdown", "controlled shutdown"}, {"metadata", "metadata propagation"}}
	c := Chart{Title: "Three nodes: failover and metadata, p50 (ms, log scale)", Unit: "ms", Log: true}
	for _, f := range figs {
		c.Categories = append(c.Categories, f.label)
	}
	have := false
	for _, b := range []BrokerKind{Kafka, Sluice} {
		s := Series{Name: b.Title(), Color: b.Color()}
		for _, f := range figs {
			ms, _ := rep.faultSamples(f.key, b)
			st := Summarize(ms)
			have = have || st.N > 0
			s.Values = append(s.Values, nanIfZero(st.P50, st.N))
		}
		c.Series = append(c.Series, s)
	}
	if have {
		out = append(out, chartSpec{file: "cluster-faults.svg", title: c.Title, chart: c})
	}
	return out
}

// WriteClusterCharts writes the three-node charts into dir.
func (rep *ClusterReport) WriteClusterCharts(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, c := range rep.clusterCharts() {
		if err := os.WriteFile(filepath.Join(dir, c.file), []byte(c.chart.SVG()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// reportCluster is `benchcompare report` for a saved three-node report.
func reportCluster(in, md, charts string) error {
	raw, err := os.ReadFile(in)
	if err != nil {
		return err
	}
	var rep ClusterReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		return fmt.Errorf("%s: %w", in, err)
	}
	rep.WriteClusterSummary(os.Stdout)
	if charts != "" {
		if err := rep.WriteClusterCharts(charts); err != nil {
			return err
		}
	}
	if md != "" {
		return rep.UpdateClusterMarkdown(md, charts)
	}
	return nil
}

// sustainedNote says what rate the fixed-rate runs reached, against the
// target: the latency figures hold at the rate both systems sustained.
func (rep *ClusterReport) sustainedNote() string {
	var parts []string
	for _, r := range rep.Cluster.Rates {
		for _, p := range []int{1, 16} {
			var got []string
			for _, b := range rep.brokersOf() {
				if st := rep.runStat(fixedName(p, r), b, "produce_rps"); st.N > 0 {
					got = append(got, fmt.Sprintf("%s %s (lowest round %s)", b.Title(), fmtValue(st.Median), fmtValue(st.Min)))
				}
			}
			if len(got) > 0 {
				parts = append(parts, fmt.Sprintf("target %s, %d partition%s: %s", fmtValue(r), p, plural(p), strings.Join(got, ", ")))
			}
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("Records/s the fixed-rate runs reached (a shortfall means the system did not sustain the rate, and its latency then includes the backlog): %s.",
		strings.Join(parts, "; "))
}
