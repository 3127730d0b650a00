package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/metadata"
)

// format writes meta.properties (node.id, cluster.id) into the data dir
// the config names, as kafka-storage format does. Every node of a cluster
// is formatted with the same cluster id before its first start; a data dir
// already formatted for another cluster is refused.
func format(args []string) error {
	fs := flag.NewFlagSet("format", flag.ContinueOnError)
	clusterID := fs.String("cluster-id", "", "the cluster's id (sluice format --random-cluster-id prints a new one)")
	random := fs.Bool("random-cluster-id", false, "print a new cluster id and exit")
	config := fs.String("config", "", "the node's server.properties")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *random {
		fmt.Println(metadata.NewClusterID())
		return nil
	}
	if *clusterID == "" || *config == "" {
		return errors.New("format needs --cluster-id and --config")
	}
	cfg := engine.DefaultConfig()
	if err := applyFile(&cfg, *config, slog.New(slog.NewTextHandler(os.Stderr, nil))); err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return err
	}
	mp, err := metadata.LoadMetaProperties(cfg.DataDir, cfg.NodeID, *clusterID)
	if err != nil {
		return err
	}
	if mp.ClusterID != *clusterID {
		return fmt.Errorf("%s is already formatted for cluster %s", cfg.DataDir, mp.ClusterID)
	}
	fmt.Printf("formatted %s: node.id=%d cluster.id=%s\n", cfg.DataDir, cfg.NodeID, mp.ClusterID)
	return nil
}
