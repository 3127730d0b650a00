package engine

// The broker's link to the rest of the cluster, as replication needs it:
// where other brokers listen (the replica fetchers dial their leaders) and
// the controller's AlterPartition (key 56), through which a leader asks to
// change partitions' ISRs. The leader acts on a new ISR only when an image
// carrying it reaches applyImage, never on the answer of AlterPartition:
// the controller and the leader never disagree on who may be elected
// (KIP-497, docs/cluster.md).
//
// ISR changes go out batched, in the shape of Kafka's
// AlterPartitionManager (isrSender): at most one AlterPartition is in
// flight per broker; proposals made meanwhile wait in a queue (one per
// partition, the newest wins) and all go in the next request, so that
// thousands of followers catching up together cost a few controller round
// trips and a few metadata commits, not one of each per partition.
//
// A single node has no followers, so its link is never asked to change an
// ISR (an ISR of self alone cannot shrink or grow) and knows no other
// broker. In a cluster, controllerISRLink sends AlterPartition over the
// cluster work's controller connection (cluster.go) and takes broker
// addresses from the image; tests install their own with SetClusterLink.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/replication"
)

// ISRChange is one partition's proposed ISR, as AlterPartition carries it.
type ISRChange struct {
	TopicID        [16]byte
	Partition      int32
	LeaderEpoch    int32
	PartitionEpoch int32 // the partition epoch the change is based on
	ISR            []int32
}

// ClusterLink is what the Broker needs of the cluster for replication.
type ClusterLink interface {
	// AlterPartition asks the controller, in one request, to set the ISR
	// of each partition in changes. It may block for a round trip (it is
	// called on a goroutine of its own). err reports a request that was
	// not delivered or was refused whole; otherwise errs holds one entry
	// per change, nil when the controller accepted it (an image will
	// carry it). A refused change is proposed again by its leader from
	// its state at a later tick or fetch.
	AlterPartition(changes []ISRChange) (errs []error, err error)
	// BrokerAddr is host:port of broker id's inter-broker listener.
	BrokerAddr(id int32) (string, bool)
}

// errSingleNode answers an AlterPartition on a single node.
var errSingleNode = errors.New("single node: no controller to change an ISR")

// singleNodeLink is the link of a broker alone: no other broker, no ISR
// change to make.
type singleNodeLink struct{}

func (singleNodeLink) AlterPartition([]ISRChange) ([]error, error) { return nil, errSingleNode }

func (singleNodeLink) BrokerAddr(int32) (string, bool) { return "", false }

// linkHolder lets the link be swapped atomically (an interface cannot sit
// in an atomic.Pointer).
type linkHolder struct{ ClusterLink }

// linkSlot holds the broker's current link; never empty once the
// replica manager exists.
type linkSlot struct{ p atomic.Pointer[linkHolder] }

func (c *linkSlot) load() ClusterLink {
	if h := c.p.Load(); h != nil {
		return h.ClusterLink
	}
	return singleNodeLink{}
}

// SetClusterLink installs the cluster's link (the cluster work, or a test
// standing in for the controller). Fetchers pick it up at their next dial.
func (b *Broker) SetClusterLink(l ClusterLink) {
	if l == nil {
		l = singleNodeLink{}
	}
	b.replicas.link.p.Store(&linkHolder{l})
}

// installClusterLink gives a broker of a cluster the replication link over
// its controller connection (cluster.go); a single node keeps singleNodeLink.
// It also hands the replica manager the broker's replication throttle
// rates (Broker.ReplicationThrottles).
func (b *Broker) installClusterLink() {
	rates := b.ReplicationThrottles
	b.replicas.rates.Store(&rates)
	if b.cluster != nil {
		b.SetClusterLink(controllerISRLink{b})
	}
}

// ---- the batching sender ----

const (
	// maxISRBatch bounds the partitions of one AlterPartition, so one
	// request, and the metadata entry it commits, stays well under a
	// MiB (a PartitionChangeRecord of an ISR of three is ~50 bytes).
	maxISRBatch = 2000
	// isrRetryBackoff is how long the sender waits after a request that
	// failed whole (no controller, a timeout) before sending the next.
	isrRetryBackoff = 100 * time.Millisecond
)

// isrSender sends the ISR proposals of the partitions led here.
type isrSender struct {
	m *replicaManager

	mu struct {
		sync.Mutex
		// queued holds each partition's newest unsent proposal; order
		// is the order partitions were first queued in (FIFO, so no
		// partition waits behind others for ever).
		// Invariant: order holds exactly the keys of queued.
		queued map[*Partition]*replication.ISRProposal
		order  []*Partition
		// inFlight: a sending goroutine runs; it sends what is queued
		// until the queue is empty.
		inFlight bool
		// batch is the most partitions one request carries
		// (maxISRBatch; tests set 1 to measure an unbatched sender).
		batch int
	}
	// requests and partitions count what was sent (tests, logs).
	requests, partitions atomic.Int64
}

func newISRSender(m *replicaManager) *isrSender {
	s := &isrSender{m: m}
	s.mu.batch = maxISRBatch
	s.mu.queued = map[*Partition]*replication.ISRProposal{}
	return s
}

// enqueue queues prop for p and starts a sender unless one runs.
func (s *isrSender) enqueue(p *Partition, prop *replication.ISRProposal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.mu.queued[p]; !ok {
		s.mu.order = append(s.mu.order, p)
	}
	s.mu.queued[p] = prop
	if !s.mu.inFlight {
		s.mu.inFlight = true
		go s.run()
	}
}

// run sends batches until the queue is empty. Shutdown does not wait for
// it (an unreachable controller must not hold the broker up); a late
// answer finds the partitions closed and changes nothing.
func (s *isrSender) run() {
	var parts []*Partition
	var props []*replication.ISRProposal
	for {
		parts, props = s.take(parts[:0], props[:0])
		if len(parts) == 0 {
			return
		}
		if !s.send(parts, props) {
			select {
			case <-s.m.stop:
			case <-time.After(isrRetryBackoff):
			}
		}
		clear(parts)
		clear(props)
	}
}

// take moves up to s.mu.batch queued proposals into parts and props; on
// an empty queue it ends the in-flight state, under the same lock as
// enqueue checks it.
func (s *isrSender) take(parts []*Partition, props []*replication.ISRProposal) ([]*Partition, []*replication.ISRProposal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := min(len(s.mu.order), s.mu.batch)
	if n == 0 {
		s.mu.inFlight = false
		return parts, props
	}
	for _, p := range s.mu.order[:n] {
		parts, props = append(parts, p), append(props, s.mu.queued[p])
		delete(s.mu.queued, p)
	}
	rest := copy(s.mu.order, s.mu.order[n:])
	clear(s.mu.order[rest:])
	s.mu.order = s.mu.order[:rest]
	return parts, props
}

// send sends one AlterPartition and hands each refusal back to its
// partition; false when the request failed whole.
func (s *isrSender) send(parts []*Partition, props []*replication.ISRProposal) bool {
	changes := make([]ISRChange, len(parts))
	for i, p := range parts {
		changes[i] = ISRChange{TopicID: p.Topic.ID, Partition: p.Index, LeaderEpoch: props[i].LeaderEpoch,
			PartitionEpoch: props[i].PartitionEpoch, ISR: props[i].ISR}
	}
	s.requests.Add(1)
	s.partitions.Add(int64(len(changes)))
	errs, err := s.m.link.load().AlterPartition(changes)
	if err == nil && len(errs) != len(changes) {
		err = errors.New("AlterPartition answered a different number of partitions")
	}
	for i, p := range parts {
		perr := err
		if perr == nil {
			perr = errs[i]
		}
		if perr != nil {
			s.m.log.Debug("AlterPartition refused", "topic", p.Topic.Name, "partition", p.Index, "isr", props[i].ISR, "err", perr)
			p.isrRejected(props[i])
		}
	}
	return err == nil
}

// ---- the controller's AlterPartition ----

// controllerISRLink is ClusterLink in a cluster: AlterPartition v3 to the
// active controller, broker addresses from the image.
type controllerISRLink struct{ b *Broker }

// alterPartitionTimeout bounds one AlterPartition round trip.
const alterPartitionTimeout = 10 * time.Second

func (l controllerISRLink) AlterPartition(changes []ISRChange) ([]error, error) {
	req := alterPartitionRequest(changes)
	ctx, cancel := context.WithTimeout(context.Background(), alterPartitionTimeout)
	defer cancel()
	resp, err := l.b.cluster.AlterPartition(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	return alterPartitionErrors(changes, resp), nil
}

// alterPartitionRequest groups changes by topic into one request.
func alterPartitionRequest(changes []ISRChange) *kmsg.AlterPartitionRequest {
	req := kmsg.NewPtrAlterPartitionRequest()
	req.Version = 3
	topics := map[[16]byte]int{}
	for _, c := range changes {
		i, ok := topics[c.TopicID]
		if !ok {
			i = len(req.Topics)
			topics[c.TopicID] = i
			rt := kmsg.NewAlterPartitionRequestTopic()
			rt.TopicID = c.TopicID
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewAlterPartitionRequestTopicPartition()
		rp.Partition, rp.LeaderEpoch, rp.PartitionEpoch = c.Partition, c.LeaderEpoch, c.PartitionEpoch
		for _, id := range c.ISR {
			rp.NewEpochISR = append(rp.NewEpochISR, kmsg.AlterPartitionRequestTopicPartitionNewEpochISR{BrokerID: id, BrokerEpoch: -1})
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	return req
}

// errNoAnswer is a change the controller's answer left out.
var errNoAnswer = errors.New("AlterPartition answer lacks the partition")

// alterPartitionErrors maps the answer's per-partition codes back to
// changes (a partition the answer lacks counts as refused).
func alterPartitionErrors(changes []ISRChange, resp *kmsg.AlterPartitionResponse) []error {
	type key struct {
		topic     [16]byte
		partition int32
	}
	codes := map[key]int16{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			codes[key{t.TopidID, p.Partition}] = p.ErrorCode // sic: kmsg spells it so
		}
	}
	errs := make([]error, len(changes))
	for i, c := range changes {
		code, ok := codes[key{c.TopicID, c.Partition}]
		switch {
		case !ok:
			errs[i] = errNoAnswer
		case code != 0:
			errs[i] = kerr.ErrorForCode(code)
		}
	}
	return errs
}

func (l controllerISRLink) BrokerAddr(id int32) (string, bool) { return l.b.BrokerAddr(id) }
