package main

import (
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/metadata"
	"github.com/sluice-broker/sluice/security/sasl"
)

// format writes meta.properties (node.id, cluster.id) into the data dir
// the config names, as kafka-storage format does. Every node of a cluster
// is formatted with the same cluster id before its first start; a data dir
// already formatted for another cluster is refused.
//
// --add-scram 'SCRAM-SHA-512=[name=alice,password=alice-secret]' (any
// number of times; iterations=N optional, Kafka's 4096 by default) puts a
// SCRAM credential in the bootstrap metadata (metadata.BootstrapFile),
// which the cluster's first metadata holds: brokers logging in to each
// other with SCRAM need theirs before any broker could create one.
// Format every controller with the same ones.
func format(args []string) error {
	fs := flag.NewFlagSet("format", flag.ContinueOnError)
	clusterID := fs.String("cluster-id", "", "the cluster's id (sluice format --random-cluster-id prints a new one)")
	random := fs.Bool("random-cluster-id", false, "print a new cluster id and exit")
	config := fs.String("config", "", "the node's server.properties")
	var boot []metadata.Record
	fs.Func("add-scram", "a SCRAM credential for the bootstrap metadata: 'SCRAM-SHA-512=[name=alice,password=alice-secret]' (repeatable)", func(v string) error {
		r, err := parseAddScram(v)
		boot = append(boot, r)
		return err
	})
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
	if len(boot) > 0 {
		if err := metadata.WriteBootstrap(cfg.DataDir, boot); err != nil {
			return err
		}
	}
	fmt.Printf("formatted %s: node.id=%d cluster.id=%s\n", cfg.DataDir, cfg.NodeID, mp.ClusterID)
	return nil
}

// parseAddScram reads one --add-scram value, Kafka's
// MECHANISM=[name=NAME,password=PASSWORD(,iterations=N)] (values may be
// quoted), into a credential record with a fresh random salt.
func parseAddScram(v string) (metadata.Record, error) {
	mech, rest, ok := strings.Cut(v, "=")
	mech = strings.ToUpper(strings.TrimSpace(mech))
	rest = strings.TrimSpace(rest)
	if !ok || !strings.HasPrefix(rest, "[") || !strings.HasSuffix(rest, "]") {
		return nil, fmt.Errorf("--add-scram %q: want SCRAM-SHA-256=[name=…,password=…] or SCRAM-SHA-512=[…]", v)
	}
	typ := sasl.ScramMechanismType(mech)
	if typ == 0 {
		return nil, fmt.Errorf("--add-scram: unknown mechanism %q (SCRAM-SHA-256 or SCRAM-SHA-512)", mech)
	}
	rec := metadata.UserScramCredentialRecord{Mechanism: typ, Iterations: metadata.MinScramIterations}
	var password string
	hasPassword := false
	for _, kv := range strings.Split(rest[1:len(rest)-1], ",") {
		k, val, ok := strings.Cut(kv, "=")
		k, val = strings.ToLower(strings.TrimSpace(k)), strings.Trim(strings.TrimSpace(val), `"`)
		switch {
		case !ok:
			return nil, fmt.Errorf("--add-scram: want key=value, got %q", kv)
		case k == "name":
			rec.Name = val
		case k == "password":
			password, hasPassword = val, true
		case k == "iterations":
			n, err := strconv.ParseInt(val, 10, 32)
			if err != nil || n < metadata.MinScramIterations || n > metadata.MaxScramIterations {
				return nil, fmt.Errorf("--add-scram: iterations=%s: want %d to %d", val, metadata.MinScramIterations, metadata.MaxScramIterations)
			}
			rec.Iterations = int32(n)
		default:
			return nil, fmt.Errorf("--add-scram: %s is not supported (name, password, iterations)", k)
		}
	}
	if rec.Name == "" || !hasPassword {
		return nil, fmt.Errorf("--add-scram %q: name and password are required", v)
	}
	salt := make([]byte, 32)
	if _, err := rand.Read(salt); err != nil {
		return nil, err
	}
	salted, err := sasl.SaltPassword(mech, password, salt, int(rec.Iterations))
	if err != nil {
		return nil, err
	}
	c, err := sasl.NewScramCredential(mech, salt, salted, rec.Iterations)
	if err != nil {
		return nil, err
	}
	rec.Salt, rec.StoredKey, rec.ServerKey = c.Salt, c.StoredKey, c.ServerKey
	return rec, nil
}
