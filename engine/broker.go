package engine

import (
	"cmp"
	"errors"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-broker/sluice/metadata"
	"github.com/sluice-broker/sluice/storage"
)

// Broker is one Sluice broker: its topics, groups and producer state.
type Broker struct {
	cfg       Config
	log       *slog.Logger
	clusterID string
	host      string // advertised host
	port      int32  // advertised port
	// endpoints are the advertised listeners, the primary first
	// (listeners.go).
	endpoints []endpoint

	meta    metaState        // the metadata image and its store (image.go)
	hosted  partitionManager // the partitions open here (registry.go)
	mdCache metadataCache    // encoded full Metadata answers (metadata_cache.go)
	metrics *Metrics

	groups *groupCoordinator // consumer groups and committed offsets (groups.go)
	share  *shareBroker      // share groups (share.go)
	txns   *txnCoordinator   // transactional ids and their transactions (txns.go)

	peers       peerClients        // requests to other brokers: markers, verification (txn_peers.go)
	txnVerified verifiedTxns       // transactions verified for produce (txn_verify.go)
	txnChains   txnProduceChains   // a cluster's transactional produces in order (txn_verify.go)
	sessions    *fetchSessionCache // incremental fetch sessions (fetch_sessions.go)
	waiters     *fetchPurgatory    // long-polling fetches (fetch_purgatory.go)
	pids        *producerIDManager // InitProducerId allocation (producer_ids.go)
	cluster     *clusterLink       // nil on a single node (cluster.go)
	replicas    *replicaManager    // replica fetchers, ISR tick, replication's link (replica_fetcher.go)

	// dynamic holds the dynamic broker configs and the effective config
	// they lead to (dynconfig.go); replaced at image changes.
	dynamic atomic.Pointer[brokerConfigs]

	authz  authzState // ACLs (authz.go)
	quotas quotaState // client quotas and throttling (quota.go)

	closing   chan struct{} // closed when Close starts
	closeOnce sync.Once
	wg        sync.WaitGroup // background loops
}

// New opens (or initialises) the data directory and every topic in it.
func New(cfg Config, log *slog.Logger) (*Broker, error) { return NewInCluster(cfg, log, nil) }

// NewInCluster is New for a node of a cluster (cfg.ClusterMode): link
// reaches the controller quorum. On a single node link is unused.
func NewInCluster(cfg Config, log *slog.Logger, link ControllerLink) (*Broker, error) {
	if log == nil {
		log = slog.Default()
	}
	b := &Broker{cfg: cfg, log: log, closing: make(chan struct{}), metrics: NewMetrics(), waiters: newFetchPurgatory()}
	var err error
	if b.host, b.port, err = cfg.AdvertisedHostPort(); err != nil {
		return nil, err
	}
	if b.endpoints, err = advertisedEndpoints(&cfg); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return nil, err
	}
	if err := storage.RemoveDeleted(cfg.DataDir); err != nil {
		log.Warn("removing deleted partitions' directories", "err", err)
	}
	if err := b.takeCleanShutdown(); err != nil { // registry.go
		return nil, err
	}
	b.replicas = newReplicaManager(cfg, log)
	b.initAuthz() // authz.go
	if err := b.openStore(link); err != nil {
		b.replicas.close()
		return nil, err
	}
	b.installClusterLink() // cluster_link.go
	if err := b.startSubsystems(); err != nil {
		b.replicas.close()
		b.closeTopics()
		b.meta.store.Close()
		return nil, err
	}
	if b.cluster != nil {
		b.cluster.start()
	}
	b.wg.Add(2)
	go b.housekeeping()
	go b.logCleaner() // log_cleaner.go
	log.Info("broker started", "node", cfg.NodeID, "cluster", b.clusterID, "data", cfg.DataDir, "topics", len(b.hosted.load().sorted))
	return b, nil
}

// openStore opens the metadata: the local store on a single node, the
// link to the controller quorum in a cluster.
func (b *Broker) openStore(link ControllerLink) error {
	if b.cfg.ClusterMode() {
		return b.openCluster(link)
	}
	mp, err := metadata.LoadMetaProperties(b.cfg.DataDir, b.cfg.NodeID, b.cfg.ClusterID)
	if err != nil {
		return err
	}
	b.clusterID = mp.ClusterID
	return b.openMetadata()
}

func (b *Broker) startSubsystems() error {
	b.meta.mu.Lock()
	err := b.syncPartitions(b.image()) // open every partition hosted here
	b.meta.mu.Unlock()
	if err != nil {
		return err
	}
	b.sessions = newFetchSessionCache(b.cfg.MaxIncrementalFetchSessions)
	b.pids = newProducerIDManager(b.allocateProducerIDs)
	if b.cluster != nil {
		b.groups = newClusterGroupCoordinator(b)
		b.share = newShareBroker(b)
	} else {
		if b.groups, err = newGroupCoordinator(b); err != nil {
			return err
		}
		b.share = newShareBroker(b)
		if err := b.share.loadLocal(); err != nil {
			return err
		}
	}
	b.txns, err = newTxnCoordinator(b)
	return err
}

// Config returns the broker's configuration.
func (b *Broker) Config() Config { return b.cfg }

// Metrics returns the broker's Prometheus metrics.
func (b *Broker) Metrics() *Metrics { return b.metrics }

// ClusterID returns the id stored in meta.properties (and in the metadata
// log's ClusterRecord).
func (b *Broker) ClusterID() string { return b.clusterID }

// Close stops background work, flushes every log and marks a clean
// shutdown. In-flight requests must have finished (the network layer
// drains them first).
func (b *Broker) Close() error {
	var err error
	b.closeOnce.Do(func() {
		close(b.closing)
		b.replicas.close() // no follower writes once the logs close
		if b.cluster != nil {
			b.cluster.close()
		}
		b.wg.Wait()
		b.waiters.close()
		b.groups.close()
		b.share.close()
		b.txns.Close()
		b.peers.close()
		err = cmp.Or(b.closeTopics(), b.meta.store.Close())
		b.log.Info("broker stopped cleanly")
	})
	return err
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
			if p == nil {
				continue // hosted elsewhere
			}
			// A log closed under the pass (its topic deleted, the replica
			// moved away) has nothing left to maintain.
			if err := p.maybeRoll(nowMs); err != nil && !errors.Is(err, storage.ErrClosed) {
				b.log.Error("segment roll failed", "topic", t.Name, "partition", p.Index, "err", err)
			}
			if !retention {
				continue
			}
			if n, err := p.enforceRetention(nowMs); err != nil && !errors.Is(err, storage.ErrClosed) {
				b.log.Error("retention failed", "topic", t.Name, "partition", p.Index, "err", err)
			} else if n > 0 {
				b.log.Info("retention deleted segments", "topic", t.Name, "partition", p.Index, "segments", n, "log_start", p.LogStartOffset())
			}
		}
	}
}

// EnforceRetentionNow runs one retention pass (tests and admin tools).
func (b *Broker) EnforceRetentionNow() { b.maintainLogs(time.Now().UnixMilli(), true) }
