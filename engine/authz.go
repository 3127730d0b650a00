package engine

// Authorization: every request is checked against the ACLs of the
// metadata image when authorizer.class.name names Kafka's
// StandardAuthorizer (security/acl has its semantics). The check happens
// in one place, between decoding and the handler (dispatch), driven by
// one table keyed by API (authz_apis.go):
//
//   - a request on resources the principal may not touch at all (a group
//     it may not read, a cluster operation) is answered with Kafka's
//     authorization error and never reaches its handler;
//   - a request on several resources is filtered: the denied ones are
//     taken out of the request before the handler runs (so nothing is
//     written, created or deleted for them) and put back into the
//     response with TOPIC_AUTHORIZATION_FAILED (or the group/cluster
//     code) when it is encoded (Request.Respond);
//   - listings (Metadata of all topics, ListGroups, OffsetFetch of all
//     topics) leave out what the principal may not DESCRIBE;
//   - Fetch, whose answer is encoded by hand, asks per partition
//     (fetch.partition calls Request.fetchDenied), with the last topic's
//     answer cached so a fetch of many partitions of one topic checks once.
//
// An API without a row in the table is served to super users only (a
// test lists every served API against the table), so a new API is never
// open by accident.
//
// With no authorizer configured nothing here runs: dispatch tests one
// pointer. With one, a produce or fetch of an allowed topic costs one
// Authorize (an index lookup, no allocation: BenchmarkAuthorizeProduce).

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/controller"
	"github.com/sluice-broker/sluice/metadata"
	"github.com/sluice-broker/sluice/security/acl"
)

// StandardAuthorizerClass is the authorizer.class.name that turns ACLs on
// (Kafka's KRaft authorizer).
const StandardAuthorizerClass = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

// AuthzConfig is the broker configuration of authorization, quotas and
// connection limits (authorizer.class.name, super.users,
// allow.everyone.if.no.acl.found, max.connections…; rows in
// configkeys_authz.go).
type AuthzConfig struct {
	AuthorizerClass string // "" (off) or StandardAuthorizerClass
	SuperUsers      string // principals separated by ';'
	AllowIfNoACL    bool

	// Connection limits (internal/server/connlimit.go).
	MaxConnections          int32  // max.connections
	MaxConnectionsPerIP     int32  // max.connections.per.ip
	MaxConnectionsPerIPOver string // max.connections.per.ip.overrides: host:count,...
	MaxConnectionCreateRate int32  // max.connection.creation.rate, per second

	// Quotas (quota.go): rates are measured over QuotaWindowNum samples
	// of QuotaWindowSeconds each (quota.window.num,
	// quota.window.size.seconds).
	QuotaWindowNum     int32
	QuotaWindowSeconds int32
}

// authzState is the broker's authorizer, rebuilt when the image's ACLs
// change.
type authzState struct {
	// cur is nil when no authorizer is configured; otherwise the
	// authorizer over the image's ACLs.
	cur atomic.Pointer[acl.Authorizer]
	mu  sync.Mutex
	// acls is the identity of the image's ACL map cur was built from
	// (images never change a map they have published).
	acls uintptr
	cfg  acl.Config
}

// initAuthz reads the configuration; the authorizer itself is built at
// the first image (applyAuthz).
func (b *Broker) initAuthz() {
	if b.cfg.Authz.AuthorizerClass == "" {
		return
	}
	for _, p := range strings.Split(b.cfg.Authz.SuperUsers, ";") {
		if p = strings.TrimSpace(p); p != "" {
			b.authz.cfg.SuperUsers = append(b.authz.cfg.SuperUsers, p)
		}
	}
	b.authz.cfg.AllowIfNoACL = b.cfg.Authz.AllowIfNoACL
	b.authz.acls = ^uintptr(0)
	b.authz.cur.Store(acl.New(b.authz.cfg, nil))
}

// applyAuthz follows an image: rebuilds the authorizer when its ACLs
// changed and the quotas when they did (quota.go).
func (b *Broker) applyAuthz(img metadata.Image) {
	b.applyQuotas(img)
	if b.cfg.Authz.AuthorizerClass == "" {
		return
	}
	m := img.ACLs()
	id := mapIdentity(m)
	b.authz.mu.Lock()
	defer b.authz.mu.Unlock()
	if id == b.authz.acls {
		return
	}
	bindings := make([]acl.Binding, 0, len(m))
	for _, a := range m {
		bindings = append(bindings, controller.ACLBinding(a))
	}
	b.authz.cur.Store(acl.New(b.authz.cfg, bindings))
	b.authz.acls = id
}

// ACLCount returns the number of ACLs in the metadata image.
func (b *Broker) ACLCount() int { return b.image().ACLCount() }

// requestAuthz is a request's authorization state.
type requestAuthz struct {
	// post, when set, completes the response before it is encoded: the
	// denied resources go back in, listings lose what may not be seen.
	post func(kmsg.Response)
	// The last topic Fetch asked about, and the answer.
	lastTopic   string
	lastAllowed bool
	lastValid   bool
	// inline is true while the handler runs in dispatch: an answer given
	// then took handler time only, one given later (a parked fetch, a
	// rebalance, acks=all) mostly waited (quota.go).
	inline atomic.Bool
	// viaRespond marks an answer built by Respond, whose throttle is
	// set there (quota.go).
	viaRespond bool
}

// authorizer returns the broker's authorizer, nil when there is none.
func (b *Broker) authorizer() *acl.Authorizer { return b.authz.cur.Load() }

// allowed reports whether the request's principal may perform op on the
// resource. Without an authorizer everything is allowed.
func (r *Request) allowed(op acl.Operation, rt acl.ResourceType, name string) bool {
	a := r.broker.authorizer()
	return a == nil || a.Authorize(r.Session.Principal, r.host(), op, rt, name)
}

func (r *Request) allowedCluster(op acl.Operation) bool {
	return r.allowed(op, acl.ResourceCluster, acl.ClusterName)
}

// host is the client's address without the port, as ACL hosts name it.
func (r *Request) host() string {
	h := r.Session.Remote
	if i := strings.LastIndexByte(h, ':'); i >= 0 {
		h = h[:i]
	}
	if len(h) > 1 && h[0] == '[' && h[len(h)-1] == ']' {
		h = h[1 : len(h)-1]
	}
	return h
}

// testPrincipal, set only by tests (export_test.go), names a
// connection's principal from the client id of its requests: it stands
// in for authentication (secconn's SASL listeners) in tests of the
// authorizer. Nil in every broker that is not a test's.
var testPrincipal func(clientID string) string

// admit authorizes the request; false means it has been answered.
func (b *Broker) admit(r *Request) bool {
	if testPrincipal != nil {
		r.Session.Principal = testPrincipal(r.ClientID)
	}
	return b.authorizer() == nil || b.authorize(r)
}

// authorize runs the request's row of the table. It returns false when
// it answered the request itself.
func (b *Broker) authorize(r *Request) (served bool) {
	defer func() {
		if p := recover(); p != nil { // a bug here must not take the broker down
			b.log.Error("authorization panic", "api", kmsg.NameForKey(r.Key), "panic", fmt.Sprint(p))
			r.closeConn()
			served = false
		}
	}()
	row := authzTable[r.Key]
	if row == nil {
		if b.authorizer().IsSuperUser(r.Session.Principal) {
			return true
		}
		b.log.Warn("closing connection: API without an authorization rule, and not a super user",
			"api", kmsg.NameForKey(r.Key), "principal", r.Session.Principal)
		r.closeConn()
		return false
	}
	return row(r)
}

// fetchTopicName is the topic a fetch partition names.
func fetchTopicName(fp *fetchPart) string {
	if fp.topic != nil {
		return fp.topic.Name
	}
	return fp.topicName
}

// fetchDenied reports whether a fetch may not read fp: a consumer needs
// READ on the topic, a follower CLUSTER_ACTION on the cluster (Kafka
// answers both with TOPIC_AUTHORIZATION_FAILED).
func (r *Request) fetchDenied(topic string, follower bool) bool {
	if r.broker.authorizer() == nil {
		return false
	}
	if follower {
		topic = "" // one answer for every partition
	}
	if r.authz.lastValid && r.authz.lastTopic == topic {
		return !r.authz.lastAllowed
	}
	ok := false
	if follower {
		ok = r.allowedCluster(acl.OpClusterAction)
	} else {
		ok = r.allowed(acl.OpRead, acl.ResourceTopic, topic)
	}
	r.authz.lastTopic, r.authz.lastAllowed, r.authz.lastValid = topic, ok, true
	return !ok
}
