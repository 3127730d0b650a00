package engine

import (
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The two requests that carry the data, Produce and Fetch, are decoded
// here instead of by kmsg's ReadFrom, into kmsg structures that are pooled
// with their Request and reused: slices keep their capacity from one
// request to the next, topic names (and the client id, rack and
// transactional id) are interned in a small per-object cache, and record
// sets alias the frame as kmsg's do. In the steady state a produce or fetch
// request allocates nothing to be decoded. The decoders read exactly what
// kmsg reads (request_hot_test.go compares them field by field over every
// version served, and fuzzes them); unknown tagged fields are skipped, not
// kept, since no handler looks at them.

// hotRequest is a pooled Request of a hot API and its decoded message.
// It lives from Handle until the request is answered (Request.done), then
// goes back to the pool: nothing may hold the Request, its Msg or slices of
// them after answering. Strings it hands out are ordinary immutable strings
// and may be kept.
type hotRequest struct {
	Request
	produce kmsg.ProduceRequest
	fetch   kmsg.FetchRequest
	txnID   string // backs produce.TransactionID
	names   nameCache
	// pooled is set while h sits in the pool. Invariant: a request goes
	// back exactly once per use (Request.answer and dispatch decide who
	// returns it); a second release would hand one object to two
	// requests at once, so it is refused (counted and logged) instead.
	pooled bool
}

var hotRequests = sync.Pool{New: func() any { return new(hotRequest) }}

// releaseHook, when set (tests), sees every pooled request go back.
var releaseHook func(*hotRequest)

// doubleReleases counts refused second releases (a bug if ever non-zero).
var doubleReleases atomic.Int64

// isHot reports whether key is decoded here.
func isHot(key int16) bool {
	return key == kmsg.Produce.Int16() || key == kmsg.Fetch.Int16()
}

// maxPooledTopics keeps a request naming thousands of topics from pinning
// its slices in the pool.
const maxPooledTopics = 1024

func (h *hotRequest) release() {
	if h.pooled {
		doubleReleases.Add(1)
		slog.Error("engine: pooled request released twice; not returned to the pool again")
		return
	}
	h.pooled = true
	if releaseHook != nil {
		releaseHook(h)
	}
	if cap(h.produce.Topics) > maxPooledTopics {
		h.produce.Topics = nil
	}
	if cap(h.fetch.Topics) > maxPooledTopics || cap(h.fetch.ForgottenTopics) > maxPooledTopics {
		h.fetch.Topics, h.fetch.ForgottenTopics = nil, nil
	}
	marks := h.frame.marks[:0] // the response frame's part list, reused too
	if cap(marks) > maxPooledTopics {
		marks = nil
	}
	h.Request = Request{}
	h.frame.marks = marks
	hotRequests.Put(h)
}

// message is the pooled message of h.Key.
func (h *hotRequest) message() kmsg.Request {
	if h.Key == kmsg.Produce.Int16() {
		return &h.produce
	}
	return &h.fetch
}

// decode reads body (after the header's tags) into the pooled message.
func (h *hotRequest) decode(body []byte) error {
	if h.Key == kmsg.Produce.Int16() {
		return h.decodeProduce(body)
	}
	return h.decodeFetch(body)
}

// nameCache interns the few distinct strings a connection's requests
// repeat. Invariant: len(names) <= maxCachedNames.
type nameCache struct {
	names []string
	next  int // the entry replaced when the cache is full
}

const maxCachedNames = 32

// intern returns b as a string, allocating only the first time it is seen
// (while it stays among the cached names).
func (c *nameCache) intern(b []byte) string {
	for _, s := range c.names {
		if s == string(b) {
			return s
		}
	}
	s := string(b)
	if len(c.names) < maxCachedNames {
		c.names = append(c.names, s)
	} else {
		c.names[c.next] = s
		c.next = (c.next + 1) % maxCachedNames
	}
	return s
}

// hotReader wraps kbin.Reader with the version-dependent encodings.
type hotReader struct {
	kbin.Reader
	flexible bool
	names    *nameCache
}

// arrayLen reads an array length; each element takes at least minSize
// bytes, so a length the rest of the body cannot hold is refused before
// anything is allocated for it (a 100 MB frame cannot make us allocate
// more than about its own size).
func (r *hotReader) arrayLen(minSize int) int {
	var n int32
	if r.flexible {
		n = r.CompactArrayLen()
	} else {
		n = r.ArrayLen()
	}
	if int64(n)*int64(minSize) > int64(len(r.Src)) {
		r.Span(-1) // marks r bad
		return 0
	}
	return int(max(n, 0)) // null reads as empty, as kmsg does
}

// stringBytes reads a (nullable) string's bytes; null is (nil, false).
func (r *hotReader) stringBytes() ([]byte, bool) {
	var l int
	if r.flexible {
		l = int(r.Uvarint()) - 1
	} else {
		l = int(r.Int16())
	}
	if l < 0 {
		return nil, false
	}
	return r.Span(l), true
}

func (r *hotReader) string() string {
	b, _ := r.stringBytes()
	return r.names.intern(b)
}

func (r *hotReader) nullableBytes() []byte {
	var l int
	if r.flexible {
		l = int(r.Uvarint()) - 1
	} else {
		l = int(r.Int32())
	}
	if l < 0 {
		return nil
	}
	return r.Span(l)
}

func (r *hotReader) uuid() (id [16]byte) {
	copy(id[:], r.Span(16))
	return id
}

// tags reads a tagged-field section, calling known for each tag (with a
// reader over its value) and skipping the rest.
func (r *hotReader) tags(known func(key uint32, v *hotReader)) {
	if !r.flexible {
		return
	}
	for n := r.Uvarint(); n > 0 && r.Ok(); n-- {
		key := r.Uvarint()
		v := hotReader{Reader: kbin.Reader{Src: r.Span(int(r.Uvarint()))}, flexible: true, names: r.names}
		if known != nil {
			known(key, &v)
			if !v.Ok() {
				r.Span(-1) // marks r bad
			}
		}
	}
}

// grow returns s with length n, keeping the elements (and so their own
// slices' capacity) when it fits; the caller overwrites every field.
func grow[T any](s []T, n int) []T {
	if cap(s) >= n {
		return s[:n]
	}
	return append(s[:cap(s)], make([]T, n-cap(s))...)
}

func (h *hotRequest) reader(body []byte, flexible bool) hotReader {
	return hotReader{Reader: kbin.Reader{Src: body}, flexible: flexible, names: &h.names}
}

// decodeProduce reads Produce v0-v12 (v0-v2, which the handler refuses,
// lack the transactional id).
func (h *hotRequest) decodeProduce(body []byte) error {
	v := &h.produce
	r := h.reader(body, v.Version >= 9)
	v.TransactionID = nil
	if v.Version >= 3 {
		if b, ok := r.stringBytes(); ok {
			h.txnID = r.names.intern(b)
			v.TransactionID = &h.txnID
		}
	}
	v.Acks, v.TimeoutMillis = r.Int16(), r.Int32()
	v.Topics = grow(v.Topics, r.arrayLen(2))
	for i := range v.Topics {
		t := &v.Topics[i]
		t.Topic, t.TopicID, t.UnknownTags = r.string(), [16]byte{}, kmsg.Tags{}
		t.Partitions = grow(t.Partitions, r.arrayLen(5))
		for j := range t.Partitions {
			p := &t.Partitions[j]
			p.Partition, p.Records, p.UnknownTags = r.Int32(), r.nullableBytes(), kmsg.Tags{}
			r.tags(nil)
		}
		r.tags(nil)
		if !r.Ok() {
			break
		}
	}
	r.tags(nil)
	return r.Complete()
}

// decodeFetch reads Fetch v4-v16.
func (h *hotRequest) decodeFetch(body []byte) error {
	v := &h.fetch
	ver := v.Version
	r := h.reader(body, ver >= 12)
	v.ReplicaID, v.ClusterID, v.ReplicaState = -1, nil, kmsg.FetchRequestReplicaState{ID: -1, Epoch: -1}
	if ver <= 14 {
		v.ReplicaID = r.Int32()
	}
	v.MaxWaitMillis, v.MinBytes, v.MaxBytes, v.IsolationLevel = r.Int32(), r.Int32(), r.Int32(), r.Int8()
	v.SessionID, v.SessionEpoch = 0, -1
	if ver >= 7 {
		v.SessionID, v.SessionEpoch = r.Int32(), r.Int32()
	}
	v.Topics = grow(v.Topics, r.arrayLen(2))
	for i := range v.Topics {
		h.fetchTopic(&r, &v.Topics[i])
		if !r.Ok() {
			break
		}
	}
	v.ForgottenTopics = v.ForgottenTopics[:0]
	if ver >= 7 {
		v.ForgottenTopics = grow(v.ForgottenTopics, r.arrayLen(2))
		for i := range v.ForgottenTopics {
			h.forgottenTopic(&r, &v.ForgottenTopics[i])
			if !r.Ok() {
				break
			}
		}
	}
	v.Rack = ""
	if ver >= 11 {
		v.Rack = r.string()
	}
	v.UnknownTags = kmsg.Tags{}
	r.tags(h.fetchTag)
	return r.Complete()
}

func (h *hotRequest) fetchTopic(r *hotReader, t *kmsg.FetchRequestTopic) {
	ver := h.fetch.Version
	t.Topic, t.TopicID, t.UnknownTags = "", [16]byte{}, kmsg.Tags{}
	if ver <= 12 {
		t.Topic = r.string()
	} else {
		t.TopicID = r.uuid()
	}
	t.Partitions = grow(t.Partitions, r.arrayLen(16))
	for j := range t.Partitions {
		p := &t.Partitions[j]
		*p = kmsg.FetchRequestTopicPartition{CurrentLeaderEpoch: -1, LastFetchedEpoch: -1, LogStartOffset: -1, HighWatermark: 9223372036854775807}
		p.Partition = r.Int32()
		if ver >= 9 {
			p.CurrentLeaderEpoch = r.Int32()
		}
		p.FetchOffset = r.Int64()
		if ver >= 12 {
			p.LastFetchedEpoch = r.Int32()
		}
		if ver >= 5 {
			p.LogStartOffset = r.Int64()
		}
		p.PartitionMaxBytes = r.Int32()
		r.tags(func(key uint32, v *hotReader) {
			switch key {
			case 0:
				p.ReplicaDirectoryID = v.uuid()
			case 1:
				p.HighWatermark = v.Int64()
			}
		})
	}
	r.tags(nil)
}

func (h *hotRequest) forgottenTopic(r *hotReader, t *kmsg.FetchRequestForgottenTopic) {
	t.Topic, t.TopicID, t.UnknownTags = "", [16]byte{}, kmsg.Tags{}
	if h.fetch.Version <= 12 {
		t.Topic = r.string()
	} else {
		t.TopicID = r.uuid()
	}
	t.Partitions = grow(t.Partitions, r.arrayLen(4))
	for j := range t.Partitions {
		t.Partitions[j] = r.Int32()
	}
	r.tags(nil)
}

// fetchTag reads the request's tagged fields: ClusterID (0) and
// ReplicaState (1, v15+).
func (h *hotRequest) fetchTag(key uint32, v *hotReader) {
	switch key {
	case 0:
		h.fetch.ClusterID = nil
		if b, ok := v.stringBytes(); ok {
			s := v.names.intern(b)
			h.fetch.ClusterID = &s // rare: only brokers send it
		}
	case 1:
		h.fetch.ReplicaState.ID, h.fetch.ReplicaState.Epoch = v.Int32(), v.Int64()
		v.tags(nil)
	}
}
