package metadata

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-broker/sluice/internal/fsutil"
	"github.com/sluice-broker/sluice/internal/properties"
)

// MetaPropertiesFile is Kafka's node identity file, kept in Kafka's format
// (version, node.id, cluster.id) so that Kafka's tools read it.
const MetaPropertiesFile = "meta.properties"

// MetaProperties is a data directory's identity.
type MetaProperties struct {
	NodeID    int32
	ClusterID string
}

// LoadMetaProperties reads dataDir's meta.properties, or creates it for
// nodeID with clusterID (a new random id when empty) on a fresh directory.
// A file written for another node id is refused: the directory holds that
// node's data.
func LoadMetaProperties(dataDir string, nodeID int32, clusterID string) (MetaProperties, error) {
	path := filepath.Join(dataDir, MetaPropertiesFile)
	props, err := readProperties(path)
	if errors.Is(err, os.ErrNotExist) {
		mp := MetaProperties{NodeID: nodeID, ClusterID: clusterID}
		if mp.ClusterID == "" {
			mp.ClusterID = NewClusterID()
		}
		return mp, fsutil.WriteFileAtomic(path, mp.encode(time.Now()))
	}
	if err != nil {
		return MetaProperties{}, err
	}
	if n := props["node.id"]; n != "" && n != strconv.Itoa(int(nodeID)) {
		return MetaProperties{}, fmt.Errorf("%s belongs to node %s, this broker is node %d", path, n, nodeID)
	}
	if props["cluster.id"] == "" {
		return MetaProperties{}, fmt.Errorf("%s has no cluster.id", path)
	}
	return MetaProperties{NodeID: nodeID, ClusterID: props["cluster.id"]}, nil
}

// encode writes the file as Kafka does: a timestamp comment, then the keys.
func (mp MetaProperties) encode(now time.Time) []byte {
	return fmt.Appendf(nil, "#\n#%s\nversion=1\nnode.id=%d\ncluster.id=%s\n", now.UTC().Format(time.RFC1123), mp.NodeID, mp.ClusterID)
}

// NewClusterID makes a Kafka-style cluster id: a random UUID in URL-safe
// base64 without padding.
func NewClusterID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	return strings.TrimRight(base64.URLEncoding.EncodeToString(u[:]), "=")
}

// readProperties reads meta.properties into a map.
func readProperties(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	lines, err := properties.Read(f)
	props := make(map[string]string, len(lines))
	for _, l := range lines {
		props[l.Key] = l.Value
	}
	return props, err
}
