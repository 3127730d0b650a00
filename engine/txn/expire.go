package txn

// Two sweeps, as in Kafka: transactions open longer than their timeout
// are aborted (at a bumped epoch, so the producer that went quiet is
// fenced), and transactional ids unused for transactional.id.expiration.ms
// are removed (a tombstone in the log). The engine's clock runs them every
// AbortCheckInterval and ExpireCheckInterval; tests call them directly.

import "time"

// AbortTimedOut aborts every open transaction past its timeout.
func (c *Coordinator) AbortTimedOut() {
	for _, m := range c.timedOut() {
		c.mu.Lock()
		if !c.ownedLocked(m) || m.pending || m.state != Ongoing {
			c.mu.Unlock()
			continue
		}
		s, err := m.snapshot().abortBumped(c.cfg.NewProducerID, c.clock.Now().UnixMilli())
		if err != nil {
			c.mu.Unlock()
			c.log.Error("cannot abort a timed-out transaction", "transactional_id", m.id, "err", err)
			continue
		}
		m.pending = true
		c.mu.Unlock()
		c.log.Info("aborting a timed-out transaction", "transactional_id", m.id, "producer_id", s.pid, "epoch", s.epoch)
		if c.persist(m, s, true) == 0 {
			c.sendMarkers(m)
		}
	}
}

func (c *Coordinator) timedOut() []*txnMeta {
	now := c.clock.Now().UnixMilli()
	return c.matching(func(m *txnMeta) bool {
		return m.state == Ongoing && !m.pending && now-m.startMs >= int64(m.timeoutMs)
	})
}

// ExpireIDs removes the transactional ids with nothing open that have not
// been used for transactional.id.expiration.ms.
func (c *Coordinator) ExpireIDs() {
	now := c.clock.Now().UnixMilli()
	ttl := c.cfg.IDExpiration.Milliseconds()
	expired := c.matching(func(m *txnMeta) bool {
		return m.state.complete() && !m.pending && now-m.updateMs >= ttl
	})
	for _, m := range expired {
		c.expire(m, now, ttl)
	}
}

func (c *Coordinator) expire(m *txnMeta, now, ttl int64) {
	c.mu.Lock()
	if !c.ownedLocked(m) || m.pending || !m.state.complete() || now-m.updateMs < ttl {
		c.mu.Unlock()
		return
	}
	m.pending = true
	c.mu.Unlock()
	err := c.appendRecord(m.part, m.id, nil)
	c.mu.Lock()
	defer c.mu.Unlock()
	m.pending = false
	if err != nil || !c.ownedLocked(m) {
		return
	}
	delete(c.mu.txns, m.id)
	c.log.Info("transactional id expired", "transactional_id", m.id, "idle", time.Duration(now-m.updateMs)*time.Millisecond)
}

// matching snapshots the ids that match.
func (c *Coordinator) matching(match func(*txnMeta) bool) []*txnMeta {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*txnMeta
	for _, m := range c.mu.txns {
		if match(m) {
			out = append(out, m)
		}
	}
	return out
}
