// Command interop-go runs the compatibility scenario of one Go Kafka client
// (sarama, kafka-go or franz-go) against the broker at $SLUICE_BOOTSTRAP and
// prints result lines for interop/driver.
//
// Every client runs the same script (see scenario.go); each client file
// implements the steps with that client's own API only.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"time"
)

// verbose turns on each client's own logging (INTEROP_DEBUG=1).
var verbose = os.Getenv("INTEROP_DEBUG") != ""

func main() {
	name := flag.String("client", "franz-go", "sarama, kafka-go or franz-go")
	cluster := flag.Bool("cluster", false, "run the cluster scenario (cluster.go) instead")
	security := flag.Bool("security", false, "run the security scenario (security.go) instead")
	flag.Parse()
	bootstrap := os.Getenv("SLUICE_BOOTSTRAP")
	if bootstrap == "" {
		bootstrap = "127.0.0.1:9092"
	}
	var c client
	switch *name {
	case "sarama":
		c = newSarama(bootstrap)
	case "kafka-go":
		c = newKafkaGo(bootstrap)
	case "franz-go":
		c = newFranz(bootstrap)
	default:
		fmt.Fprintf(os.Stderr, "unknown client %q\n", *name)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	run := runScenario
	if *cluster {
		run = runClusterScenario
	}
	if *security {
		run = runSecurityScenario
	}
	if !run(ctx, *name, c) {
		os.Exit(1)
	}
}

// moduleVersion is the version of a dependency this binary was built with.
func moduleVersion(path string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, d := range bi.Deps {
		if d.Path == path {
			return d.Version
		}
	}
	return "unknown"
}
