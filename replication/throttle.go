package replication

// Replication throttles (KIP-73), as Kafka bounds reassignment traffic: a
// broker-wide byte rate for the leader's answers to followers and one for
// a follower's fetches (leader.replication.throttled.rate,
// follower.replication.throttled.rate), applied only to the replicas a
// topic names (leader.replication.throttled.replicas,
// follower.replication.throttled.replicas) and never to a replica in the
// ISR.

import "strings"

// Unthrottled is the rate that throttles nothing (Kafka's default,
// Long.MAX_VALUE).
const Unthrottled = int64(^uint64(0) >> 1)

// Quota measures throttled bytes against a rate, as a token bucket that
// holds up to one second of the rate: a sender checks Exceeded before
// sending a throttled replica's bytes and Records what it sent, so that
// over any few seconds the throttled traffic averages the rate (a send may
// overdraw the bucket by one fetch's bytes; the next sends wait for it to
// refill). The rate is an input of every call, so a changed config takes
// effect at once. Not safe for concurrent use.
type Quota struct {
	// tokens is the bytes that may be sent now (negative: overdrawn).
	// Invariant: tokens <= the rate of the last call.
	tokens float64
	lastMs int64 // time of the last refill; 0 before the first call
}

// refill adds the bytes the rate earned since the last call.
func (q *Quota) refill(rate, nowMs int64) {
	if q.lastMs == 0 {
		q.tokens, q.lastMs = float64(rate), nowMs
		return
	}
	if dt := nowMs - q.lastMs; dt > 0 {
		q.tokens += float64(rate) * float64(dt) / 1000
		q.lastMs = nowMs
	}
	q.tokens = min(q.tokens, float64(rate))
}

// Exceeded reports whether throttled bytes must wait at nowMs.
func (q *Quota) Exceeded(rate, nowMs int64) bool {
	if rate == Unthrottled {
		return false
	}
	q.refill(rate, nowMs)
	return q.tokens <= 0
}

// Record counts n throttled bytes sent at nowMs.
func (q *Quota) Record(n, rate, nowMs int64) {
	if rate == Unthrottled {
		return
	}
	q.refill(rate, nowMs)
	q.tokens -= float64(n)
}

// ThrottledReplica reports whether a throttled-replicas list (a topic's
// leader. or follower.replication.throttled.replicas: "*" or
// "partition:broker,...", spaces allowed around entries) names replica
// broker of partition. It allocates nothing (it runs on fetches).
func ThrottledReplica(list string, partition, broker int32) bool {
	for len(list) > 0 {
		entry := list
		if i := strings.IndexByte(list, ','); i >= 0 {
			entry, list = list[:i], list[i+1:]
		} else {
			list = ""
		}
		entry = strings.TrimSpace(entry)
		if entry == "*" {
			return true
		}
		p, b, ok := parseReplica(entry)
		if ok && p == partition && b == broker {
			return true
		}
	}
	return false
}

// ValidThrottledReplicas checks a throttled-replicas list as Kafka does:
// "*", or entries each empty or partition:broker of non-negative
// integers.
func ValidThrottledReplicas(list string) bool {
	if strings.TrimSpace(list) == "*" || strings.TrimSpace(list) == "" {
		return true
	}
	for len(list) > 0 {
		entry := list
		if i := strings.IndexByte(list, ','); i >= 0 {
			entry, list = list[:i], list[i+1:]
		} else {
			list = ""
		}
		if e := strings.TrimSpace(entry); e == "" {
			continue
		} else if _, _, ok := parseReplica(e); !ok {
			return false
		}
	}
	return true
}

// parseReplica parses "partition:broker".
func parseReplica(s string) (partition, broker int32, ok bool) {
	i := strings.IndexByte(s, ':')
	if i < 0 {
		return 0, 0, false
	}
	p, ok1 := parseID(strings.TrimSpace(s[:i]))
	b, ok2 := parseID(strings.TrimSpace(s[i+1:]))
	return p, b, ok1 && ok2
}

// parseID parses a non-negative int32.
func parseID(s string) (int32, bool) {
	if s == "" || len(s) > 10 {
		return 0, false
	}
	var v int64
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		v = v*10 + int64(s[i]-'0')
	}
	return int32(v), v <= 1<<31-1
}
