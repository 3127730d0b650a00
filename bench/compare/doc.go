// Package compare is the side-by-side runner behind `make bench-kafka` and
// `make bench-kfake` (command bench/cmd/benchcompare). It starts Apache
// Kafka, Sluice and franz-go's kfake one after another on fresh data
// directories, runs the same bench workloads against each, measures the
// machine's own limits (loopback sendfile, sequential write), the brokers'
// CPU time and peak RSS, and writes BENCHMARKS.md's generated sections and
// SVG charts. Before each run of those two suites it fills the page cache
// with a ballast file (bench.Ballast), so that writes meet the memory of a
// host that has run for a while rather than free pages a VM may have
// handed back.
//
// It lives apart from package bench so that kfake, a test broker, is linked
// only into benchcompare and never into the sluice binary.
package compare
