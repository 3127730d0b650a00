package engine

// The cluster's side of the config (the keys are rows of configkeys.go):
// whether a node is in a cluster, its roles, the quorum's voters, and the
// cluster id `sluice format` wrote.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sluice-broker/sluice/metadata"
)

// ClusterMode reports whether the config names a controller quorum.
func (c *Config) ClusterMode() bool { return c.QuorumVoters != "" || c.QuorumBootstrapServers != "" }

// HasRole reports whether process.roles includes role.
func (c *Config) HasRole(role string) bool {
	for _, r := range strings.Split(c.ProcessRoles, ",") {
		if strings.TrimSpace(r) == role {
			return true
		}
	}
	return false
}

// Voters parses controller.quorum.voters: id@host:port,...
func (c *Config) Voters() (map[int32]string, error) {
	out := map[int32]string{}
	if c.QuorumVoters == "" {
		return out, nil
	}
	for _, v := range strings.Split(c.QuorumVoters, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(v), "@")
		n, err := strconv.ParseInt(id, 10, 32)
		if !ok || err != nil || n < 0 {
			return nil, fmt.Errorf("controller.quorum.voters: bad voter %q (want id@host:port)", v)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("controller.quorum.voters: voter %q: %w", v, err)
		}
		out[int32(n)] = addr
	}
	return out, nil
}

// ControllerAddrs is where the broker reaches the controllers: the voters,
// else controller.quorum.bootstrap.servers.
func (c *Config) ControllerAddrs() ([]string, error) {
	voters, err := c.Voters()
	if err != nil {
		return nil, err
	}
	var addrs []string
	for id := int32(0); len(addrs) < len(voters); id++ {
		if a, ok := voters[id]; ok {
			addrs = append(addrs, a)
		}
	}
	if len(addrs) == 0 {
		for _, a := range strings.Split(c.QuorumBootstrapServers, ",") {
			if a = strings.TrimSpace(a); a != "" {
				addrs = append(addrs, a)
			}
		}
	}
	if len(addrs) == 0 {
		return nil, errors.New("no controller addresses")
	}
	return addrs, nil
}

// ClusterMetadataDir is the controller's raft log directory in the data
// dir (Kafka's name for the metadata log's directory).
const ClusterMetadataDir = "__cluster_metadata-0"

// FormattedClusterID reads the cluster id `sluice format` wrote into the
// data dir's meta.properties. A node of a cluster must be formatted: it
// may not make up an id of its own, or it could never join the others.
func FormattedClusterID(cfg Config) (string, error) {
	if _, err := os.Stat(filepath.Join(cfg.DataDir, metadata.MetaPropertiesFile)); err != nil {
		return "", fmt.Errorf("%s is not formatted for a cluster: run `sluice format --cluster-id ID --config FILE` first (%w)", cfg.DataDir, err)
	}
	mp, err := metadata.LoadMetaProperties(cfg.DataDir, cfg.NodeID, "")
	return mp.ClusterID, err
}
