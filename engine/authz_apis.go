package engine

// The authorization table: what Kafka checks for each API (KafkaApis and
// the controller's forwarding), and how a denial is answered. Produce and
// Fetch, the hot paths, are typed; the admin and group APIs share a few
// shape-generic filters (reflection over kmsg's uniform field names, run
// only when an authorizer is on, for requests that are not per-record).

import (
	"reflect"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/security/acl"
)

// authzRule checks one request; false means it was answered already.
type authzRule func(r *Request) bool

var authzTable [maxAPIKey]authzRule

func init() {
	group, txn := acl.ResourceGroup, acl.ResourceTransactionalID
	topicCode, groupCode := kerr.TopicAuthorizationFailed.Code, kerr.GroupAuthorizationFailed.Code
	for key, rule := range map[kmsg.Key]authzRule{
		kmsg.Produce:                      authorizeProduce,
		kmsg.Fetch:                        allowAll, // per partition, in the handler (fetchDenied)
		kmsg.ListOffsets:                  postTopics(acl.OpDescribe, "Partitions"),
		kmsg.Metadata:                     authorizeMetadata,
		kmsg.OffsetCommit:                 all(wholeGroup(acl.OpRead, "Group", groupCode), filterTopics(acl.OpRead, "Partitions", topicCode)),
		kmsg.OffsetFetch:                  authorizeOffsetFetch,
		kmsg.FindCoordinator:              authorizeFindCoordinator,
		kmsg.JoinGroup:                    wholeGroup(acl.OpRead, "Group", groupCode),
		kmsg.Heartbeat:                    wholeGroup(acl.OpRead, "Group", groupCode),
		kmsg.LeaveGroup:                   wholeGroup(acl.OpRead, "Group", groupCode),
		kmsg.SyncGroup:                    wholeGroup(acl.OpRead, "Group", groupCode),
		kmsg.DescribeGroups:               all(postGroups(acl.OpDescribe), postGroupOps),
		kmsg.ListGroups:                   authorizeListGroups,
		kmsg.SASLHandshake:                allowAll,
		kmsg.ApiVersions:                  allowAll,
		kmsg.SASLAuthenticate:             allowAll,
		kmsg.CreateTopics:                 authorizeCreateTopics,
		kmsg.DeleteTopics:                 authorizeDeleteTopics,
		kmsg.DeleteRecords:                filterTopics(acl.OpDelete, "Partitions", topicCode),
		kmsg.InitProducerID:               authorizeInitProducerID,
		kmsg.OffsetForLeaderEpoch:         authorizeOffsetForLeaderEpoch,
		kmsg.AddPartitionsToTxn:           authorizeAddPartitionsToTxn,
		kmsg.AddOffsetsToTxn:              all(wholeTxn("TransactionalID"), wholeGroup(acl.OpRead, "Group", groupCode)),
		kmsg.EndTxn:                       wholeTxn("TransactionalID"),
		kmsg.WriteTxnMarkers:              wholeCluster(acl.OpClusterAction),
		kmsg.TxnOffsetCommit:              all(wholeTxn("TransactionalID"), wholeGroup(acl.OpRead, "Group", groupCode), filterTopics(acl.OpRead, "Partitions", topicCode)),
		kmsg.DescribeACLs:                 allowAll, // 29_describe_acls.go: DESCRIBE on the cluster
		kmsg.CreateACLs:                   allowAll, // 30_create_acls.go: ALTER on the cluster
		kmsg.DeleteACLs:                   allowAll, // 31_delete_acls.go: ALTER on the cluster
		kmsg.DescribeConfigs:              postConfigs(acl.OpDescribeConfigs),
		kmsg.AlterConfigs:                 filterConfigs(acl.OpAlterConfigs),
		kmsg.IncrementalAlterConfigs:      filterConfigs(acl.OpAlterConfigs),
		kmsg.DescribeLogDirs:              wholeCluster(acl.OpDescribe),
		kmsg.CreatePartitions:             filterTopics(acl.OpAlter, "", topicCode),
		kmsg.DeleteGroups:                 filterGroups(acl.OpDelete),
		kmsg.ElectLeaders:                 wholeCluster(acl.OpAlter),
		kmsg.AlterPartitionAssignments:    wholeCluster(acl.OpAlter),
		kmsg.ListPartitionReassignments:   wholeCluster(acl.OpDescribe),
		kmsg.OffsetDelete:                 all(wholeGroup(acl.OpDelete, "Group", groupCode), filterTopics(acl.OpRead, "Partitions", topicCode)),
		kmsg.DescribeClientQuotas:         allowAll, // 48_describe_client_quotas.go
		kmsg.AlterClientQuotas:            allowAll, // 49_alter_client_quotas.go
		kmsg.DescribeQuorum:               wholeCluster(acl.OpDescribe),
		kmsg.DescribeCluster:              postClusterOps, // Kafka checks nothing; the authorized operations are the principal's
		kmsg.DescribeProducers:            postTopics(acl.OpRead, "Partitions"),
		kmsg.UnregisterBroker:             wholeCluster(acl.OpAlter),
		kmsg.DescribeTransactions:         postResources(txn, acl.OpDescribe, "TransactionStates", "TransactionalID", kerr.TransactionalIDAuthorizationFailed.Code),
		kmsg.DescribeUserSCRAMCredentials: wholeCluster(acl.OpDescribe),
		kmsg.AlterUserSCRAMCredentials:    authorizeAlterScram,
		kmsg.ListTransactions:             authorizeListTransactions,
		// Share groups (KIP-932): the group's operation; a topic the
		// principal may not read is taken out of ShareFetch and
		// ShareAcknowledge (out of the share session too) and its
		// partitions answered TOPIC_AUTHORIZATION_FAILED, as Kafka does.
		kmsg.ShareGroupHeartbeat:        all(wholeGroup(acl.OpRead, "GroupID", groupCode), wholeTopicNames("SubscribedTopicNames", acl.OpDescribe)),
		kmsg.ShareGroupDescribe:         postResources(group, acl.OpDescribe, "Groups", "GroupID", groupCode),
		kmsg.ShareFetch:                 all(wholeGroup(acl.OpRead, "GroupID", groupCode), filterTopicIDs(acl.OpRead)),
		kmsg.ShareAcknowledge:           all(wholeGroup(acl.OpRead, "GroupID", groupCode), filterTopicIDs(acl.OpRead)),
		kmsg.InitializeShareGroupState:  wholeCluster(acl.OpClusterAction),
		kmsg.ReadShareGroupState:        wholeCluster(acl.OpClusterAction),
		kmsg.WriteShareGroupState:       wholeCluster(acl.OpClusterAction),
		kmsg.DeleteShareGroupState:      wholeCluster(acl.OpClusterAction),
		kmsg.ReadShareGroupStateSummary: wholeCluster(acl.OpClusterAction),
		kmsg.DescribeShareGroupOffsets:  postResources(group, acl.OpDescribe, "Groups", "GroupID", groupCode),
		kmsg.AlterShareGroupOffsets:     wholeGroup(acl.OpRead, "GroupID", groupCode),
		kmsg.DeleteShareGroupOffsets:    wholeGroup(acl.OpDelete, "GroupID", groupCode),
		kmsg.ConsumerGroupHeartbeat:     wholeGroup(acl.OpRead, "Group", groupCode),
		kmsg.ConsumerGroupDescribe:      postResources(group, acl.OpDescribe, "Groups", "Group", groupCode),
	} {
		authzTable[key.Int16()] = rule
	}
}

func allowAll(*Request) bool { return true }

// all runs rules in order until one answers the request.
func all(rules ...authzRule) authzRule {
	return func(r *Request) bool {
		for _, rule := range rules {
			if !rule(r) {
				return false
			}
		}
		return true
	}
}

// addPost chains f after the request's other response fix-ups.
func (r *Request) addPost(f func(kmsg.Response)) {
	prev := r.authz.post
	if prev == nil {
		r.authz.post = f
		return
	}
	r.authz.post = func(resp kmsg.Response) { prev(resp); f(resp) }
}

// field returns v's (a struct or pointer to one) named field, or an
// invalid Value.
func field(v reflect.Value, name string) reflect.Value {
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	return v.FieldByName(name)
}

// str reads a string or *string field ("" for nil).
func str(v reflect.Value) string {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return ""
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.String {
		return ""
	}
	return v.String()
}

// setStr sets a string or *string field.
func setStr(v reflect.Value, s string) {
	if v.Kind() == reflect.Pointer {
		v.Set(reflect.ValueOf(&s))
		return
	}
	v.SetString(s)
}

// newElem makes a zero element of a kmsg slice with its defaults.
func newElem(t reflect.Type) reflect.Value {
	e := reflect.New(t)
	if d, ok := e.Interface().(interface{ Default() }); ok {
		d.Default()
	}
	return e.Elem()
}

// answerWhole answers the request with code in every top-level ErrorCode
// it has, without running its handler.
func answerWhole(r *Request, code int16) bool {
	resp := r.Msg.ResponseKind()
	if f := field(reflect.ValueOf(resp), "ErrorCode"); f.IsValid() {
		f.SetInt(int64(code))
	}
	r.Respond(resp)
	return false
}

// wholeCluster requires op on the cluster, else CLUSTER_AUTHORIZATION_FAILED.
func wholeCluster(op acl.Operation) authzRule {
	return func(r *Request) bool {
		return r.allowedCluster(op) || answerWhole(r, kerr.ClusterAuthorizationFailed.Code)
	}
}

// wholeGroup requires op on the group named by the request's field.
func wholeGroup(op acl.Operation, name string, code int16) authzRule {
	return func(r *Request) bool {
		g := str(field(reflect.ValueOf(r.Msg), name))
		if r.allowed(op, acl.ResourceGroup, g) {
			return true
		}
		if r.Key == kmsg.OffsetCommit.Int16() || r.Key == kmsg.TxnOffsetCommit.Int16() {
			return answerTopicsWith(r, code) // these answer per partition only
		}
		return answerWhole(r, code)
	}
}

// wholeTxn requires WRITE on the transactional id of the request.
func wholeTxn(name string) authzRule {
	return func(r *Request) bool {
		id := str(field(reflect.ValueOf(r.Msg), name))
		if r.allowed(acl.OpWrite, acl.ResourceTransactionalID, id) {
			return true
		}
		if r.Key == kmsg.TxnOffsetCommit.Int16() {
			return answerTopicsWith(r, kerr.TransactionalIDAuthorizationFailed.Code)
		}
		return answerWhole(r, kerr.TransactionalIDAuthorizationFailed.Code)
	}
}

// wholeTopicNames requires op on every topic a []string field names,
// else TOPIC_AUTHORIZATION_FAILED for the request.
func wholeTopicNames(name string, op acl.Operation) authzRule {
	return func(r *Request) bool {
		list := field(reflect.ValueOf(r.Msg), name)
		for i := 0; list.IsValid() && i < list.Len(); i++ {
			if !r.allowed(op, acl.ResourceTopic, list.Index(i).String()) {
				return answerWhole(r, kerr.TopicAuthorizationFailed.Code)
			}
		}
		return true
	}
}

// filterTopicIDs takes the topics (named by id) the principal may not op
// out of the request's Topics and answers their partitions
// TOPIC_AUTHORIZATION_FAILED after the handler. An id the image does not
// know stays, for the handler to answer.
func filterTopicIDs(op acl.Operation) authzRule {
	return func(r *Request) bool {
		img := r.broker.image()
		topics := field(reflect.ValueOf(r.Msg), "Topics")
		denied := r.filterList(topics, func(t reflect.Value) (bool, deniedTopic) {
			d := deniedTopicOf(t, "Partitions")
			ti := img.TopicByID(d.id)
			return ti == nil || r.allowed(op, acl.ResourceTopic, ti.Name), d
		})
		if len(denied) > 0 {
			r.addPost(func(resp kmsg.Response) { appendDenied(resp, denied, "Partitions", kerr.TopicAuthorizationFailed.Code) })
		}
		return true
	}
}

// answerTopicsWith answers every partition of the request's Topics with
// code, without running the handler.
func answerTopicsWith(r *Request, code int16) bool {
	resp := r.Msg.ResponseKind()
	topics := field(reflect.ValueOf(r.Msg), "Topics")
	denied := make([]deniedTopic, 0, topics.Len())
	for i := 0; i < topics.Len(); i++ {
		denied = append(denied, deniedTopicOf(topics.Index(i), "Partitions"))
	}
	appendDenied(resp, denied, "Partitions", code)
	r.Respond(resp)
	return false
}

// deniedTopic is a topic taken out of a request.
type deniedTopic struct {
	name       string
	id         [16]byte
	partitions []int32
}

func deniedTopicOf(t reflect.Value, partsField string) deniedTopic {
	d := deniedTopic{name: str(field(t, "Topic"))}
	if id := field(t, "TopicID"); id.IsValid() {
		reflect.ValueOf(&d.id).Elem().Set(id)
	}
	if partsField == "" {
		return d
	}
	ps := field(t, partsField)
	for j := 0; ps.IsValid() && j < ps.Len(); j++ {
		p := ps.Index(j)
		if p.Kind() == reflect.Int32 {
			d.partitions = append(d.partitions, int32(p.Int()))
		} else {
			d.partitions = append(d.partitions, int32(field(p, "Partition").Int()))
		}
	}
	return d
}

// appendDenied adds the denied topics to the response's Topics: with
// code on each partition, or on the topic when partsField is "".
func appendDenied(resp kmsg.Response, denied []deniedTopic, partsField string, code int16) {
	topics := field(reflect.ValueOf(resp), "Topics")
	for _, d := range denied {
		t := newElem(topics.Type().Elem())
		if name := field(t.Addr(), "Topic"); name.IsValid() { // ShareFetch's topics have ids alone
			setStr(name, d.name)
		}
		if id := field(t.Addr(), "TopicID"); id.IsValid() {
			id.Set(reflect.ValueOf(d.id))
		}
		if partsField == "" {
			field(t.Addr(), "ErrorCode").SetInt(int64(code))
		} else {
			ps := field(t.Addr(), partsField)
			for _, p := range d.partitions {
				e := newElem(ps.Type().Elem())
				field(e.Addr(), "Partition").SetInt(int64(p))
				field(e.Addr(), "ErrorCode").SetInt(int64(code))
				ps.Set(reflect.Append(ps, e))
			}
		}
		topics.Set(reflect.Append(topics, t))
	}
}

// filterTopics takes the topics the principal may not op out of the
// request's Topics and answers them with code (per partition, or per
// topic when partsField is "").
func filterTopics(op acl.Operation, partsField string, code int16) authzRule {
	return func(r *Request) bool {
		topics := field(reflect.ValueOf(r.Msg), "Topics")
		denied := r.filterList(topics, func(t reflect.Value) (bool, deniedTopic) {
			d := deniedTopicOf(t, partsField)
			return r.allowed(op, acl.ResourceTopic, d.name), d
		})
		if len(denied) > 0 {
			r.addPost(func(resp kmsg.Response) { appendDenied(resp, denied, partsField, code) })
		}
		return true
	}
}

// filterList compacts list (a slice Value) to the elements keep allows
// and returns what it took out.
func (r *Request) filterList(list reflect.Value, keep func(reflect.Value) (bool, deniedTopic)) []deniedTopic {
	var denied []deniedTopic
	n := 0
	for i := 0; i < list.Len(); i++ {
		ok, d := keep(list.Index(i))
		if !ok {
			denied = append(denied, d)
			continue
		}
		if n != i {
			list.Index(n).Set(list.Index(i))
		}
		n++
	}
	if list.Len() != n {
		list.Set(list.Slice(0, n))
	}
	return denied
}

// postTopics: a read of topics; after the handler, each topic the
// principal may not op has its partitions replaced by code alone.
func postTopics(op acl.Operation, partsField string) authzRule {
	return func(r *Request) bool {
		r.addPost(func(resp kmsg.Response) {
			topics := field(reflect.ValueOf(resp), "Topics")
			for i := 0; i < topics.Len(); i++ {
				t := topics.Index(i)
				if r.allowed(op, acl.ResourceTopic, str(t.FieldByName("Topic"))) {
					continue
				}
				d := deniedTopicOf(t, partsField)
				fresh := reflect.New(t.Type()).Elem()
				fresh.FieldByName("Topic").Set(t.FieldByName("Topic"))
				ps := fresh.FieldByName(partsField)
				for _, p := range d.partitions {
					e := newElem(ps.Type().Elem())
					e.FieldByName("Partition").SetInt(int64(p))
					e.FieldByName("ErrorCode").SetInt(int64(kerr.TopicAuthorizationFailed.Code))
					ps.Set(reflect.Append(ps, e))
				}
				t.Set(fresh)
			}
		})
		return true
	}
}

// postResources: a describe of named resources; after the handler, each
// element of list the principal may not op becomes its name and code.
func postResources(rt acl.ResourceType, op acl.Operation, list, name string, code int16) authzRule {
	return func(r *Request) bool {
		r.addPost(func(resp kmsg.Response) {
			l := field(reflect.ValueOf(resp), list)
			for i := 0; i < l.Len(); i++ {
				e := l.Index(i)
				if r.allowed(op, rt, str(e.FieldByName(name))) {
					continue
				}
				fresh := newElem(e.Type())
				fresh.FieldByName(name).Set(e.FieldByName(name))
				fresh.FieldByName("ErrorCode").SetInt(int64(code))
				e.Set(fresh)
			}
		})
		return true
	}
}

func postGroups(op acl.Operation) authzRule {
	return postResources(acl.ResourceGroup, op, "Groups", "Group", kerr.GroupAuthorizationFailed.Code)
}

// filterGroups takes the groups the principal may not op out of the
// request's Groups (a []string) and answers them with
// GROUP_AUTHORIZATION_FAILED.
func filterGroups(op acl.Operation) authzRule {
	return func(r *Request) bool {
		req := r.Msg.(*kmsg.DeleteGroupsRequest)
		var denied []string
		kept := req.Groups[:0]
		for _, g := range req.Groups {
			if r.allowed(op, acl.ResourceGroup, g) {
				kept = append(kept, g)
			} else {
				denied = append(denied, g)
			}
		}
		req.Groups = kept
		if len(denied) > 0 {
			r.addPost(func(resp kmsg.Response) {
				out := resp.(*kmsg.DeleteGroupsResponse)
				for _, g := range denied {
					out.Groups = append(out.Groups, kmsg.DeleteGroupsResponseGroup{Group: g, ErrorCode: kerr.GroupAuthorizationFailed.Code})
				}
			})
		}
		return true
	}
}

// configResource maps a config resource to the ACL resource it needs and
// the code a denial answers: topics themselves, brokers the cluster,
// groups themselves.
func configResource(typ kmsg.ConfigResourceType, name string) (acl.ResourceType, string, int16) {
	switch typ {
	case kmsg.ConfigResourceTypeTopic:
		return acl.ResourceTopic, name, kerr.TopicAuthorizationFailed.Code
	case kmsg.ConfigResourceTypeGroupConfig:
		return acl.ResourceGroup, name, kerr.GroupAuthorizationFailed.Code
	}
	return acl.ResourceCluster, acl.ClusterName, kerr.ClusterAuthorizationFailed.Code
}

// filterConfigs takes the resources whose configs the principal may not
// alter out of Resources and answers them with the resource's code.
func filterConfigs(op acl.Operation) authzRule {
	return func(r *Request) bool {
		res := field(reflect.ValueOf(r.Msg), "Resources")
		type deniedRes struct {
			typ  int64
			name string
			code int16
		}
		var denied []deniedRes
		r.filterList(res, func(e reflect.Value) (bool, deniedTopic) {
			typ, name := kmsg.ConfigResourceType(e.FieldByName("ResourceType").Int()), e.FieldByName("ResourceName").String()
			rt, rn, code := configResource(typ, name)
			ok := r.allowed(op, rt, rn)
			if !ok {
				denied = append(denied, deniedRes{int64(typ), name, code})
			}
			return ok, deniedTopic{}
		})
		if len(denied) > 0 {
			r.addPost(func(resp kmsg.Response) {
				out := field(reflect.ValueOf(resp), "Resources")
				for _, d := range denied {
					e := newElem(out.Type().Elem())
					e.FieldByName("ResourceType").SetInt(d.typ)
					e.FieldByName("ResourceName").SetString(d.name)
					e.FieldByName("ErrorCode").SetInt(int64(d.code))
					out.Set(reflect.Append(out, e))
				}
			})
		}
		return true
	}
}

// postConfigs: DescribeConfigs answers a resource the principal may not
// describe the configs of with its code and no configs.
func postConfigs(op acl.Operation) authzRule {
	return func(r *Request) bool {
		r.addPost(func(resp kmsg.Response) {
			out := resp.(*kmsg.DescribeConfigsResponse)
			for i := range out.Resources {
				e := &out.Resources[i]
				rt, rn, code := configResource(e.ResourceType, e.ResourceName)
				if !r.allowed(op, rt, rn) {
					*e = kmsg.DescribeConfigsResponseResource{ErrorCode: code, ResourceType: e.ResourceType, ResourceName: e.ResourceName}
				}
			}
		})
		return true
	}
}
