package controller

import (
	"fmt"
	"math"
	"slices"

	"github.com/sluice-broker/sluice/metadata"
)

// Config holds the broker and cluster settings the controller decides by.
type Config struct {
	// ClusterID is the cluster's id from meta.properties; registrations
	// naming another are refused. The image's ClusterRecord, when
	// present, wins.
	ClusterID string
	// SessionTimeoutMs is broker.session.timeout.ms (Kafka: 9000).
	SessionTimeoutMs int64
	// ConnectionLostGraceMs is how long a broker whose heartbeat
	// connection closed may take to re-register or heartbeat before it is
	// fenced (the fast path of docs/cluster.md).
	ConnectionLostGraceMs int64
	// UncleanLeaderElection is the broker default of
	// unclean.leader.election.enable; a topic's ConfigRecord, this
	// controller's own broker config or the cluster-wide one in the image
	// overrides it (configs.go).
	UncleanLeaderElection bool
	// NodeID is the controller's node id, whose dynamic broker configs
	// the decisions read as KRaft does; -1 for none.
	NodeID int32
	// DefaultPartitions and DefaultReplicationFactor are num.partitions and
	// default.replication.factor, used when CreateTopics asks for -1.
	DefaultPartitions        int32
	DefaultReplicationFactor int16
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig(clusterID string) Config {
	return Config{ClusterID: clusterID, SessionTimeoutMs: 9000, ConnectionLostGraceMs: 500, NodeID: -1,
		DefaultPartitions: 1, DefaultReplicationFactor: 1}
}

// UncleanLeaderElectionConfig is the topic (and broker) config that allows
// electing a replica outside the ISR.
const UncleanLeaderElectionConfig = "unclean.leader.election.enable"

// Controller is the active controller's soft state; the durable state is
// the image each call is given. Use one Controller from one goroutine.
type Controller struct {
	cfg Config
	// sessions holds the liveness of registered brokers by id. Invariant:
	// an entry whose epoch differs from the broker's registration in the
	// image is stale and is replaced when next used.
	sessions map[int32]*session
}

// session is the liveness of one broker registration.
type session struct {
	// epoch is the broker epoch this session times.
	epoch int64
	// deadlineMs is when the session expires: the last heartbeat (or the
	// registration, or this controller's first sight of the broker) plus
	// SessionTimeoutMs.
	deadlineMs int64
	// lostAtMs is when the broker's heartbeat connection closed, or
	// connectionOpen. A heartbeat or registration reopens it.
	lostAtMs int64
	// conn is the connection the broker last heartbeated on (0: not
	// known); the close of another one says nothing (HeartbeatConnClosed).
	conn uint64
}

const connectionOpen = math.MaxInt64

// expiresAtMs is when Tick fences the session's broker.
func (s *session) expiresAtMs(graceMs int64) int64 {
	if s.lostAtMs == connectionOpen {
		return s.deadlineMs
	}
	return min(s.deadlineMs, s.lostAtMs+graceMs)
}

// New returns a controller with no sessions yet.
func New(cfg Config) *Controller {
	return &Controller{cfg: cfg, sessions: map[int32]*session{}}
}

// session returns the session of broker br, starting one that expires a
// full timeout from now if there is none for this registration.
func (c *Controller) session(br metadata.BrokerImage, nowMs int64) *session {
	s := c.sessions[br.ID]
	if s == nil || s.epoch != br.Epoch {
		s = &session{epoch: br.Epoch, deadlineMs: nowMs + c.cfg.SessionTimeoutMs, lostAtMs: connectionOpen}
		c.sessions[br.ID] = s
	}
	return s
}

// touch records a sign of life from broker br at nowMs.
func (c *Controller) touch(br metadata.BrokerImage, nowMs int64) {
	s := c.session(br, nowMs)
	s.deadlineMs = max(s.deadlineMs, nowMs+c.cfg.SessionTimeoutMs)
	s.lostAtMs = connectionOpen
}

// Result is what a decision proposes: records to append as one batch.
type Result struct {
	Records []metadata.Record
}

// Tick fences every unfenced broker whose session expired or whose
// heartbeat connection closed more than the grace ago, electing new
// leaders for the partitions it led and dropping it from ISRs.
func (c *Controller) Tick(img metadata.Image, nowMs int64) Result {
	b := newBatch(img)
	for _, br := range img.Brokers() {
		s := c.session(br, nowMs)
		if !br.Fenced && nowMs >= s.expiresAtMs(c.cfg.ConnectionLostGraceMs) {
			c.fence(b, br)
		}
	}
	for id := range c.sessions {
		if _, ok := img.Broker(id); !ok {
			delete(c.sessions, id)
		}
	}
	return Result{Records: b.records()}
}

// NextTickMs returns the earliest time at which Tick may have something
// to do (math.MaxInt64 when nothing is timed). Calling Tick earlier or
// more often is harmless.
func (c *Controller) NextTickMs() int64 {
	next := int64(math.MaxInt64)
	for _, s := range c.sessions {
		next = min(next, s.expiresAtMs(c.cfg.ConnectionLostGraceMs))
	}
	return next
}

// ConnectionLost reports that the heartbeat connection of broker id, last
// used at broker epoch epoch, was closed by its peer (FIN or RST: the
// process is gone). The broker is fenced at the first Tick after the
// grace unless it registers or heartbeats first. A close seen for an
// earlier registration than the current one is ignored, so the old
// process's socket closing late cannot fence its restarted successor.
func (c *Controller) ConnectionLost(id int32, epoch int64, nowMs int64) {
	s := c.sessions[id]
	if s == nil {
		s = &session{epoch: epoch, deadlineMs: nowMs + c.cfg.SessionTimeoutMs, lostAtMs: connectionOpen}
		c.sessions[id] = s
	}
	if s.epoch == epoch {
		s.lostAtMs = min(s.lostAtMs, nowMs)
	}
}

// batch is the records a decision proposes, with the image they lead to,
// so a later step of the same decision sees the earlier ones (fencing two
// brokers in one tick elects around both). Records are applied lazily, a
// step at a time, so a step that changes many partitions of one topic
// copies the topic once.
type batch struct {
	img     metadata.Image // the image after recs[:applied]
	recs    []metadata.Record
	applied int
}

func newBatch(img metadata.Image) *batch { return &batch{img: img} }

func (b *batch) add(r metadata.Record) { b.recs = append(b.recs, r) }

// image returns the image after every record added so far. The controller
// proposes only records that apply; one that does not is a bug in it.
func (b *batch) image() metadata.Image {
	if b.applied < len(b.recs) {
		img, err := metadata.ApplyAll(b.img, b.recs[b.applied:])
		if err != nil {
			panic(fmt.Sprintf("controller: proposed a record that does not apply: %v", err))
		}
		b.img, b.applied = img, len(b.recs)
	}
	return b.img
}

// records returns the batch, checked to apply.
func (b *batch) records() []metadata.Record {
	b.image()
	return b.recs
}

// Check verifies the invariants the controller keeps over a cluster's
// image, beyond those Apply keeps: every leader is a registered broker,
// unfenced and not shutting down.
func Check(img metadata.Image) error {
	if err := img.Check(); err != nil {
		return err
	}
	for _, t := range img.Topics() {
		for i, p := range t.Partitions {
			if p.Leader != -1 && !img.BrokerEligible(p.Leader) {
				return fmt.Errorf("partition %s-%d: leader %d is not an eligible broker", t.Name, i, p.Leader)
			}
			if p.Leader != -1 && !slices.Contains(p.ISR, p.Leader) {
				return fmt.Errorf("partition %s-%d: leader %d not in isr %v", t.Name, i, p.Leader, p.ISR)
			}
		}
	}
	return nil
}
