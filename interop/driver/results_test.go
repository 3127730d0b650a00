package main

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestParseLine(t *testing.T) {
	cases := []struct {
		in   string
		want line
		ok   bool
	}{
		{"##interop pass codec-gzip 120 records", line{"pass", "codec-gzip", "120 records"}, true},
		{"##interop fail group phase 1: only 3 of 100", line{"fail", "group", "phase 1: only 3 of 100"}, true},
		{`##interop pass "kafka-topics create" --create`, line{"pass", "kafka-topics create", "--create"}, true},
		{"##interop skip idempotence", line{"skip", "idempotence", ""}, true},
		{"##interop version kafkajs 2.2.4", line{"version", "", "kafkajs 2.2.4"}, true},
		{"[stdout] ##interop pass list-offsets ok", line{"pass", "list-offsets", "ok"}, true},
		{"##interop maybe codec-none", line{}, false},
		{`##interop pass "unterminated`, line{}, false},
		{"unrelated output", line{}, false},
	}
	for _, c := range cases {
		got, ok := parseLine(c.in)
		if ok != c.ok || got != c.want {
			t.Errorf("parseLine(%q) = %+v, %v; want %+v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

func TestFinishFailsUnreportedAndKeepsFailures(t *testing.T) {
	r := scenarioResult{
		scenario: scenario{client: "c", version: "pinned", caps: []string{"a", "b", "c"}},
		lines: parseLines(strings.NewReader(strings.Join([]string{
			"##interop version real 1.0",
			"##interop fail a first",
			"##interop pass a later pass must not hide the failure",
			"##interop fail a second",
			"##interop pass b fine",
		}, "\n")), nil),
		runErr: errors.New("exit status 1"),
	}
	r.finish()
	if r.version != "real 1.0" {
		t.Errorf("version %q", r.version)
	}
	if o := r.outcomes["a"]; o.verdict != "fail" || o.detail != "first; second" {
		t.Errorf("a = %+v", o)
	}
	if o := r.outcomes["b"]; o.verdict != "pass" {
		t.Errorf("b = %+v", o)
	}
	if o := r.outcomes["c"]; o.verdict != "fail" || !strings.Contains(o.detail, "exit status 1") {
		t.Errorf("c = %+v", o)
	}
}

func TestFinishFlagsBadExitWhenAllPassed(t *testing.T) {
	r := scenarioResult{
		scenario: scenario{caps: []string{"a"}},
		lines:    []line{{"pass", "a", ""}},
		runErr:   errors.New("signal: killed"),
	}
	r.finish()
	if r.failed() != 1 || r.outcomes["exit"].verdict != "fail" {
		t.Errorf("outcomes %+v", r.outcomes)
	}
}

func TestReportAndMarkdown(t *testing.T) {
	ok := scenarioResult{scenario: scenario{id: "x", client: "Client X", version: "pinned", table: tableClients, caps: []string{"create-topic", "codec-none"}},
		lines: []line{{"pass", "create-topic", "made"}, {"skip", "codec-none", "no such codec"}}}
	ok.finish()
	bad := scenarioResult{scenario: scenario{id: "t", client: "Tool T", version: "pinned", table: tableTools, caps: []string{"step one"}},
		lines: []line{{"fail", "step one", "UNKNOWN_TOPIC_OR_PARTITION | from broker"}}}
	bad.finish()
	var out strings.Builder
	if report(&out, []scenarioResult{ok, bad}) {
		t.Error("report passed with a failure")
	}
	if !strings.Contains(out.String(), "FAIL Tool T / step one: UNKNOWN_TOPIC_OR_PARTITION") ||
		!strings.HasSuffix(out.String(), "interop: 1 passed, 1 failed, 1 skipped\n") {
		t.Errorf("report:\n%s", out.String())
	}
	md := renderMarkdown([]scenarioResult{ok, bad}, time.Unix(0, 0))
	for _, want := range []string{
		"| Client X | pinned | pass | skip | n/a |",
		"| Tool T | pinned | step one | **FAIL** |",
		`UNKNOWN_TOPIC_OR_PARTITION \| from broker`,
		"**1 passed, 1 failed.**",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

// TestMarkdownSecurityTable: a client's security scenario is a row of the
// security table, one column per securityCaps entry, not a row of the
// clients table.
func TestMarkdownSecurityTable(t *testing.T) {
	r := scenarioResult{scenario: scenario{id: "x-security", client: "Client X", version: "pinned", table: tableSecurity, caps: securityCapIDs},
		lines: []line{{"pass", "scram-user", "made"}, {"pass", "sasl-ssl", "50 records"}, {"skip", "wrong-password", "client bug"}}}
	r.finish()
	md := renderMarkdown([]scenarioResult{r}, time.Unix(0, 0))
	security := md[strings.Index(md, "## Security"):]
	for _, want := range []string{
		"| client | version | SCRAM user | SASL_SSL SCRAM-SHA-512 | wrong password | mutual TLS | TLS, no certificate | deleted user |",
		"| Client X | pinned | pass | pass | skip | **FAIL** | **FAIL** | **FAIL** |",
	} {
		if !strings.Contains(security, want) {
			t.Errorf("security section lacks %q:\n%s", want, security)
		}
	}
	if clients := md[:strings.Index(md, "## Security")]; strings.Contains(clients, "Client X") {
		t.Errorf("the security scenario is a row of another table:\n%s", clients)
	}
}
