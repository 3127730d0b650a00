package engine

// Incremental fetch sessions (KIP-227, Fetch v7+).
//
// A consumer fetching many partitions would otherwise resend all of them,
// and get all of them back, on every fetch. With a session the broker
// remembers the partitions and their fetch state; the client sends only
// what changed (new fetch offsets, added or forgotten partitions) and the
// broker answers only partitions with something new: records, a moved high
// watermark, last stable offset or log start offset, or an error.
//
// Request kinds, by (SessionID, SessionEpoch):
//
//	(0, -1)   sessionless full fetch; the answer carries session id 0
//	(x, -1)   close session x, then a sessionless full fetch
//	(x, 0)    close session x if any, start a new session with these
//	          partitions (answered in full with the new id, or with 0 when
//	          the cache has no room)
//	(x, e>0)  incremental fetch in session x: FETCH_SESSION_ID_NOT_FOUND if
//	          unknown, INVALID_FETCH_SESSION_EPOCH unless e is the epoch
//	          expected next, FETCH_SESSION_TOPIC_ID_ERROR when the session
//	          and the request disagree on naming topics by id (v13+)
//
// The cache holds max.incremental.fetch.session.cache.slots sessions. When
// it is full a new session takes the slot of the least recently used one
// if that was idle for two minutes (Kafka's
// min.incremental.fetch.session.eviction.ms), else of the smallest session
// it may evict if the new one has more partitions; otherwise the client
// goes on without a session. Sessions of follower replicas are privileged,
// as in Kafka: a consumer's session never evicts one that is in use, so a
// flood of consumer sessions cannot turn a follower's fetches into full
// fetches of every partition it replicates; a follower's evicts the
// smallest consumer's, whatever its size. Partitions that returned records move to the back of the
// session's order, so a partition that fills max.bytes cannot starve the
// others.

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// sessionEvictionAge is how long a session must have been idle before a
// new session may take its slot regardless of size.
const sessionEvictionAge = 2 * time.Minute

type fetchSessionCache struct {
	max int

	mu       sync.Mutex
	sessions map[int32]*fetchSession
}

func newFetchSessionCache(max int) *fetchSessionCache {
	return &fetchSessionCache{max: max, sessions: map[int32]*fetchSession{}}
}

// fetchSession is one client's session.
type fetchSession struct {
	id       int32
	lastUsed atomic.Int64 // unix nanoseconds
	// privileged: a follower replica's session (fetch with a replica
	// id), which only another privileged session may evict while used.
	privileged bool

	mu struct {
		sync.Mutex
		epoch        int32 // the epoch the next request must carry
		usesTopicIDs bool  // created by a v13+ request
		parts        []*sessionPart
		index        map[sessionKey]*sessionPart
		scratch      []*sessionPart // reordering buffer
	}
}

// sessionKey names a partition as the session's requests do: by topic id
// for v13+, by name before.
type sessionKey struct {
	id        [16]byte
	name      string
	partition int32
}

// sessionPart is a partition in a session: the fetch state the client last
// sent, and what the client last saw, to send only changes.
type sessionPart struct {
	key                sessionKey
	fetchOffset        int64
	maxBytes           int32
	currentLeaderEpoch int32
	lastFetchedEpoch   int32

	hw, logStart, lso int64 // as last sent; hw -1 forces the next answer to include it
	hadRecords        bool  // in the answer being built
	removed           bool  // forgotten; a late answer must not re-add it
}

// begin sets up f's partitions and session from req.
func (c *fetchSessionCache) begin(f *fetch, req *kmsg.FetchRequest) {
	id, epoch := req.SessionID, req.SessionEpoch
	switch {
	case f.version < 7 || epoch == -1:
		if id != 0 {
			c.remove(id)
		}
		f.addRequested(req)
	case epoch == 0:
		if id != 0 {
			c.remove(id)
		}
		f.addRequested(req)
		c.startSession(f)
	case epoch < 0:
		f.errCode = kerr.InvalidFetchSessionEpoch.Code
	default:
		c.continueSession(f, req, id, epoch)
	}
}

func (c *fetchSessionCache) get(id int32) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[id]
}

func (c *fetchSessionCache) remove(id int32) {
	c.mu.Lock()
	delete(c.sessions, id)
	c.mu.Unlock()
}

// startSession creates a session holding f's partitions, if there is room.
func (c *fetchSessionCache) startSession(f *fetch) {
	s := &fetchSession{privileged: f.replica >= 0}
	s.mu.epoch = 1
	s.mu.usesTopicIDs = f.version >= 13
	s.mu.index = make(map[sessionKey]*sessionPart, len(f.parts))
	for i := range f.parts {
		fp := &f.parts[i]
		sp := s.upsert(fp.key(), fp)
		fp.sp = sp
	}
	if !c.admit(s, time.Now()) {
		for i := range f.parts {
			f.parts[i].sp = nil
		}
		return
	}
	f.session, f.sessionID = s, s.id
}

// admit gives s an id and a slot, evicting another session if the policy
// allows; false when the cache has no room for it.
func (c *fetchSessionCache) admit(s *fetchSession, now time.Time) bool {
	if c.max <= 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sessions) >= c.max && !c.evictFor(len(s.mu.parts), s.privileged, now) {
		return false
	}
	for s.id == 0 || c.sessions[s.id] != nil {
		s.id = rand.Int32N(math.MaxInt32) + 1
	}
	s.lastUsed.Store(now.UnixNano())
	c.sessions[s.id] = s
	return true
}

// evictFor frees a slot for a session of size partitions, privileged
// when a follower's. Called with c.mu held on a full cache.
func (c *fetchSessionCache) evictFor(size int, privileged bool, now time.Time) bool {
	var lru, least *fetchSession
	var leastValue sessionValue
	for _, s := range c.sessions {
		if lru == nil || s.lastUsed.Load() < lru.lastUsed.Load() {
			lru = s
		}
		if s.privileged && !privileged {
			continue // only a follower may evict a follower's session
		}
		if v := (sessionValue{s.privileged, s.size()}); least == nil || v.less(leastValue) {
			least, leastValue = s, v
		}
	}
	switch {
	case lru != nil && now.UnixNano()-lru.lastUsed.Load() > int64(sessionEvictionAge):
		delete(c.sessions, lru.id)
	case least != nil && leastValue.less(sessionValue{privileged, size}):
		delete(c.sessions, least.id)
	default:
		return false
	}
	return true
}

// sessionValue orders sessions for eviction, as Kafka's cache does: a
// follower's above any consumer's, then the one with more partitions
// (the larger saves more by being incremental).
type sessionValue struct {
	privileged bool
	size       int
}

func (a sessionValue) less(b sessionValue) bool {
	if a.privileged != b.privileged {
		return b.privileged
	}
	return a.size < b.size
}

func (s *fetchSession) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.parts)
}

// continueSession applies an incremental request to its session and lays
// out the session's partitions in f.
func (c *fetchSessionCache) continueSession(f *fetch, req *kmsg.FetchRequest, id, epoch int32) {
	s := c.get(id)
	if s == nil {
		f.errCode = kerr.FetchSessionIDNotFound.Code
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case epoch != s.mu.epoch:
		f.errCode = kerr.InvalidFetchSessionEpoch.Code
		return
	case s.mu.usesTopicIDs != (f.version >= 13):
		f.errCode = kerr.FetchSessionTopicIDError.Code
		return
	}
	s.mu.epoch = nextSessionEpoch(epoch)
	s.lastUsed.Store(time.Now().UnixNano())
	s.applyChanges(f, req)
	for _, sp := range s.mu.parts {
		f.parts = append(f.parts, sp.fetchPart())
	}
	f.session, f.sessionID, f.incremental = s, s.id, true
}

// nextSessionEpoch wraps from MaxInt32 to 1: 0 and -1 mean full fetches.
func nextSessionEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

// applyChanges adds or updates the request's partitions, then drops the
// forgotten ones. Called with s.mu held.
func (s *fetchSession) applyChanges(f *fetch, req *kmsg.FetchRequest) {
	for i := range req.Topics {
		t := &req.Topics[i]
		for j := range t.Partitions {
			fp := f.requestedPart(t, &t.Partitions[j])
			s.upsert(fp.key(), &fp)
		}
	}
	forgot := false
	for _, t := range req.ForgottenTopics {
		for _, p := range t.Partitions {
			key := sessionKey{partition: p}
			if f.version >= 13 {
				key.id = t.TopicID
			} else {
				key.name = t.Topic
			}
			if sp := s.mu.index[key]; sp != nil {
				sp.removed, forgot = true, true
				delete(s.mu.index, key)
			}
		}
	}
	if forgot {
		kept := s.mu.parts[:0]
		for _, sp := range s.mu.parts {
			if !sp.removed {
				kept = append(kept, sp)
			}
		}
		clear(s.mu.parts[len(kept):])
		s.mu.parts = kept
	}
}

// upsert records the fetch state the client sent for a partition. A new
// partition starts with hw -1, so the next answer includes it.
func (s *fetchSession) upsert(key sessionKey, fp *fetchPart) *sessionPart {
	sp := s.mu.index[key]
	if sp == nil {
		sp = &sessionPart{key: key, hw: -1, logStart: -1, lso: -1}
		s.mu.index[key] = sp
		s.mu.parts = append(s.mu.parts, sp)
	}
	sp.fetchOffset, sp.maxBytes = fp.fetchOffset, fp.maxBytes
	sp.currentLeaderEpoch, sp.lastFetchedEpoch = fp.currentLeaderEpoch, fp.lastFetchedEpoch
	return sp
}

func (fp *fetchPart) key() sessionKey {
	return sessionKey{id: fp.topicID, name: fp.topicName, partition: fp.partition}
}

func (sp *sessionPart) fetchPart() fetchPart {
	return fetchPart{topicID: sp.key.id, topicName: sp.key.name, partition: sp.key.partition,
		fetchOffset: sp.fetchOffset, maxBytes: sp.maxBytes,
		currentLeaderEpoch: sp.currentLeaderEpoch, lastFetchedEpoch: sp.lastFetchedEpoch, sp: sp}
}

// finish records what the answer in f tells the client and, for an
// incremental fetch, leaves out the partitions with nothing new.
func (s *fetchSession) finish(f *fetch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	moved := false
	for i := range f.parts {
		fp := &f.parts[i]
		sp := fp.sp
		if sp == nil {
			continue
		}
		changed := fp.records.Len > 0 || fp.err != 0 || fp.divergingEpoch >= 0 || fp.preferred >= 0 ||
			fp.hw != sp.hw || fp.logStart != sp.logStart || fp.lso != sp.lso
		fp.omit = f.incremental && !changed
		sp.hw, sp.logStart, sp.lso, sp.hadRecords = fp.hw, fp.logStart, fp.lso, fp.records.Len > 0
		if fp.err != 0 {
			sp.hw = -1 // resend the partition once the error clears
		}
		moved = moved || sp.hadRecords
	}
	if f.incremental && moved {
		s.rotate()
	}
}

// rotate moves the partitions that just returned records to the back,
// keeping the order within both groups. Called with s.mu held.
func (s *fetchSession) rotate() {
	out := s.mu.scratch[:0]
	for _, sp := range s.mu.parts {
		if !sp.hadRecords {
			out = append(out, sp)
		}
	}
	for _, sp := range s.mu.parts {
		if sp.hadRecords {
			out = append(out, sp)
		}
	}
	s.mu.scratch = s.mu.parts
	s.mu.parts = out
}
