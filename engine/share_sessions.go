package engine

// Share sessions (KIP-932): a member's ShareFetch and ShareAcknowledge
// requests to one broker form a session, keyed by group and member.
// Epoch 0 opens it (replacing an older one) with the partitions the
// request names; each later request carries the next epoch (1, 2, …,
// wrapping to 1) and adds partitions (Topics) or drops them
// (ForgottenTopicsData); epoch -1 closes it, and every record the member
// holds in its partitions is released. A request with another epoch is
// INVALID_SHARE_SESSION_EPOCH, one without a session
// SHARE_SESSION_NOT_FOUND. A session belongs to the connection that
// opened it: when that connection closes the session closes with it, as
// in Kafka (ConnectionClosed).

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/engine/share"
)

type shareSessionKey struct{ group, member string }

// shareTP is a partition of a share session.
type shareTP struct {
	topic     [16]byte
	partition int32
}

type shareSession struct {
	conn uint64 // Session.ID of the connection that opened it
	// next is the epoch the next request must carry (>= 1).
	next  int32
	parts map[shareTP]struct{}
}

// maxShareSessionPartitions bounds one session's partitions.
const maxShareSessionPartitions = 10000

// session runs the epoch rules for one request and returns the session's
// partitions after it (nil when the request closes it).
func (s *shareBroker) session(conn uint64, group, member string, epoch int32, add, forget []shareTP) ([]shareTP, int16) {
	k := shareSessionKey{group, member}
	s.mu.Lock()
	defer s.mu.Unlock()
	sess := s.mu.sessions[k]
	switch {
	case epoch == 0:
		sess = &shareSession{conn: conn, next: 0, parts: map[shareTP]struct{}{}}
		s.mu.sessions[k] = sess
	case sess == nil:
		return nil, kerr.ShareSessionNotFound.Code
	case epoch == -1:
		delete(s.mu.sessions, k)
		return listTPs(sess.parts), 0
	case epoch != sess.next:
		return nil, kerr.InvalidShareSessionEpoch.Code
	}
	sess.next = nextShareEpoch(sess.next)
	for _, tp := range forget {
		delete(sess.parts, tp)
	}
	for _, tp := range add {
		if len(sess.parts) >= maxShareSessionPartitions {
			return nil, kerr.ShareSessionLimitReached.Code
		}
		sess.parts[tp] = struct{}{}
	}
	return listTPs(sess.parts), 0
}

func nextShareEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

func listTPs(m map[shareTP]struct{}) []shareTP {
	out := make([]shareTP, 0, len(m))
	for tp := range m {
		out = append(out, tp)
	}
	return out
}

// releaseSession releases what member holds in the closed session's
// partitions.
func (s *shareBroker) releaseSession(group, member string, tps []shareTP) {
	for _, tp := range tps {
		s.mu.Lock()
		sp := s.mu.parts[share.SPKey{Group: group, TopicID: tp.topic, Partition: tp.partition}]
		s.mu.Unlock()
		if sp != nil {
			s.releaseMember(sp, member)
		}
	}
}

// ConnectionClosed closes the share sessions a closed connection opened,
// releasing what their members hold. The network layer calls it once per
// connection.
func (b *Broker) ConnectionClosed(sess *Session) {
	s := b.share
	if s == nil || sess == nil {
		return
	}
	type closedSession struct {
		k   shareSessionKey
		tps []shareTP
	}
	var closed []closedSession
	s.mu.Lock()
	for k, ss := range s.mu.sessions {
		if ss.conn == sess.ID {
			closed = append(closed, closedSession{k, listTPs(ss.parts)})
			delete(s.mu.sessions, k)
		}
	}
	s.mu.Unlock()
	for _, c := range closed {
		s.releaseSession(c.k.group, c.k.member, c.tps)
	}
}

// connID is the request's connection (0 when it came without one).
func connID(r *Request) uint64 {
	if r.Session == nil {
		return 0
	}
	return r.Session.ID
}
