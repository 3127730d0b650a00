// Command sluice is the Sluice broker and its tools in one binary.
//
//	sluice serve [flags]     run a broker
//	sluice format [flags]    write meta.properties for a cluster node
//	sluice bench [flags]     load-test a Kafka-compatible broker
//	sluice version           print the version
package main

import (
	"fmt"
	"os"
)

// version is set at build time with -ldflags "-X main.version=…".
var version = "dev"

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2:])
	case "format":
		err = format(os.Args[2:])
	case "bench":
		err = benchCmd(os.Args[2:])
	case "version", "--version", "-version":
		fmt.Println("sluice", version)
	case "help", "-h", "--help":
		usage()
	default:
		fmt.Fprintf(os.Stderr, "sluice: unknown command %q\n\n", os.Args[1])
		usage()
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprint(os.Stderr, `Sluice: a Kafka-compatible message broker.

Usage:
  sluice serve [flags]    run a broker (sluice serve -h for flags)
  sluice format --cluster-id ID --config FILE [--add-scram 'SCRAM-SHA-512=[name=N,password=P]']
                          write a cluster node's meta.properties (and
                          SCRAM credentials for the first metadata)
  sluice bench [flags]    load-test any Kafka-compatible broker (sluice bench -h)
  sluice version          print the version
`)
}
