package main

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"
)

// Result lines are how a scenario reports, one per line on stdout:
//
//	##interop version <free text, e.g. "librdkafka 2.13.0">
//	##interop pass <capability> <detail>
//	##interop fail <capability> <what failed, with the broker's answer>
//	##interop skip <capability> <why it cannot run for this client>
//	##interop gap <capability> <what the broker does not offer yet>
//
// A gap is a feature Kafka has and Sluice does not serve yet (the client
// found out by asking); it is listed, not counted as a failure, and turns
// into a pass or a fail by itself once the broker serves it.
//
// Capability ids contain no spaces except the tool steps, which are quoted:
//
//	##interop pass "kafka-topics create" <detail>
const linePrefix = "##interop "

type line struct {
	verdict string // version, pass, fail, skip
	cap     string
	detail  string
}

// controlPrefix starts a cluster scenario's request to the driver (see
// restarter.control); the driver answers with one line on its stdin.
const controlPrefix = linePrefix + "broker "

// parseLines parses result lines; requests, when not nil, gets every
// control request (the text after controlPrefix).
func parseLines(r io.Reader, requests chan<- string) []line {
	var out []line
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		if i := strings.Index(sc.Text(), controlPrefix); i >= 0 && requests != nil {
			requests <- strings.TrimSpace(sc.Text()[i+len(controlPrefix):])
			continue
		}
		if l, ok := parseLine(sc.Text()); ok {
			out = append(out, l)
		}
	}
	_, _ = io.Copy(io.Discard, r) // never block the writer on a long line
	return out
}

func parseLine(s string) (line, bool) {
	i := strings.Index(s, linePrefix)
	if i < 0 {
		return line{}, false
	}
	s = s[i+len(linePrefix):]
	verdict, rest, _ := strings.Cut(s, " ")
	if verdict == "version" {
		return line{verdict: verdict, detail: strings.TrimSpace(rest)}, true
	}
	if verdict != "pass" && verdict != "fail" && verdict != "skip" && verdict != "gap" {
		return line{}, false
	}
	var capID, detail string
	if strings.HasPrefix(rest, `"`) {
		end := strings.Index(rest[1:], `"`)
		if end < 0 {
			return line{}, false
		}
		capID, detail = rest[1:end+1], rest[end+2:]
	} else {
		capID, detail, _ = strings.Cut(rest, " ")
	}
	if capID == "" {
		return line{}, false
	}
	return line{verdict: verdict, cap: capID, detail: strings.TrimSpace(detail)}, true
}

// outcome is one capability's verdict for one scenario.
type outcome struct {
	verdict string // pass, fail, skip
	detail  string
}

type scenarioResult struct {
	scenario   scenario
	lines      []line
	runErr     error
	brokerDied bool
	brokerLog  []string // broker warnings and errors logged during the run
	logPath    string
	elapsed    time.Duration

	version  string
	outcomes map[string]outcome
}

// finish folds the lines into one outcome per capability: a failure wins
// over a pass; a capability the scenario never reported fails with the
// reason the scenario stopped.
func (r *scenarioResult) finish() {
	r.version = r.scenario.version
	r.outcomes = map[string]outcome{}
	for _, l := range r.lines {
		switch l.verdict {
		case "version":
			r.version = l.detail
		case "fail":
			prev, seen := r.outcomes[l.cap]
			if seen && prev.verdict == "fail" {
				prev.detail += "; " + l.detail
				r.outcomes[l.cap] = prev
			} else {
				r.outcomes[l.cap] = outcome{"fail", l.detail}
			}
		default:
			if prev, seen := r.outcomes[l.cap]; !seen || prev.verdict != "fail" {
				r.outcomes[l.cap] = outcome{l.verdict, l.detail}
			}
		}
	}
	why := "not reached"
	switch {
	case r.brokerDied:
		why = "not reached: the broker process died"
	case r.runErr != nil:
		why = "not reached: scenario " + r.runErr.Error()
	}
	for _, c := range r.scenario.caps {
		if _, seen := r.outcomes[c]; !seen {
			r.outcomes[c] = outcome{"fail", why}
		}
	}
	if r.runErr != nil && r.failed() == 0 {
		// Every step passed but the program did not exit 0: say so.
		r.outcomes["exit"] = outcome{"fail", "scenario " + r.runErr.Error()}
	}
}

func (r *scenarioResult) failed() int {
	n := 0
	for _, o := range r.outcomes {
		if o.verdict == "fail" {
			n++
		}
	}
	return n
}

func (r *scenarioResult) summary() string {
	var pass, fail, skip int
	for _, o := range r.outcomes {
		switch o.verdict {
		case "pass":
			pass++
		case "fail":
			fail++
		case "skip", "gap":
			skip++
		}
	}
	return fmt.Sprintf("%d passed, %d failed, %d skipped", pass, fail, skip)
}

// capOrder is the order a scenario's capabilities are listed in: the
// declared ones first, then any extra it reported.
func (r *scenarioResult) capOrder() []string {
	order := slices.Clone(r.scenario.caps)
	var extra []string
	for c := range r.outcomes {
		if !slices.Contains(order, c) {
			extra = append(extra, c)
		}
	}
	sort.Strings(extra)
	return append(order, extra...)
}

// counts are verdict totals.
type counts struct{ pass, fail, skip int }

func (c counts) String() string {
	return fmt.Sprintf("%d passed, %d failed, %d skipped", c.pass, c.fail, c.skip)
}

func isCluster(r scenarioResult) bool {
	return r.scenario.table == tableClusterClients || r.scenario.table == tableClusterTools
}

// tally counts the verdicts of the single-node results, or of the
// cluster's.
func tally(results []scenarioResult, cluster bool) counts {
	var c counts
	for _, r := range results {
		if isCluster(r) != cluster {
			continue
		}
		for _, o := range r.outcomes {
			switch o.verdict {
			case "pass":
				c.pass++
			case "fail":
				c.fail++
			case "skip", "gap":
				c.skip++
			}
		}
	}
	return c
}

// report prints every failure (client, step, what the client was told) and
// the totals, single node and cluster, then both together as the last
// line; it returns whether everything passed.
func report(w io.Writer, results []scenarioResult) bool {
	for _, r := range results {
		where := ""
		if isCluster(r) {
			where = " [cluster]"
		}
		for _, c := range r.capOrder() {
			if o := r.outcomes[c]; o.verdict == "fail" {
				fmt.Fprintf(w, "FAIL %s%s / %s: %s\n", r.scenario.client, where, c, o.detail)
			}
		}
		if r.failed() > 0 {
			fmt.Fprintf(w, "     %s log: %s\n", r.scenario.id, r.logPath)
			for _, l := range r.brokerLog {
				fmt.Fprintf(w, "     broker: %s\n", l)
			}
		}
	}
	single, clustered := tally(results, false), tally(results, true)
	fmt.Fprintf(w, "interop: single node %v; three-broker cluster %v\n", single, clustered)
	fmt.Fprintf(w, "interop: %v\n", counts{single.pass + clustered.pass, single.fail + clustered.fail, single.skip + clustered.skip})
	return single.fail+clustered.fail == 0
}
