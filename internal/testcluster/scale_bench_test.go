package testcluster

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// BenchmarkInProcCreatePartitions creates topics of 1,000 partitions RF=3
// (SLUICE_SCALE_TOPICS of them, 3 by default) on a fresh three-node
// in-process cluster per iteration, one CreateTopics each, as
// benchcompare kafka-cluster's scale step does with 10,000 partitions in
// processes; with -cpuprofile it shows where the controller and the
// brokers spend a creation. Once every ISR is full it reports what the
// three idle nodes cost together over 10 s: goroutines, CPU (cores) and
// context switches (the process's wake-ups) per second.
func BenchmarkInProcCreatePartitions(b *testing.B) {
	topics, perTopic := scaleTopics(), int32(1000)
	for b.Loop() {
		b.StopTimer()
		c := StartInProcess(b, 3)
		adm := kadm.NewClient(c.Client())
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		stopProfile := profileCreation(b)
		b.StartTimer()
		start := time.Now()
		var names []string
		for i := range topics {
			names = append(names, fmt.Sprintf("scale-%d", i))
			r, err := adm.CreateTopic(ctx, perTopic, 3, nil, names[i])
			if err != nil || r.Err != nil {
				b.Fatalf("create: %v %v", err, r.Err)
			}
		}
		b.Logf("created %d partitions RF=3 in %v", topics*int(perTopic), time.Since(start))
		b.StopTimer()
		stopProfile()
		c.WaitFor(5*time.Minute, "every ISR full", func() bool {
			for _, name := range names {
				if !inSync(ctx, adm, name, 3) {
					return false
				}
			}
			return true
		})
		b.Logf("every ISR full after %v", time.Since(start))
		idleCost(b, 10*time.Second)
		cancel()
		for _, nd := range c.Nodes {
			nd.Stop(b)
		}
		b.StartTimer()
	}
}

// idleCost logs the process's goroutines, CPU and context switches per
// second over d without clients.
func idleCost(b *testing.B, d time.Duration) {
	time.Sleep(2 * time.Second) // the last fetch sessions settle
	var r0, r1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	time.Sleep(d)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
	cpu := time.Duration(r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano())
	switches := (r1.Nvcsw + r1.Nivcsw) - (r0.Nvcsw + r0.Nivcsw)
	b.Logf("idle, three nodes together: %d goroutines, %.3f cores, %.0f context switches/s",
		runtime.NumGoroutine(), cpu.Seconds()/d.Seconds(), float64(switches)/d.Seconds())
}

// profileCreation writes a CPU profile of the creation alone to
// SLUICE_SCALE_CPUPROFILE, if set; the returned func ends it.
func profileCreation(b *testing.B) func() {
	path := os.Getenv("SLUICE_SCALE_CPUPROFILE")
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// scaleTopics is how many topics of 1,000 partitions the benchmark
// creates: SLUICE_SCALE_TOPICS, or 3.
func scaleTopics() int {
	if n, err := strconv.Atoi(os.Getenv("SLUICE_SCALE_TOPICS")); err == nil && n > 0 {
		return n
	}
	return 3
}
