package engine

import (
	"bufio"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Broker is one Sluice broker: its topics, groups and producer state.
type Broker struct {
	cfg       Config
	log       *slog.Logger
	clusterID string
	host      string // advertised host
	port      int32  // advertised port

	topics  registry
	metrics *Metrics

	groups   *groupCoordinator  // consumer groups and committed offsets (groups.go)
	sessions *fetchSessionCache // incremental fetch sessions (fetch_sessions.go)
	waiters  *fetchPurgatory    // long-polling fetches (fetch_purgatory.go)
	pids     *producerIDManager // InitProducerId allocation (producer_ids.go)

	closing   chan struct{} // closed when Close starts
	closeOnce sync.Once
	wg        sync.WaitGroup // background loops
}

// New opens (or initialises) the data directory and every topic in it.
func New(cfg Config, log *slog.Logger) (*Broker, error) {
	if log == nil {
		log = slog.Default()
	}
	b := &Broker{cfg: cfg, log: log, closing: make(chan struct{}), metrics: NewMetrics(), waiters: newFetchPurgatory()}
	var err error
	if b.host, b.port, err = cfg.AdvertisedHostPort(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	if b.clusterID, err = loadMetaProperties(cfg); err != nil {
		return nil, err
	}
	if err := b.loadTopics(); err != nil {
		b.closeTopics()
		return nil, err
	}
	if err := b.startSubsystems(); err != nil {
		b.closeTopics()
		return nil, err
	}
	b.wg.Add(2)
	go b.housekeeping()
	go b.logCleaner() // log_cleaner.go
	log.Info("broker started", "node", cfg.NodeID, "cluster", b.clusterID, "data", cfg.DataDir, "topics", len(b.topics.byName))
	return b, nil
}

func (b *Broker) startSubsystems() error {
	var err error
	b.sessions = newFetchSessionCache(b.cfg.MaxIncrementalFetchSessions)
	if b.pids, err = newProducerIDManager(b.cfg.DataDir); err != nil {
		return err
	}
	b.groups, err = newGroupCoordinator(b)
	return err
}

// Config returns the broker's configuration.
func (b *Broker) Config() Config { return b.cfg }

// Metrics returns the broker's Prometheus metrics.
func (b *Broker) Metrics() *Metrics { return b.metrics }

// ClusterID returns the id stored in meta.properties.
func (b *Broker) ClusterID() string { return b.clusterID }

// Close stops background work, flushes every log and marks a clean
// shutdown. In-flight requests must have finished (the network layer
// drains them first).
func (b *Broker) Close() error {
	var err error
	b.closeOnce.Do(func() {
		close(b.closing)
		b.wg.Wait()
		b.waiters.close()
		b.groups.close()
		err = b.closeTopics()
		b.log.Info("broker stopped cleanly")
	})
	return err
}

func (b *Broker) closeTopics() error {
	var all []*Partition
	for _, t := range b.Topics() {
		all = append(all, t.Partitions()...)
	}
	return closePartitions(all)
}

// housekeeping runs retention, time-based rolls and flushes.
func (b *Broker) housekeeping() {
	defer b.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastRetention := time.Now()
	for {
		select {
		case <-b.closing:
			return
		case now := <-tick.C:
			retention := now.Sub(lastRetention) >= b.cfg.RetentionCheckInterval
			if retention {
				lastRetention = now
			}
			b.maintainLogs(now.UnixMilli(), retention)
		}
	}
}

func (b *Broker) maintainLogs(nowMs int64, retention bool) {
	for _, t := range b.Topics() {
		for _, p := range t.Partitions() {
			if err := p.maybeRoll(nowMs); err != nil {
				b.log.Error("segment roll failed", "topic", t.Name, "partition", p.Index, "err", err)
			}
			if !retention {
				continue
			}
			if n, err := p.enforceRetention(nowMs); err != nil {
				b.log.Error("retention failed", "topic", t.Name, "partition", p.Index, "err", err)
			} else if n > 0 {
				b.log.Info("retention deleted segments", "topic", t.Name, "partition", p.Index, "segments", n, "log_start", p.LogStartOffset())
			}
		}
	}
}

// EnforceRetentionNow runs one retention pass (tests and admin tools).
func (b *Broker) EnforceRetentionNow() { b.maintainLogs(time.Now().UnixMilli(), true) }

// loadMetaProperties reads or creates <data>/meta.properties (Kafka's
// file: version, node.id, cluster.id) and checks the node id matches.
func loadMetaProperties(cfg Config) (string, error) {
	path := filepath.Join(cfg.DataDir, "meta.properties")
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		id := cfg.ClusterID
		if id == "" {
			id = newClusterID()
		}
		body := fmt.Sprintf("#\n#%s\nversion=1\nnode.id=%d\ncluster.id=%s\n", time.Now().UTC().Format(time.RFC1123), cfg.NodeID, id)
		return id, writeFileAtomic(path, []byte(body))
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	props := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := splitProperty(sc.Text()); ok {
			props[k] = v
		}
	}
	if n := props["node.id"]; n != "" && n != fmt.Sprint(cfg.NodeID) {
		return "", fmt.Errorf("%s belongs to node %s, this broker is node %d", path, n, cfg.NodeID)
	}
	if props["cluster.id"] == "" {
		return "", fmt.Errorf("%s has no cluster.id", path)
	}
	return props["cluster.id"], nil
}

// newClusterID makes a Kafka-style cluster id: a random UUID in URL-safe
// base64 without padding.
func newClusterID() string {
	var u [16]byte
	_, _ = rand.Read(u[:])
	return strings.TrimRight(base64.URLEncoding.EncodeToString(u[:]), "=")
}
