package engine

// Metadata (key 3), versions 0-12.
//
// Brokers: this node only (rack null). The controller id is this node too:
// clients use it only to route admin requests, which this broker serves.
// In a cluster: every registered, unfenced broker of the image with its
// PLAINTEXT endpoint and rack; the controller id stays this node (admin
// requests are forwarded, as KRaft brokers do). Each partition reports the
// image's leader (LEADER_NOT_AVAILABLE when it has none), leader epoch,
// replicas, ISR, and as offline replicas those whose broker is not
// registered or is fenced.
//
// Topics: all topics (v0: an empty list; v1+: a null list), the named ones,
// or, from v12, topics looked up by id (name null). v10-11 requests that
// name a topic by id or leave a name null are rejected with INVALID_REQUEST
// for every topic, as Kafka does. Internal topics are listed with the rest
// and flagged IsInternal.
//
// Auto-creation: an unknown, validly named topic is created with
// num.partitions partitions and default.replication.factor replicas when
// auto.create.topics.enable is on and, from v4, the request sets
// AllowAutoTopicCreation. As in Kafka, the answer for a topic this request
// set out to create is LEADER_NOT_AVAILABLE (name only, no partitions):
// clients retry it, and some clients' tests expect it. On a single node
// the topic is created before the answer, so the retry finds it ready; in
// a cluster the creation goes to the controller in the background (one
// at a time per name; a request meanwhile gets LEADER_NOT_AVAILABLE too)
// and the topic is answered once this broker's image has it, with
// LEADER_NOT_AVAILABLE on each partition that has no leader yet. A
// creation the controller refuses (say, a replication factor above the
// live brokers) is logged, and the next request tries again. Internal
// topic names are never auto-created: their coordinators create them
// with their own layout. Invalid names answer INVALID_TOPIC_EXCEPTION whether or not auto-creation
// is on, unknown ones UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID by id).
//
// There is no authorizer: authorized-operation bitfields (v8+), when asked
// for, report every operation Kafka supports on the resource, as Kafka does
// without an authorizer; otherwise they carry Kafka's "not requested" value.

import (
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metadata"
)

func init() { register(kmsg.Metadata, 0, 12, (*Broker).handleMetadata) }

// ACL operation bit positions (Kafka's AclOperation codes).
const (
	aclRead            = 3
	aclWrite           = 4
	aclCreate          = 5
	aclDelete          = 6
	aclAlter           = 7
	aclDescribe        = 8
	aclClusterAction   = 9
	aclDescribeConfigs = 10
	aclAlterConfigs    = 11
	aclIdempotentWrite = 12
)

// topicAuthorizedOps and clusterAuthorizedOps are every operation Kafka
// supports on a topic and on the cluster: what Kafka reports with no
// authorizer configured.
const (
	topicAuthorizedOps int32 = 1<<aclRead | 1<<aclWrite | 1<<aclCreate | 1<<aclDelete |
		1<<aclAlter | 1<<aclDescribe | 1<<aclDescribeConfigs | 1<<aclAlterConfigs
	clusterAuthorizedOps int32 = 1<<aclCreate | 1<<aclClusterAction | 1<<aclDescribeConfigs |
		1<<aclAlterConfigs | 1<<aclIdempotentWrite | 1<<aclAlter | 1<<aclDescribe
)

// internalTopicNames are the topics Kafka reserves for its coordinators.
var internalTopicNames = map[string]bool{offsetsTopic: true, "__transaction_state": true, "__share_group_state": true}

func (b *Broker) handleMetadata(r *Request) {
	req := r.Msg.(*kmsg.MetadataRequest)
	if req.Topics == nil || r.Version == 0 && len(req.Topics) == 0 {
		b.respondFullMetadata(r, req) // metadata_cache.go
		return
	}
	resp := b.metadataResponse(req, r.Version, r.listener())
	m := metadataBuilder{b: b, req: req, version: r.Version, replicas: []int32{b.cfg.NodeID}, img: b.image()}
	if r.Version >= 10 && r.Version <= 11 && usesTopicIDs(req) {
		resp.Topics = metadataRequestErrors(req, kerr.InvalidRequest.Code)
	} else {
		resp.Topics = m.requested()
	}
	r.Respond(resp)
}

// metadataResponse starts an answer for a connection on listener: the
// brokers, the cluster and its authorized operations; no topics yet.
func (b *Broker) metadataResponse(req *kmsg.MetadataRequest, version int16, listener string) *kmsg.MetadataResponse {
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	resp.SetVersion(version)
	resp.Brokers = b.metadataBrokers(listener)
	resp.ClusterID = &b.clusterID
	resp.ControllerID = b.cfg.NodeID
	if req.IncludeClusterAuthorizedOperations {
		resp.AuthorizedOperations = clusterAuthorizedOps
	}
	return resp
}

// fullMetadata describes every topic (what metadataCache keeps encoded).
func (b *Broker) fullMetadata(req *kmsg.MetadataRequest, version int16, listener string) *kmsg.MetadataResponse {
	resp := b.metadataResponse(req, version, listener)
	m := metadataBuilder{b: b, req: req, version: version, replicas: []int32{b.cfg.NodeID}, img: b.image()}
	topics := b.hosted.load().sorted
	resp.Topics = make([]kmsg.MetadataResponseTopic, 0, len(topics))
	for _, t := range topics {
		resp.Topics = append(resp.Topics, m.topic(t))
	}
	return resp
}

// listener is the listener the request's connection came in on.
func (r *Request) listener() string {
	if r.Session == nil {
		return ""
	}
	return r.Session.Listener
}

// usesTopicIDs reports whether any topic is requested by id, which Kafka
// accepts from v12 only.
func usesTopicIDs(req *kmsg.MetadataRequest) bool {
	for i := range req.Topics {
		if req.Topics[i].Topic == nil || req.Topics[i].TopicID != [16]byte{} {
			return true
		}
	}
	return false
}

// metadataRequestErrors answers every requested topic with code.
func metadataRequestErrors(req *kmsg.MetadataRequest, code int16) []kmsg.MetadataResponseTopic {
	out := make([]kmsg.MetadataResponseTopic, 0, len(req.Topics))
	for i := range req.Topics {
		rt := &req.Topics[i]
		name := ""
		if rt.Topic != nil {
			name = *rt.Topic
		}
		t := kmsg.NewMetadataResponseTopic()
		t.Topic, t.TopicID, t.ErrorCode = &name, rt.TopicID, code
		out = append(out, t)
	}
	return out
}

// metadataBuilder builds the topic entries of one Metadata response.
type metadataBuilder struct {
	b        *Broker
	req      *kmsg.MetadataRequest
	version  int16
	replicas []int32 // [this node], shared by every partition (read-only)
	// img is the metadata image the response describes: replicas, ISR and
	// leader come from it. (A topic auto-created by this request is not
	// described: it answers LEADER_NOT_AVAILABLE.)
	img metadata.Image
}

// requested answers the topics named (or identified) in the request, each
// once, in request order.
func (m *metadataBuilder) requested() []kmsg.MetadataResponseTopic {
	out := make([]kmsg.MetadataResponseTopic, 0, len(m.req.Topics))
	seenNames := make(map[string]bool, len(m.req.Topics))
	seenIDs := make(map[[16]byte]bool)
	for i := range m.req.Topics {
		rt := &m.req.Topics[i]
		// By id when the name is null, or empty beside an id: the Java
		// client leaves the name "" when it asks by id (as Kafka, which
		// looks up any non-zero id).
		if rt.Topic == nil || *rt.Topic == "" && rt.TopicID != ([16]byte{}) {
			if !seenIDs[rt.TopicID] {
				seenIDs[rt.TopicID] = true
				out = append(out, m.byID(rt.TopicID))
			}
			continue
		}
		if !seenNames[*rt.Topic] {
			seenNames[*rt.Topic] = true
			out = append(out, m.byName(*rt.Topic))
		}
	}
	return out
}

func (m *metadataBuilder) byID(id [16]byte) kmsg.MetadataResponseTopic {
	if t := m.b.TopicByID(id); t != nil {
		return m.topic(t)
	}
	st := kmsg.NewMetadataResponseTopic()
	st.TopicID = id
	st.ErrorCode = kerr.UnknownTopicID.Code
	return st
}

func (m *metadataBuilder) byName(name string) kmsg.MetadataResponseTopic {
	if t := m.b.Topic(name); t != nil {
		return m.topic(t)
	}
	st := kmsg.NewMetadataResponseTopic()
	st.Topic = &name
	st.IsInternal = internalTopicNames[name]
	st.ErrorCode = ErrorCode(m.create(name))
	return st
}

// create auto-creates an unknown topic if the request and the broker allow
// it, and returns what the topic is answered with: LEADER_NOT_AVAILABLE
// when it is (being) created, else why it cannot be.
func (m *metadataBuilder) create(name string) error {
	if m.version >= 4 && !m.req.AllowAutoTopicCreation {
		return unknownTopic(name)
	}
	return m.b.AutoCreateTopic(name)
}

func unknownTopic(name string) error {
	if err := ValidTopicName(name); err != nil {
		return topicErr(kerr.InvalidTopicException, "%v", err)
	}
	return topicErr(kerr.UnknownTopicOrPartition, "topic %q does not exist", name)
}

// topic describes an existing topic: its partitions' replicas, ISR and
// leader as the image places them (on a single node: this node alone), and
// the leader epoch of the partition here.
func (m *metadataBuilder) topic(t *Topic) kmsg.MetadataResponseTopic {
	st := kmsg.NewMetadataResponseTopic()
	st.Topic = &t.Name
	st.TopicID = t.ID
	st.IsInternal = t.Internal
	if m.req.IncludeTopicAuthorizedOperations {
		st.AuthorizedOperations = topicAuthorizedOps
	}
	if m.b.cluster != nil {
		m.clusterPartitions(&st, t)
		return st
	}
	parts := t.Partitions()
	ti := m.img.TopicByID(t.ID)
	st.Partitions = make([]kmsg.MetadataResponseTopicPartition, len(parts))
	for i, p := range parts {
		sp := &st.Partitions[i]
		sp.Partition = p.Index
		sp.Leader = m.b.cfg.NodeID
		sp.LeaderEpoch = p.LeaderEpoch()
		sp.Replicas = m.replicas
		sp.ISR = m.replicas
		sp.OfflineReplicas = []int32{}
		if ti != nil && i < len(ti.Partitions) {
			pi := &ti.Partitions[i]
			sp.Leader, sp.Replicas, sp.ISR = pi.Leader, pi.Replicas, pi.ISR
		}
	}
	return st
}

// AutoCreateTopic creates an unknown topic as auto.create.topics.enable
// does: num.partitions partitions, default.replication.factor replicas,
// no overrides. It returns LEADER_NOT_AVAILABLE once the creation is
// done (a single node) or under way (a cluster: the controller creates
// it in the background), which is what Kafka answers for a topic it has
// just set out to create; any other error says why it cannot be created.
// Internal topic names are refused: their coordinators create them.
func (b *Broker) AutoCreateTopic(name string) error {
	if !b.cfg.AutoCreateTopics || internalTopicNames[name] {
		return unknownTopic(name)
	}
	if err := ValidTopicName(name); err != nil {
		return topicErr(kerr.InvalidTopicException, "%v", err)
	}
	if err := b.checkTopicCollision(name); err != nil {
		return err
	}
	if b.cluster != nil {
		b.cluster.autoCreate(name)
		return errBeingCreated(name)
	}
	_, err := b.CreateTopic(name, -1, nil, false)
	if err == nil || ErrorCode(err) == kerr.TopicAlreadyExists.Code {
		return errBeingCreated(name)
	}
	return err
}

func errBeingCreated(name string) error {
	return topicErr(kerr.LeaderNotAvailable, "topic %q is being created", name)
}

// autoCreate creates topic name through the controller in the
// background, unless a creation of that name is already under way here.
func (l *clusterLink) autoCreate(name string) {
	l.mu.Lock()
	if l.autoCreating == nil {
		l.autoCreating = map[string]bool{}
	}
	if l.autoCreating[name] || len(l.autoCreating) >= maxAutoCreating {
		l.mu.Unlock()
		return
	}
	l.autoCreating[name] = true
	l.mu.Unlock()
	l.b.wg.Add(1)
	go func() {
		defer l.b.wg.Done()
		_, err := l.b.CreateTopic(name, -1, nil, false) // waits until this image has it
		if err != nil && ErrorCode(err) != kerr.TopicAlreadyExists.Code {
			l.b.log.Warn("auto topic creation failed", "topic", name, "err", err)
		}
		l.mu.Lock()
		delete(l.autoCreating, name)
		l.mu.Unlock()
	}()
}

// maxAutoCreating bounds the auto-creations under way on one broker; a
// request past it answers LEADER_NOT_AVAILABLE and the client's retry
// tries again.
const maxAutoCreating = 1024

// checkTopicCollision refuses a name that differs from an existing topic
// only by '.' versus '_'; Kafka refuses those because the two would share
// metric names, and tools built on Kafka assume they cannot coexist.
func (b *Broker) checkTopicCollision(name string) error {
	if !strings.ContainsAny(name, "._") {
		return nil
	}
	key := strings.ReplaceAll(name, ".", "_")
	for _, t := range b.Topics() {
		if t.Name != name && strings.ReplaceAll(t.Name, ".", "_") == key {
			return topicErr(kerr.InvalidTopicException, "Topic '%s' collides with existing topic: %s", name, t.Name)
		}
	}
	return nil
}

// metadataBrokers lists this node alone, or in a cluster every registered
// unfenced broker, at its endpoint of the listener the client came in on
// (listeners.go; the answer is cached per listener).
func (b *Broker) metadataBrokers(listener string) []kmsg.MetadataResponseBroker {
	if b.cluster == nil {
		host, port := b.advertised(listener)
		return []kmsg.MetadataResponseBroker{{NodeID: b.cfg.NodeID, Host: host, Port: port}}
	}
	var out []kmsg.MetadataResponseBroker
	img := b.image()
	for _, br := range img.Brokers() {
		if host, port, ok := brokerEndpointFor(img, br.ID, listener); ok && !br.Fenced {
			out = append(out, kmsg.MetadataResponseBroker{NodeID: br.ID, Host: host, Port: port, Rack: br.Rack})
		}
	}
	return out
}

// clusterPartitions describes t's partitions as the image has them.
func (m *metadataBuilder) clusterPartitions(st *kmsg.MetadataResponseTopic, t *Topic) {
	ti := m.img.TopicByID(t.ID)
	if ti == nil {
		return
	}
	st.Partitions = make([]kmsg.MetadataResponseTopicPartition, len(ti.Partitions))
	for i := range ti.Partitions {
		pi, sp := &ti.Partitions[i], &st.Partitions[i]
		sp.Partition, sp.Leader, sp.LeaderEpoch = int32(i), pi.Leader, pi.LeaderEpoch
		sp.Replicas, sp.ISR, sp.OfflineReplicas = pi.Replicas, pi.ISR, []int32{}
		for _, r := range pi.Replicas {
			if br, ok := m.img.Broker(r); !ok || br.Fenced {
				sp.OfflineReplicas = append(sp.OfflineReplicas, r)
			}
		}
		if pi.Leader < 0 {
			sp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
	}
}
