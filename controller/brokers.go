package controller

import (
	"github.com/sluice-broker/sluice/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
)

// Registration is a BrokerRegistration request (key 62).
type Registration struct {
	BrokerID      int32
	ClusterID     string
	IncarnationID [16]byte
	Endpoints     []metadata.Endpoint
	Rack          *string
	// NextOffset is the metadata log offset the batch this call proposes
	// will start at (the log end, when batches are proposed one at a
	// time). The broker epoch is the offset of the RegisterBrokerRecord,
	// as in KRaft, so a broker knows it has caught up with its own
	// registration once it has applied that offset.
	NextOffset int64
}

// RegistrationResult is the records a registration proposes and, once
// they commit, the answer: the new broker epoch, or Err.
type RegistrationResult struct {
	Result
	BrokerEpoch int64
	Err         *kerr.Error
}

// Register registers a broker, fenced until it catches up (see
// Heartbeat). A registration of an id already registered replaces the old
// one, whatever its incarnation: a restarted process must not keep
// leadership or ISR membership its previous life had, so the old
// registration's partitions are handed over first, as a fence would.
func (c *Controller) Register(img metadata.Image, req Registration, nowMs int64) RegistrationResult {
	cluster := img.ClusterID()
	if cluster == "" {
		cluster = c.cfg.ClusterID
	}
	switch {
	case req.ClusterID != cluster:
		return RegistrationResult{Err: kerr.InconsistentClusterID}
	case req.BrokerID < 0 || req.NextOffset < 0:
		return RegistrationResult{Err: kerr.InvalidRequest}
	}
	b := newBatch(img)
	epoch := req.NextOffset
	if old, ok := img.Broker(req.BrokerID); ok {
		c.removeBroker(b, req.BrokerID)
		epoch = max(req.NextOffset+int64(len(b.recs)), old.Epoch+1)
	}
	b.add(metadata.RegisterBrokerRecord{BrokerID: req.BrokerID, IncarnationID: req.IncarnationID, BrokerEpoch: epoch,
		Endpoints: req.Endpoints, Rack: req.Rack, Fenced: true})
	br, _ := b.image().Broker(req.BrokerID)
	c.touch(br, nowMs)
	return RegistrationResult{Result: Result{b.records()}, BrokerEpoch: epoch}
}

// Heartbeat is a BrokerHeartbeat request (key 63).
type Heartbeat struct {
	BrokerID    int32
	BrokerEpoch int64
	// CurrentMetadataOffset is the offset of the last metadata record the
	// broker has applied (-1 for none).
	CurrentMetadataOffset int64
	WantFence             bool
	WantShutDown          bool
	// Conn names the connection the heartbeat came on (0: not known),
	// so that the close of an older one is not read as this broker's
	// death (HeartbeatConnClosed).
	Conn uint64
}

// HeartbeatResult is the records a heartbeat proposes and the answer to
// send once they commit.
type HeartbeatResult struct {
	Result
	Err            *kerr.Error
	IsCaughtUp     bool
	IsFenced       bool
	ShouldShutDown bool
}

// Heartbeat renews a broker's session and moves its state on: a fenced
// broker that has caught up with its registration (and does not ask to
// stay fenced) is unfenced and elected where a partition waits for it; an
// unfenced one that asks to be fenced is; one that wants to shut down
// enters controlled shutdown (its leaderships move, it leaves every ISR)
// and is told to shut down once it leads nothing.
func (c *Controller) Heartbeat(img metadata.Image, req Heartbeat, nowMs int64) HeartbeatResult {
	br, ok := img.Broker(req.BrokerID)
	switch {
	case !ok:
		return HeartbeatResult{Err: kerr.BrokerIDNotRegistered}
	case br.Epoch != req.BrokerEpoch:
		return HeartbeatResult{Err: kerr.StaleBrokerEpoch}
	}
	c.touch(br, nowMs)
	if req.Conn != 0 {
		c.session(br, nowMs).conn = req.Conn
	}
	b := newBatch(img)
	caughtUp := req.CurrentMetadataOffset >= br.Epoch
	out := HeartbeatResult{IsCaughtUp: caughtUp}
	switch {
	case br.Fenced && req.WantShutDown:
		// A fenced broker leads nothing and may go at once.
		out.ShouldShutDown = true
	case br.Fenced:
		if caughtUp && !req.WantFence && !br.InControlledShutdown {
			c.unfence(b, br)
		}
	case req.WantFence:
		c.fence(b, br)
	case req.WantShutDown:
		c.controlledShutdown(b, br)
		out.ShouldShutDown = !leadsAny(b.image(), br.ID)
	}
	after, _ := b.image().Broker(br.ID)
	out.IsFenced = after.Fenced
	out.Records = b.records()
	return out
}

// fence fences broker br after handing its partitions over.
func (c *Controller) fence(b *batch, br metadata.BrokerImage) {
	c.removeBroker(b, br.ID)
	b.add(metadata.FenceBrokerRecord{BrokerID: br.ID, BrokerEpoch: br.Epoch})
}

// unfence unfences broker br and elects it where a partition has no leader
// and it may lead.
func (c *Controller) unfence(b *batch, br metadata.BrokerImage) {
	b.add(metadata.UnfenceBrokerRecord{BrokerID: br.ID, BrokerEpoch: br.Epoch})
	c.electOffline(b, br.ID)
}

// controlledShutdown marks br as shutting down and hands its partitions
// over. Repeating it (every heartbeat until the broker goes) proposes
// nothing new.
func (c *Controller) controlledShutdown(b *batch, br metadata.BrokerImage) {
	if !br.InControlledShutdown {
		b.add(metadata.BrokerRegistrationChangeRecord{BrokerID: br.ID, BrokerEpoch: br.Epoch,
			InControlledShutdown: metadata.ShutdownChangeEnter})
	}
	c.removeBroker(b, br.ID)
}

func leadsAny(img metadata.Image, id int32) bool {
	for t := range img.AllTopics() {
		for _, p := range t.Partitions {
			if p.Leader == id {
				return true
			}
		}
	}
	return false
}

// UnregisterResult is the records an UnregisterBroker (key 64) proposes
// and the answer.
type UnregisterResult struct {
	Result
	Err *kerr.Error
}

// Unregister removes broker id's registration after handing its
// partitions over. Its replicas stay assigned until a reassignment moves
// them.
func (c *Controller) Unregister(img metadata.Image, id int32) UnregisterResult {
	br, ok := img.Broker(id)
	if !ok {
		return UnregisterResult{Err: kerr.BrokerIDNotRegistered}
	}
	b := newBatch(img)
	c.removeBroker(b, id)
	b.add(metadata.UnregisterBrokerRecord{BrokerID: id, BrokerEpoch: br.Epoch})
	delete(c.sessions, id)
	return UnregisterResult{Result: Result{b.records()}}
}

// HeartbeatConnClosed reports that connection conn, on which broker id
// heartbeated at broker epoch epoch, was closed by its peer. It is
// ConnectionLost unless the broker has heartbeated on another connection
// since: a broker whose idle connection was reset reconnects and
// heartbeats at once (Client.Switched), and the close of the old
// connection may reach the controller after that heartbeat.
func (c *Controller) HeartbeatConnClosed(id int32, epoch int64, conn uint64, nowMs int64) {
	if s := c.sessions[id]; s != nil && s.epoch == epoch && s.conn != 0 && s.conn != conn {
		return
	}
	c.ConnectionLost(id, epoch, nowMs)
}
