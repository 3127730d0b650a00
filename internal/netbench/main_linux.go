// Command netbench measures Sluice's network backends side by side: each
// backend runs as a real broker in a child process (so its CPU time and
// memory are its own), and one load generator drives them all, in
// interleaved repetitions so that a noisy neighbour hurts every backend
// alike. It prints a Markdown report (BENCHMARKS.md, "Network layer").
//
//	go run ./internal/netbench [-brokers uring,epoll,std] [-reps 3] [-d 3s]
//
// A broker spec is a backend name with optional modifiers:
// "uring:handoff" (accept-and-hand-off instead of SO_REUSEPORT),
// "epoll:workers=2" (ConnHandler.Serve on 2 worker goroutines),
// "std:env=GOGC=200" (an environment variable for the broker).
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

func main() {
	serve := flag.Bool("serve", false, "child mode: run one broker")
	backend := flag.String("net", "", "child: backend")
	data := flag.String("data", "", "child: data directory")
	loops := flag.Int("loops", 0, "child: event loops")
	workers := flag.Int("workers", 0, "child: Serve workers")
	accept := flag.String("accept", "", "child: accept mode")

	brokers := flag.String("brokers", "uring,epoll,std", "broker specs to compare")
	reps := flag.Int("reps", 3, "repetitions of each measurement (the median is reported)")
	dur := flag.Duration("d", 3*time.Second, "duration of each measurement")
	conns := flag.String("conns", "1,100,10000", "connection counts for the small-request rate")
	skip := flag.String("skip", "", "comma-separated phases to skip: small, idle, produce, fetch")
	dataBase := flag.String("datadir", "", "parent of the brokers' data directories (default: the temp dir; /dev/shm keeps disk writeback out of produce)")
	flag.Parse()
	if *serve {
		if err := serveMain(*backend, *data, *loops, *workers, *accept); err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
			os.Exit(1)
		}
		return
	}
	cfg := runConfig{reps: *reps, d: *dur, skip: map[string]bool{}, dataBase: *dataBase}
	for _, s := range strings.Split(*skip, ",") {
		cfg.skip[s] = true
	}
	for _, c := range strings.Split(*conns, ",") {
		n, err := strconv.Atoi(c)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bad -conns:", err)
			os.Exit(2)
		}
		cfg.conns = append(cfg.conns, n)
	}
	if err := run(cfg, strings.Split(*brokers, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "netbench:", err)
		os.Exit(1)
	}
}

type runConfig struct {
	dataBase string
	reps     int
	d        time.Duration
	conns    []int
	skip     map[string]bool
}

// samples collects repeated measurements by key.
type samples map[string][]float64

func (s samples) add(key string, v float64) { s[key] = append(s[key], v) }

func (s samples) median(key string) float64 {
	v := append([]float64(nil), s[key]...)
	if len(v) == 0 {
		return 0
	}
	sort.Float64s(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func parseSpec(spec string) (backend, accept string, workers int, env []string) {
	parts := strings.Split(spec, ":")
	backend = parts[0]
	for _, p := range parts[1:] {
		switch {
		case p == "handoff" || p == "reuseport":
			accept = p
		case strings.HasPrefix(p, "workers="):
			workers, _ = strconv.Atoi(strings.TrimPrefix(p, "workers="))
		case strings.HasPrefix(p, "env="):
			env = append(env, strings.TrimPrefix(p, "env="))
		}
	}
	return
}

func run(cfg runConfig, specs []string) error {
	tmp, err := os.MkdirTemp(cfg.dataBase, "netbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	var bs []*brokerProc
	defer func() {
		for _, b := range bs {
			b.stop()
		}
	}()
	for i, spec := range specs {
		backend, accept, workers, env := parseSpec(spec)
		b, err := startBroker(spec, backend, fmt.Sprintf("%s/b%d", tmp, i), 0, workers, accept, env)
		if err != nil {
			return err
		}
		bs = append(bs, b)
		if err := createTopic(b.addr, "md", nil); err != nil {
			return err
		}
		if err := createTopic(b.addr, "produce", map[string]string{"segment.bytes": "67108864", "retention.bytes": "268435456"}); err != nil {
			return err
		}
	}
	res := samples{}
	note := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	note("netbench: %d CPUs, GOMAXPROCS %d, %s per measurement, %d reps", runtime.NumCPU(), runtime.GOMAXPROCS(0), cfg.d, cfg.reps)
	apis := []api{{"ApiVersions", encode(apiVersionsRequest())}, {"Metadata", encode(metadataRequest("md"))}}

	// Small requests with few connections: all brokers, interleaved.
	if !cfg.skip["small"] {
		for _, n := range cfg.conns {
			if n > 1000 {
				continue
			}
			fdsBy := map[*brokerProc][]int{}
			for _, b := range bs {
				fds, err := dialAll(b.addr, n)
				if err != nil {
					return err
				}
				defer closeFds(fds)
				fdsBy[b] = fds
			}
			for r := 0; r < cfg.reps; r++ {
				for _, api := range apis {
					for _, b := range bs {
						v, cpu, err := rate(b, fdsBy[b], api.req, 500*time.Millisecond, cfg.d)
						if err != nil {
							return fmt.Errorf("%s %s x%d: %w", b.name, api.name, n, err)
						}
						res.add(key(b, api.name, n), v)
						res.add(key(b, api.name+"cpu", n), float64(cpu.Nanoseconds())/1000)
						res.add(key(b, api.name+"client", n), float64(lastClientCPU.Nanoseconds())/1000)
						note("%-16s %-12s conns=%-6d %10.0f req/s %6.1f µs CPU/req", b.name, api.name, n, v, float64(cpu.Nanoseconds())/1000)
					}
				}
			}
			for _, b := range bs {
				closeFds(fdsBy[b])
			}
		}
	}

	// Idle memory, then the rate with many connections: the client end of
	// 10,000 connections to every broker at once would not fit the
	// descriptor limit, so each repetition opens them to one broker at a
	// time, measures, and resets them (no TIME_WAIT pile-up).
	for _, n := range cfg.conns {
		if n <= 1000 || cfg.skip["idle"] && cfg.skip["small"] {
			continue
		}
		for r := 0; r < cfg.reps; r++ {
			for _, b := range bs {
				if err := manyConns(cfg, b, n, apis, res, note, r == 0 || !cfg.skip["small"]); err != nil {
					return err
				}
			}
		}
	}

	if !cfg.skip["produce"] {
		for r := 0; r < cfg.reps; r++ {
			for _, b := range bs {
				v, err := runProduce(b, cfg.d)
				if err != nil {
					return fmt.Errorf("%s produce: %w", b.name, err)
				}
				res.add(key(b, "produce", 0), v.MBps)
				res.add(key(b, "producecpu", 0), v.CPUms)
				note("%-16s produce %8.0f MB/s, broker CPU %.0f ms/GB", b.name, v.MBps, v.CPUms)
			}
		}
	}

	if !cfg.skip["fetch"] {
		raws := map[*brokerProc]*rawSendfile{}
		for _, b := range bs {
			size, err := loadFetchTopic(b.addr)
			if err != nil {
				return fmt.Errorf("%s: load fetch topic: %w", b.name, err)
			}
			raw, err := startRawSendfile(b.dataDir, size)
			if err != nil {
				return err
			}
			defer raw.close()
			raws[b] = raw
			if _, err := runFetch(b, time.Second, size); err != nil { // page the data in
				return fmt.Errorf("%s fetch: %w", b.name, err)
			}
			b.batchSize = size
		}
		for r := 0; r < cfg.reps; r++ {
			for _, b := range bs {
				v, err := runFetch(b, cfg.d, b.batchSize)
				if err != nil {
					return fmt.Errorf("%s fetch: %w", b.name, err)
				}
				w, err := runRaw(raws[b], cfg.d)
				if err != nil {
					return fmt.Errorf("raw sendfile: %w", err)
				}
				res.add(key(b, "fetch", 0), v.MBps)
				res.add(key(b, "fetchcpu", 0), v.CPUms)
				res.add(key(b, "raw", 0), w.MBps)
				res.add(key(b, "ratio", 0), v.MBps/w.MBps)
				note("%-16s fetch %8.0f MB/s (raw sendfile %8.0f MB/s, ratio %.2f), broker CPU %.0f ms/GB", b.name, v.MBps, w.MBps, v.MBps/w.MBps, v.CPUms)
			}
		}
	}
	report(os.Stdout, cfg, bs, res)
	return nil
}

func key(b *brokerProc, what string, n int) string { return fmt.Sprintf("%s|%s|%d", b.name, what, n) }

// manyConns opens n connections to b, records the set-up time and the
// memory they cost, measures the request rates on them and resets them.
func manyConns(cfg runConfig, b *brokerProc, n int, apis []api, res samples, note func(string, ...any), rates bool) error {
	before, t0 := b.rss(), time.Now()
	fds, err := dialAll(b.addr, n)
	if err != nil {
		return fmt.Errorf("%s: dial %d: %w", b.name, n, err)
	}
	defer resetFds(fds)
	if err := warmConns(fds, apis[0].req); err != nil {
		return fmt.Errorf("%s: warm: %w", b.name, err)
	}
	setup := time.Since(t0)
	time.Sleep(time.Second)
	perConn := float64(b.rss()-before) / float64(n)
	res.add(key(b, "setup", n), setup.Seconds())
	if _, seen := res[key(b, "idle", n)]; !seen {
		// Only a fresh broker's growth counts: later rounds reuse the
		// memory (goroutine stacks, pools) the first one left behind.
		res.add(key(b, "idle", n), perConn)
	}
	note("%-16s %d connections opened and served once in %v; %.1f KiB RSS each", b.name, n, setup.Round(time.Millisecond), perConn/1024)
	if !rates || cfg.skip["small"] {
		return nil
	}
	for _, api := range apis {
		v, cpu, err := rate(b, fds, api.req, time.Second, cfg.d)
		if err != nil {
			return fmt.Errorf("%s %s x%d: %w", b.name, api.name, n, err)
		}
		res.add(key(b, api.name, n), v)
		res.add(key(b, api.name+"cpu", n), float64(cpu.Nanoseconds())/1000)
		res.add(key(b, api.name+"client", n), float64(lastClientCPU.Nanoseconds())/1000)
		note("%-16s %-12s conns=%-6d %10.0f req/s %6.1f µs CPU/req", b.name, api.name, n, v, float64(cpu.Nanoseconds())/1000)
	}
	return nil
}

type api struct {
	name string
	req  []byte
}
