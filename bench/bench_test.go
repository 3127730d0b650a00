package bench

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRecorderPercentiles(t *testing.T) {
	r := NewRecorder()
	for i := 1; i <= 1000; i++ {
		r.Record(time.Duration(i) * time.Millisecond)
	}
	s := r.Summary()
	if s.Count != 1000 {
		t.Fatalf("count %d", s.Count)
	}
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want)/want > 0.01 {
			t.Errorf("%s = %v, want ≈ %v", name, got, want)
		}
	}
	near("p50", s.P50, 500)
	near("p90", s.P90, 900)
	near("p99", s.P99, 990)
	near("p99.9", s.P999, 999)
	near("max", s.Max, 1000)
	near("mean", s.Mean, 500.5)
	if v, ok := s.Percentile("p99.9"); !ok || v != s.P999 {
		t.Errorf("Percentile(p99.9) = %v, %v", v, ok)
	}
	if _, ok := s.Percentile("p42"); ok {
		t.Error("Percentile(p42) should not exist")
	}
}

func TestRecorderClampsOutOfRange(t *testing.T) {
	r := NewRecorder()
	r.Record(-time.Second)
	r.Record(time.Hour)
	s := r.Summary()
	if s.Count != 2 || s.Max < 299_000 {
		t.Fatalf("summary %+v: want both recorded, max clamped to 5 min", s)
	}
	if (NewRecorder().Summary() != LatencySummary{}) {
		t.Fatal("empty recorder should summarize to zero")
	}
}

func TestPayloadsStampAndIncompressible(t *testing.T) {
	p := newPayloads(1024, 77, false, 1)
	at := time.Unix(1700000000, 123456789)
	a, b := p.next(at), p.next(at)
	if len(a) != 1024 {
		t.Fatalf("len %d", len(a))
	}
	got, ok := sentAt(a, 77)
	if !ok || !got.Equal(at) {
		t.Fatalf("sentAt = %v, %v; want %v", got, ok, at)
	}
	if _, ok := sentAt(a, 78); ok {
		t.Fatal("value of another run accepted")
	}
	if _, ok := sentAt(a[:10], 77); ok {
		t.Fatal("short value accepted")
	}
	if bytes.Equal(a[headerSize:], b[headerSize:]) {
		t.Fatal("two values share their random bytes")
	}
	c := newPayloads(1024, 77, true, 1).next(at)
	if !bytes.Contains(c, []byte("quick brown fox")) {
		t.Fatal("compressible payload is not text")
	}
}

// batch builds a record-batch header (the fields skipBatches reads) with

// body bytes of padding.

func batch(base int64, lastDelta int32, body int) []byte {
	b := make([]byte, 61+body)
	binary.BigEndian.PutUint64(b[0:8], uint64(base))
	binary.BigEndian.PutUint32(b[8:12], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[23:27], uint32(lastDelta))
	return b
}

func TestSkipBatches(t *testing.T) {
	var buf []byte
	buf = append(buf, batch(100, 9, 50)...) // 100..109
	buf = append(buf, batch(110, 4, 10)...) // 110..114
	partial := batch(115, 3, 100)           // cut off below
	buf = append(buf, partial[:40]...)
	next, n := skipBatches(buf, 100)
	if next != 115 || n != 15 {
		t.Fatalf("next %d, records %d; want 115, 15", next, n)
	}
	// Fetching from the middle of a batch: its earlier records are not new.
	next, n = skipBatches(batch(100, 9, 0), 105)
	if next != 110 || n != 5 {
		t.Fatalf("mid-batch: next %d, records %d; want 110, 5", next, n)
	}
	if next, n = skipBatches(nil, 7); next != 7 || n != 0 {
		t.Fatalf("empty: %d, %d", next, n)
	}
}

func TestSkipTags(t *testing.T) {
	// Two tags: (0, "ab") and (1, ""), then the body.
	in := []byte{2, 0, 2, 'a', 'b', 1, 0, 'X'}
	out, err := skipTags(in)
	if err != nil || string(out) != "X" {
		t.Fatalf("skipTags = %q, %v", out, err)
	}
	if _, err := skipTags([]byte{1, 0, 5, 'a'}); err == nil {
		t.Fatal("truncated tag accepted")
	}
}

func TestConfigValidate(t *testing.T) {
	ok := DefaultConfig()
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Config){
		"record size":  func(c *Config) { c.RecordSize = 8 },
		"acks":         func(c *Config) { c.Acks = "2" },
		"compression":  func(c *Config) { c.Compression = "brotli" },
		"mode":         func(c *Config) { c.Mode = "sideways" },
		"no consumers": func(c *Config) { c.Mode, c.Consumers = ModeCatchUp, 0 },
		"no end":       func(c *Config) { c.Duration, c.Records = 0, 0 },
		"partitions":   func(c *Config) { c.Partitions = 0 },
		"rf":           func(c *Config) { c.ReplicationFactor = -1 },
		"min isr":      func(c *Config) { c.ReplicationFactor, c.MinInsyncReplicas = 3, 4 },
	} {
		c := DefaultConfig()
		mut(&c)
		if c.Validate() == nil {
			t.Errorf("%s: invalid config accepted", name)
		}
	}
}

func TestResultJSONRoundTrip(t *testing.T) {
	res := &Result{Config: DefaultConfig(), Produce: newThroughput(2000, 2_048_000, 2*time.Second)}
	res.ProduceLatency = LatencySummary{Count: 2000, P50: 1.5, P99: 4}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := WriteJSONFile(path, res); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	var back Result
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if back.Produce.RecordsPerSec != 1000 || back.Produce.MBPerSec != 1.024 || back.ProduceLatency.P99 != 4 {
		t.Fatalf("round trip lost data: %+v", back.Produce)
	}
	if !strings.Contains(string(raw), `"p99_9_ms"`) {
		t.Fatal("JSON field names changed")
	}
	var text bytes.Buffer
	res.WriteText(&text)
	if !strings.Contains(text.String(), "1000 records/s") {
		t.Fatalf("text report: %s", text.String())
	}
}

func TestMachineLimitsSmall(t *testing.T) {
	dir := t.TempDir()
	w, ws, err := SequentialWrite(dir, 8<<20, time.Second)
	if err != nil || w <= 0 || ws <= 0 {
		t.Fatalf("write: %v %v %v", w, ws, err)
	}
	s, _, err := SendfileLoopback(dir, 8<<20, 200*time.Millisecond)
	if err != nil || s <= 0 {
		t.Fatalf("sendfile: %v %v", s, err)
	}
	// It once hung: its sender blocked in a write the reader's close did
	// not reset while a duplicate of the reader's socket stayed open.
	rw, cpu, err := ReceiveWrite(dir, 8<<20, 200*time.Millisecond)
	if err != nil || rw <= 0 || cpu <= 0 {
		t.Fatalf("receive and write: %v MB/s, %v s/GB, %v", rw, cpu, err)
	}
}

// fakeReport is a Kafka-suite report with two rounds of made-up figures.
