package main

import (
	"fmt"
	"io"
	"runtime"
	"strings"
)

// report prints the medians as Markdown tables.
func report(w io.Writer, cfg runConfig, bs []*brokerProc, res samples) {
	where := "the temp dir"
	if cfg.dataBase != "" {
		where = cfg.dataBase
	}
	fmt.Fprintf(w, "Medians of %d runs of %s each; %d CPUs; load generator and brokers share the machine; data in %s.\n\n", cfg.reps, cfg.d, runtime.NumCPU(), where)
	head := func(cols ...string) {
		fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
	}
	var names []string
	for _, b := range bs {
		names = append(names, b.name)
	}
	base := bs[len(bs)-1] // the reference is listed last (std)
	if !cfg.skip["small"] {
		fmt.Fprintf(w, "Small requests, responses per second (× %s in brackets):\n\n", base.name)
		head(append([]string{"request", "connections"}, names...)...)
		for _, api := range []string{"ApiVersions", "Metadata"} {
			for _, n := range cfg.conns {
				row := []string{api, fmt.Sprint(n)}
				ref := res.median(key(base, api, n))
				for _, b := range bs {
					v := res.median(key(b, api, n))
					row = append(row, fmt.Sprintf("%.0f (%.2f×)", v, v/ref))
				}
				fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
			}
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "Broker CPU time per request, µs (user+system of the broker process; less sensitive to other load than the rate):\n\n")
		head(append([]string{"request", "connections"}, names...)...)
		for _, api := range []string{"ApiVersions", "Metadata"} {
			for _, n := range cfg.conns {
				row := []string{api, fmt.Sprint(n)}
				for _, b := range bs {
					row = append(row, fmt.Sprintf("%.1f", res.median(key(b, api+"cpu", n))))
				}
				fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
			}
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "Load generator CPU time per request, µs (the same client for every broker; on a shared machine it bounds how far broker savings show in the rate):\n\n")
		head(append([]string{"request", "connections"}, names...)...)
		for _, api := range []string{"ApiVersions", "Metadata"} {
			for _, n := range cfg.conns {
				row := []string{api, fmt.Sprint(n)}
				for _, b := range bs {
					row = append(row, fmt.Sprintf("%.1f", res.median(key(b, api+"client", n))))
				}
				fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
			}
		}
		fmt.Fprintln(w)
	}
	head(append([]string{"figure"}, names...)...)
	line := func(label, what string, n int, format string, scale float64) {
		row := []string{label}
		for _, b := range bs {
			if _, ok := res[key(b, what, n)]; !ok {
				row = append(row, "–")
				continue
			}
			row = append(row, fmt.Sprintf(format, res.median(key(b, what, n))*scale))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(row, " | "))
	}
	for _, n := range cfg.conns {
		if n > 1000 {
			line(fmt.Sprintf("memory per idle connection (RSS, %d conns)", n), "idle", n, "%.1f KiB", 1.0/1024)
			line(fmt.Sprintf("open %d connections + one ApiVersions each", n), "setup", n, "%.2f s", 1)
		}
	}
	line("produce MB/s (1 MB batches, acks=1, 2 conns)", "produce", 0, "%.0f", 1)
	line("broker CPU per GB produced", "producecpu", 0, "%.0f ms", 1)
	line("fetch MB/s (8 MB responses, page cache, 2 conns)", "fetch", 0, "%.0f", 1)
	line("raw loopback sendfile MB/s, same bytes, same run", "raw", 0, "%.0f", 1)
	line("fetch ÷ raw sendfile", "ratio", 0, "%.2f", 1)
	line("broker CPU per GB fetched", "fetchcpu", 0, "%.0f ms", 1)
}
