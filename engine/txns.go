package engine

// The transaction coordinator (package engine/txn) as the broker runs it.
// Its state is the compacted __transaction_state topic, created on first
// need (a transactional FindCoordinator or InitProducerId), as Kafka does:
// on a single node at once, loading every partition; in a cluster through
// the controller, each broker loading the partitions it leads after every
// image (syncTxns), at the partition's leader epoch, which becomes the
// coordinator epoch its markers carry. The handlers (22, 24-28, 65, 66,
// FindCoordinator key type 1) translate requests into its calls;
// txn_markers.go writes the markers.

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/txn"
	"github.com/sluice-broker/sluice/metadata"
)

// txnStateTopic is Kafka's internal topic of transaction state.
const txnStateTopic = "__transaction_state"

// txnCoordinator is the broker's transaction coordinator, with the
// coordinator epoch each partition was loaded at.
type txnCoordinator struct {
	*txn.Coordinator
	// epochs are the loaded partitions' coordinator epochs; guarded by the
	// broker's meta.mu (syncTxns and the single node's load run under it).
	epochs map[int32]int32
}

// newTxnCoordinator starts the coordinator. On a single node it loads
// __transaction_state if it exists; otherwise the first request creates it.
func newTxnCoordinator(b *Broker) (*txnCoordinator, error) {
	cfg := b.txnConfig()
	t := b.Topic(txnStateTopic)
	if b.cluster == nil && t != nil {
		cfg.Partitions = int32(len(t.Partitions())) // fixed when the topic was created
	}
	c := &txnCoordinator{Coordinator: txn.New(cfg), epochs: map[int32]int32{}}
	if b.cluster != nil || t == nil {
		return c, nil
	}
	b.meta.mu.Lock()
	defer b.meta.mu.Unlock()
	if err := b.loadTxnTopicLocked(c); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (b *Broker) txnConfig() txn.Config {
	cfg := &b.cfg
	return txn.Config{
		Partitions:          cfg.TxnStatePartitions,
		MaxTimeout:          cfg.TxnMaxTimeout,
		IDExpiration:        cfg.TxnIDExpiration,
		AbortCheckInterval:  cfg.TxnAbortCheckInterval,
		ExpireCheckInterval: cfg.TxnExpireCheckInterval,
		NewProducerID:       b.pids.next,
		Markers:             markerWriter{b},
		Log:                 b.log,
	}
}

// loadTxnTopicLocked loads every partition of a single node's
// __transaction_state. The caller holds meta.mu.
func (b *Broker) loadTxnTopicLocked(c *txnCoordinator) error {
	t := b.Topic(txnStateTopic)
	start, n := time.Now(), 0
	for _, p := range t.Partitions() {
		if c.Loaded(p.Index) {
			continue
		}
		p.advanceHighWatermark() // one replica: everything in the log is committed
		loaded, err := c.LoadPartition(p.Index, p.LeaderEpoch(), groupLog{p: p})
		if err != nil {
			return fmt.Errorf("load %s-%d: %w", txnStateTopic, p.Index, err)
		}
		c.epochs[p.Index] = p.LeaderEpoch()
		n += loaded
	}
	b.log.Info("loaded transactional ids", "ids", n, "took", time.Since(start))
	return nil
}

// ensureTxnTopic makes sure __transaction_state exists: created and loaded
// at once on a single node; in a cluster created through the controller in
// the background, its partitions loaded as the image names their leaders.
// It reports whether the topic can be served now.
func (b *Broker) ensureTxnTopic() bool {
	if b.Topic(txnStateTopic) != nil || b.image().Topic(txnStateTopic) != nil {
		return true
	}
	if b.cluster != nil {
		if b.cluster.creatingTxnState.CompareAndSwap(false, true) {
			go func() {
				defer b.cluster.creatingTxnState.Store(false)
				if _, err := b.createTxnTopic(); err != nil && ErrorCode(err) != kerr.TopicAlreadyExists.Code {
					b.log.Warn("cannot create the transaction state topic", "err", err)
				}
			}()
		}
		return false
	}
	if _, err := b.createTxnTopic(); err != nil && ErrorCode(err) != kerr.TopicAlreadyExists.Code {
		b.log.Error("cannot create the transaction state topic", "err", err)
		return false
	}
	b.meta.mu.Lock()
	defer b.meta.mu.Unlock()
	if err := b.loadTxnTopicLocked(b.txns); err != nil {
		b.log.Error("cannot load transaction state", "err", err)
		return false
	}
	return true
}

// createTxnTopic creates __transaction_state with Kafka's settings for it:
// compacted, uncompressed as written, transaction.state.log.segment.bytes,
// and min.insync.replicas from transaction.state.log.min.isr, so that a
// transaction's Prepare record is acknowledged only once that many
// replicas hold it. Unlike Kafka the minimum is capped at the replication
// factor the topic gets (which is capped at the brokers registered), so a
// single node's transactions work with the defaults.
func (b *Broker) createTxnTopic() (*Topic, error) {
	overrides := map[string]string{
		"cleanup.policy":   "compact",
		"compression.type": "producer",
		"segment.bytes":    itoa(b.cfg.TxnStateSegmentBytes),
	}
	if b.cluster == nil {
		overrides["min.insync.replicas"] = "1"
		return b.CreateTopic(txnStateTopic, b.cfg.TxnStatePartitions, overrides, false)
	}
	// One request, so the minimum and the replication factor come from
	// one count of the brokers.
	rt := b.clusterTopicRequest(txnStateTopic, b.cfg.TxnStatePartitions)
	overrides["min.insync.replicas"] = itoa(min(int64(b.cfg.TxnStateMinISR), int64(rt.ReplicationFactor)))
	return b.cluster.forwardCreateTopic(rt, overrides, false)
}

// syncTxns loads the transaction state partitions this broker leads in img
// (again when their leader epoch moved) and unloads the others. The caller
// holds meta.mu.
func (b *Broker) syncTxns(img metadata.Image) {
	ti, t := img.Topic(txnStateTopic), b.Topic(txnStateTopic)
	if b.txns == nil || ti == nil || t == nil {
		return
	}
	c := b.txns
	for i := range ti.Partitions {
		idx, pi := int32(i), &ti.Partitions[i]
		p := t.Partition(idx)
		leads := p != nil && pi.Leader == b.cfg.NodeID
		epoch, loaded := c.epochs[idx]
		if loaded && (!leads || epoch != pi.LeaderEpoch) {
			c.UnloadPartition(idx)
			delete(c.epochs, idx)
			loaded = false
		}
		if leads && !loaded {
			p.advanceHighWatermark()
			if _, err := c.LoadPartition(idx, pi.LeaderEpoch, groupLog{p: p}); err != nil {
				b.log.Error("cannot load transaction state", "partition", idx, "err", err)
				continue
			}
			c.epochs[idx] = pi.LeaderEpoch
		}
	}
}

// txnCoordinatorFor answers FindCoordinator for a transactional id: the
// leader of its __transaction_state partition, COORDINATOR_NOT_AVAILABLE
// while there is none (the topic being created, or leaderless).
func (b *Broker) txnCoordinatorFor(key string, c *kmsg.FindCoordinatorResponseCoordinator) {
	if !b.ensureTxnTopic() {
		c.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return
	}
	if b.cluster == nil {
		c.NodeID, c.Host, c.Port = b.cfg.NodeID, b.host, b.port
		return
	}
	leader, ok := b.txnLeader(key)
	host, port, found := brokerEndpoint(b.image(), leader)
	if !ok || !found {
		c.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return
	}
	c.NodeID, c.Host, c.Port = leader, host, port
}

// txnVersion is the transaction version the broker runs: 2 (KIP-890
// part 2, Kafka 4's default) unless sluice.transaction.version says 1.
func (b *Broker) txnVersion() int32 { return b.cfg.TxnVersion }

// txnFeatures are ApiVersions' (v3+) supported and finalized features:
// transaction.version, which clients read to pick transactions version 2.
func (b *Broker) txnFeatures(resp *kmsg.ApiVersionsResponse) {
	resp.SupportedFeatures = append(resp.SupportedFeatures, kmsg.ApiVersionsResponseSupportedFeature{Name: "transaction.version", MinVersion: 0, MaxVersion: 2})
	resp.FinalizedFeaturesEpoch = 1
	v := int16(b.txnVersion())
	resp.FinalizedFeatures = append(resp.FinalizedFeatures, kmsg.ApiVersionsResponseFinalizedFeature{Name: "transaction.version", MinVersionLevel: v, MaxVersionLevel: v})
}

// txnLeader is the broker that coordinates a transactional id in the
// image; false while its partition has no leader.
func (b *Broker) txnLeader(id string) (int32, bool) {
	if b.cluster == nil {
		return b.cfg.NodeID, true
	}
	ti := b.image().Topic(txnStateTopic)
	if ti == nil {
		return -1, false
	}
	idx := txn.PartitionForID(id, int32(len(ti.Partitions)))
	if leader := ti.Partitions[idx].Leader; leader >= 0 {
		return leader, true
	}
	return -1, false
}
