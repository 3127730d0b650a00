package engine

// Client quotas, as Kafka's ClientQuotaManager has them: quotas are
// ClientQuotaRecords of the image, per user, client id, both, and their
// defaults. A request's (user, client id) resolves to the most specific
// entity with the quota key, in Kafka's order:
//
//	user+client  user+<default client>  user  <default user>+client
//	<default user>+<default client>  <default user>  client  <default client>
//
// and everyone resolving to one entity shares its rate. Rates are
// measured over quota.window.num samples of quota.window.size.seconds
// (Kafka's Rate: the elapsed time counts at least window.num-1 full
// samples). A request that takes the rate over the quota is answered in
// full, with throttle_time_ms = (rate - quota) / quota × elapsed, and its
// connection is muted for that long (Response.Mute: the network layer
// serves the connection's next request only then), as Kafka does since
// KIP-219. An acks=0 produce, which has no answer to carry the throttle,
// only mutes the connection.
//
//   - producer_byte_rate: the record bytes of each produce;
//   - consumer_byte_rate: the response bytes of each consumer fetch;
//   - request_percentage: time in the handler (from the frame's arrival
//     to the answer), as a percentage of one thread, for requests
//     answered while their handler runs; one answered later (a parked
//     fetch, a rebalance, acks=all) spent that time waiting, not
//     working, and is not counted;
//   - controller_mutation_rate: partitions created or deleted by
//     CreateTopics, CreatePartitions and DeleteTopics, per second, each
//     topic counted once it has passed its checks (a validate-only
//     request counts nothing). Clients of the versions KIP-599 made
//     strict (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+)
//     have a topic refused with THROTTLING_QUOTA_EXCEEDED, and not
//     counted, when the rate is already over the quota before it (one
//     topic may take it over); older ones are only throttled.
//
// With no quota in the image none of this runs (one atomic load).

import (
	"encoding/binary"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metadata"
)

// quotaKind is one of Kafka's client quota keys.
type quotaKind int

const (
	quotaProduce quotaKind = iota
	quotaFetch
	quotaRequest
	quotaMutation
	numQuotaKinds
)

var quotaKeyNames = [numQuotaKinds]string{"producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"}

// maxThrottle bounds one throttle, as Kafka's quota.window.size × num
// would; a quota of a few bytes must not mute a client for hours.
const maxThrottle = 30 * time.Second

type quotaState struct {
	// table is nil when the image has no user or client-id quota.
	table atomic.Pointer[quotaTable]
	mu    sync.Mutex
	quots uintptr // identity of the image's quota map table was built from
}

// quotaTable is the quotas of one image with the sensors measuring them.
type quotaTable struct {
	quotas map[metadata.QuotaEntity]map[string]float64
	window time.Duration
	num    int
	mu     sync.RWMutex
	// sensors by the entity a request resolved to and the kind.
	sensors map[sensorKey]*rateSensor
}

type sensorKey struct {
	entity metadata.QuotaEntity
	kind   quotaKind
}

func (b *Broker) applyQuotas(img metadata.Image) {
	m := img.ClientQuotas()
	id := mapIdentity(m)
	b.quotas.mu.Lock()
	defer b.quotas.mu.Unlock()
	if id == b.quotas.quots {
		return
	}
	b.quotas.quots = id
	userOrClient := false
	for e := range m {
		userOrClient = userOrClient || e.IP.Kind == metadata.EntityAbsent
	}
	if !userOrClient {
		b.quotas.table.Store(nil)
		return
	}
	window := time.Duration(max(b.cfg.Authz.QuotaWindowSeconds, 1)) * time.Second
	t := &quotaTable{quotas: m, window: window, num: int(max(b.cfg.Authz.QuotaWindowNum, 2)), sensors: map[sensorKey]*rateSensor{}}
	// Keep the rates measured so far: a quota change must not reset them.
	if old := b.quotas.table.Load(); old != nil {
		old.mu.RLock()
		for k, s := range old.sensors {
			t.sensors[k] = s
		}
		old.mu.RUnlock()
	}
	b.quotas.table.Store(t)
}

// resolve finds the entity whose kind quota applies to (user, client),
// in Kafka's precedence, and the quota.
func (t *quotaTable) resolve(user, client string, kind quotaKind) (metadata.QuotaEntity, float64, bool) {
	named := func(n string) metadata.EntityName { return metadata.EntityName{Kind: metadata.EntityNamed, Name: n} }
	def := metadata.EntityName{Kind: metadata.EntityDefault}
	none := metadata.EntityName{}
	u, c := named(user), named(client)
	for _, e := range [...]metadata.QuotaEntity{
		{User: u, ClientID: c}, {User: u, ClientID: def}, {User: u, ClientID: none},
		{User: def, ClientID: c}, {User: def, ClientID: def}, {User: def, ClientID: none},
		{User: none, ClientID: c}, {User: none, ClientID: def},
	} {
		if v, ok := t.quotas[e][quotaKeyNames[kind]]; ok {
			return e, v, true
		}
	}
	return metadata.QuotaEntity{}, 0, false
}

func (t *quotaTable) sensor(k sensorKey) *rateSensor {
	t.mu.RLock()
	s := t.sensors[k]
	t.mu.RUnlock()
	if s != nil {
		return s
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s = t.sensors[k]; s == nil {
		s = newRateSensor(t.num, t.window)
		t.sensors[k] = s
	}
	return s
}

// quotaUser is the user entity of a principal: its name ("User:alice" →
// alice, ANONYMOUS before authentication).
func quotaUser(principal string) string {
	if i := strings.IndexByte(principal, ':'); i >= 0 {
		return principal[i+1:]
	}
	return principal
}

// recordQuota records amount against the request's kind quota and
// returns the throttle it earns (0 when within quota or without one).
func (r *Request) recordQuota(kind quotaKind, amount float64, now time.Time) time.Duration {
	t := r.broker.quotas.table.Load()
	if t == nil {
		return 0
	}
	e, quota, ok := t.resolve(quotaUser(r.Session.Principal), r.ClientID, kind)
	if !ok || quota <= 0 {
		return 0
	}
	return t.sensor(sensorKey{e, kind}).record(amount, quota, now)
}

// throttleFor records what the answered request counts against the
// quotas that apply to it and returns the longest throttle it earned.
// resp is the kmsg answer (nil for Fetch, whose size is given).
func (r *Request) throttleFor(resp kmsg.Response, size int64) time.Duration {
	if r.broker.quotas.table.Load() == nil {
		return 0
	}
	now := time.Now()
	var d time.Duration
	if r.authz.inline.Load() {
		d = r.recordQuota(quotaRequest, float64(now.Sub(r.Received))/float64(time.Second)*100, now)
	}
	switch m := r.Msg.(type) {
	case *kmsg.ProduceRequest:
		d = max(d, r.recordQuota(quotaProduce, float64(produceBytes(m)), now))
	case *kmsg.FetchRequest:
		if m.ReplicaID < 0 && (r.Version < 15 || m.ReplicaState.ID < 0) {
			d = max(d, r.recordQuota(quotaFetch, float64(size), now))
		}
	case *kmsg.CreateTopicsRequest, *kmsg.CreatePartitionsRequest, *kmsg.DeleteTopicsRequest:
		// admitMutation counted the topics as they were mutated.
		d = max(d, r.recordQuota(quotaMutation, 0, now))
	}
	return min(d, maxThrottle)
}

// muteOnly counts a request that gets no answer (an acks=0 produce)
// against its quotas: over one, the answer is a Response of no parts
// whose Mute the network layer applies, writing nothing, as Kafka mutes
// the channel of an acks=0 producer it cannot tell its throttle time.
// Else nil.
func (r *Request) muteOnly() *Response {
	d := r.throttleFor(nil, 0)
	if d <= 0 {
		return nil
	}
	resp := newResponse()
	resp.Mute = d
	return resp
}

func produceBytes(req *kmsg.ProduceRequest) int {
	n := 0
	for i := range req.Topics {
		for j := range req.Topics[i].Partitions {
			n += len(req.Topics[i].Partitions[j].Records)
		}
	}
	return n
}

// throttleResponse sets the throttle of a kmsg answer; Respond calls it.
func (r *Request) throttleResponse(resp kmsg.Response) time.Duration {
	d := r.throttleFor(resp, 0)
	if d > 0 {
		if tr, ok := resp.(interface{ SetThrottle(int32) }); ok {
			tr.SetThrottle(int32(d.Milliseconds()))
		}
	}
	return d
}

// throttleEncoded counts an answer its handler encoded itself: Fetch's
// zero-copy frame, whose throttle it writes into the frame
// (ThrottleMillis opens the body, after the 4-byte size, the correlation
// id and, v12+, the header's tag byte), or a full Metadata from the
// broker's cache, whose bytes are shared and stay as they are: its
// throttle is the connection's mute alone.
func (r *Request) throttleEncoded(resp *Response) {
	if resp == nil || len(resp.Parts) == 0 || (r.Key != kmsg.Fetch.Int16() && r.Key != kmsg.Metadata.Int16()) {
		return
	}
	d := r.throttleFor(nil, resp.Size)
	if d <= 0 {
		return
	}
	resp.Mute = d
	if r.Key != kmsg.Fetch.Int16() {
		return
	}
	off := 8 + btoi(r.Version >= 12)
	if b := resp.Parts[0].Bytes; len(b) >= off+4 {
		binary.BigEndian.PutUint32(b[off:], uint32(d.Milliseconds()))
	}
}

// errThrottled answers a strict client's topic mutation over the
// controller mutation quota.
var errThrottled = topicErr(kerr.ThrottlingQuotaExceeded, "The throttling quota has been exceeded.")

// strictMutations reports whether a request's version is one KIP-599
// made strict: topics over the controller mutation quota are refused.
func strictMutations(key, version int16) bool {
	switch key {
	case kmsg.CreateTopics.Int16():
		return version >= 6
	case kmsg.CreatePartitions.Int16():
		return version >= 3
	case kmsg.DeleteTopics.Int16():
		return version >= 5
	}
	return false
}

// admitMutation counts one topic's mutation of partitions against the
// controller mutation quota, or refuses it with errThrottled for a
// strict client whose rate is already over the quota.
func (r *Request) admitMutation(partitions int32) error {
	t := r.broker.quotas.table.Load()
	if t == nil {
		return nil
	}
	e, quota, ok := t.resolve(quotaUser(r.Session.Principal), r.ClientID, quotaMutation)
	if !ok || quota <= 0 {
		return nil
	}
	if !t.sensor(sensorKey{e, quotaMutation}).admit(float64(partitions), quota, time.Now(), strictMutations(r.Key, r.Version)) {
		return errThrottled
	}
	return nil
}

// rateSensor is one entity's rate of one quota kind over a window of
// samples (Kafka's SampledStat with Rate's elapsed-time rule).
type rateSensor struct {
	mu      sync.Mutex
	window  time.Duration
	samples []sample // ring; cur is the newest
	cur     int
}

type sample struct {
	start time.Time
	value float64
}

func newRateSensor(num int, window time.Duration) *rateSensor {
	return &rateSensor{window: window, samples: make([]sample, num)}
}

// record adds amount at now and returns how long the caller must wait
// for the rate to be back at quota.
func (s *rateSensor) record(amount, quota float64, now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.current(now).value += amount
	rate, elapsed := s.rate(now)
	if rate <= quota {
		return 0
	}
	return time.Duration((rate - quota) / quota * float64(elapsed))
}

// admit adds amount at now and reports true, unless strict and the rate
// is over quota already: then it adds nothing and reports false.
func (s *rateSensor) admit(amount, quota float64, now time.Time, strict bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.current(now)
	if rate, _ := s.rate(now); strict && rate > quota {
		return false
	}
	c.value += amount
	return true
}

// current is the sample now falls in, a new one when the newest is over.
func (s *rateSensor) current(now time.Time) *sample {
	c := &s.samples[s.cur]
	if c.start.IsZero() || now.Sub(c.start) >= s.window {
		s.cur = (s.cur + 1) % len(s.samples)
		s.samples[s.cur] = sample{start: now}
		c = &s.samples[s.cur]
	}
	return c
}

// rate returns the measured rate per second and the elapsed time it is
// measured over: since the oldest live sample, and at least num-1 full
// windows (so a first burst is not judged over a few milliseconds).
func (s *rateSensor) rate(now time.Time) (float64, time.Duration) {
	total := 0.0
	oldest := now
	span := time.Duration(len(s.samples)) * s.window
	for _, sm := range s.samples {
		if sm.start.IsZero() || now.Sub(sm.start) >= span {
			continue
		}
		total += sm.value
		if sm.start.Before(oldest) {
			oldest = sm.start
		}
	}
	elapsed := max(now.Sub(oldest), time.Duration(len(s.samples)-1)*s.window)
	return total / elapsed.Seconds(), elapsed
}

// mapIdentity is the identity of a map the image published (images never
// change a published map, so a new map means a change).
func mapIdentity[K comparable, V any](m map[K]V) uintptr { return reflect.ValueOf(m).Pointer() }
