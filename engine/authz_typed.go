package engine

// The rows of the authorization table that need more than a shape-generic
// filter (authz_apis.go).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/security/acl"
)

// authorizeProduce: WRITE on the transactional id of a transactional
// produce (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED on every
// partition), WRITE on each topic (else TOPIC_AUTHORIZATION_FAILED on its
// partitions). Kafka 4 checks IDEMPOTENT_WRITE at InitProducerId, not
// here. A denied acks=0 produce closes the connection, as any failed
// acks=0 produce does. The all-allowed path allocates nothing.
func authorizeProduce(r *Request) bool {
	req := r.Msg.(*kmsg.ProduceRequest)
	if req.TransactionID != nil && !r.allowed(acl.OpWrite, acl.ResourceTransactionalID, *req.TransactionID) {
		if req.Acks == 0 {
			r.closeConn()
			return false
		}
		return answerTopicsWith(r, kerr.TransactionalIDAuthorizationFailed.Code)
	}
	for i := range req.Topics {
		if !r.allowed(acl.OpWrite, acl.ResourceTopic, req.Topics[i].Topic) {
			if req.Acks == 0 {
				r.closeConn()
				return false
			}
			return filterTopics(acl.OpWrite, "Partitions", kerr.TopicAuthorizationFailed.Code)(r)
		}
	}
	return true
}

// authorizeMetadata: DESCRIBE on each topic. A listing of all topics
// leaves out the others; a named topic the principal may not describe
// answers TOPIC_AUTHORIZATION_FAILED, as does one this request would
// auto-create without CREATE on the cluster or the topic.
func authorizeMetadata(r *Request) bool {
	req := r.Msg.(*kmsg.MetadataRequest)
	b := r.broker
	if req.Topics == nil || r.Version == 0 && len(req.Topics) == 0 {
		// Every topic the principal may describe. The handler would
		// answer from the broker-wide cache of encoded full answers
		// (metadata_cache.go), which holds every topic: answer here.
		r.addPost(func(resp kmsg.Response) {
			out := resp.(*kmsg.MetadataResponse)
			kept := out.Topics[:0]
			for _, t := range out.Topics {
				if t.Topic != nil && r.allowed(acl.OpDescribe, acl.ResourceTopic, *t.Topic) {
					kept = append(kept, t)
				}
			}
			out.Topics = kept
		})
		if req.IncludeClusterAuthorizedOperations || req.IncludeTopicAuthorizedOperations {
			r.addPost(func(resp kmsg.Response) { authorizedOps(r, req, resp.(*kmsg.MetadataResponse)) })
		}
		r.Respond(b.fullMetadata(req, r.Version, r.listener()))
		return false
	} else {
		autoCreate := b.cfg.AutoCreateTopics && (r.Version < 4 || req.AllowAutoTopicCreation)
		img := b.image()
		var denied []kmsg.MetadataResponseTopic
		kept := req.Topics[:0]
		for _, rt := range req.Topics {
			name := ""
			if rt.Topic != nil {
				name = *rt.Topic
			} else if ti := img.TopicByID(rt.TopicID); ti != nil {
				name = ti.Name
			} else {
				kept = append(kept, rt) // unknown id: UNKNOWN_TOPIC_ID from the handler
				continue
			}
			ok := r.allowed(acl.OpDescribe, acl.ResourceTopic, name)
			if ok && autoCreate && img.Topic(name) == nil {
				ok = r.allowedCluster(acl.OpCreate) || r.allowed(acl.OpCreate, acl.ResourceTopic, name)
			}
			if ok {
				kept = append(kept, rt)
				continue
			}
			t := kmsg.NewMetadataResponseTopic()
			t.Topic, t.TopicID, t.ErrorCode, t.IsInternal = kmsg.StringPtr(name), rt.TopicID, kerr.TopicAuthorizationFailed.Code, internalTopicNames[name]
			denied = append(denied, t)
		}
		req.Topics = kept
		if len(denied) > 0 {
			r.addPost(func(resp kmsg.Response) {
				out := resp.(*kmsg.MetadataResponse)
				out.Topics = append(out.Topics, denied...)
			})
		}
	}
	if req.IncludeClusterAuthorizedOperations || req.IncludeTopicAuthorizedOperations {
		r.addPost(func(resp kmsg.Response) { authorizedOps(r, req, resp.(*kmsg.MetadataResponse)) })
	}
	return true
}

// authorizedOps fills in the authorized-operation bitfields (v8+) with
// what the principal may do, instead of every operation.
func authorizedOps(r *Request, req *kmsg.MetadataRequest, out *kmsg.MetadataResponse) {
	if req.IncludeClusterAuthorizedOperations {
		out.AuthorizedOperations = opsBits(r, acl.ResourceCluster, acl.ClusterName, clusterAuthorizedOps)
	}
	if !req.IncludeTopicAuthorizedOperations {
		return
	}
	for i := range out.Topics {
		if t := &out.Topics[i]; t.Topic != nil && t.ErrorCode != kerr.TopicAuthorizationFailed.Code {
			t.AuthorizedOperations = opsBits(r, acl.ResourceTopic, *t.Topic, topicAuthorizedOps)
		}
	}
}

// opsBits keeps the bits of supported that the principal may perform.
func opsBits(r *Request, rt acl.ResourceType, name string, supported int32) int32 {
	var out int32
	for op := acl.OpRead; op <= acl.OpDescribeTokens; op++ {
		if supported&(1<<op) != 0 && r.allowed(op, rt, name) {
			out |= 1 << op
		}
	}
	return out
}

// authorizeOffsetFetch: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED)
// and on each topic: a named one answers TOPIC_AUTHORIZATION_FAILED, a
// listing of all the group's topics leaves it out.
func authorizeOffsetFetch(r *Request) bool {
	req := r.Msg.(*kmsg.OffsetFetchRequest)
	if r.Version < 8 {
		if !r.allowed(acl.OpDescribe, acl.ResourceGroup, req.Group) {
			if r.Version < 2 {
				return answerTopicsWith(r, kerr.GroupAuthorizationFailed.Code)
			}
			return answerWhole(r, kerr.GroupAuthorizationFailed.Code)
		}
		all := req.Topics == nil
		r.addPost(func(resp kmsg.Response) {
			out := resp.(*kmsg.OffsetFetchResponse)
			out.Topics = offsetTopicsSeen(r, out.Topics, all)
		})
		return true
	}
	var denied []string
	kept := req.Groups[:0]
	all := map[string]bool{}
	for _, g := range req.Groups {
		if r.allowed(acl.OpDescribe, acl.ResourceGroup, g.Group) {
			kept = append(kept, g)
			all[g.Group] = g.Topics == nil
		} else {
			denied = append(denied, g.Group)
		}
	}
	req.Groups = kept
	r.addPost(func(resp kmsg.Response) {
		out := resp.(*kmsg.OffsetFetchResponse)
		for i := range out.Groups {
			g := &out.Groups[i]
			topics := make([]kmsg.OffsetFetchResponseTopic, 0, len(g.Topics))
			for _, t := range g.Topics {
				topics = append(topics, kmsg.OffsetFetchResponseTopic{Topic: t.Topic, Partitions: groupPartitions(t.Partitions)})
			}
			topics = offsetTopicsSeen(r, topics, all[g.Group])
			g.Topics = g.Topics[:0]
			for _, t := range topics {
				gt := kmsg.OffsetFetchResponseGroupTopic{Topic: t.Topic}
				for _, p := range t.Partitions {
					gp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					gp.Partition, gp.Offset, gp.LeaderEpoch, gp.Metadata, gp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
					gt.Partitions = append(gt.Partitions, gp)
				}
				g.Topics = append(g.Topics, gt)
			}
		}
		for _, name := range denied {
			g := kmsg.NewOffsetFetchResponseGroup()
			g.Group, g.ErrorCode = name, kerr.GroupAuthorizationFailed.Code
			out.Groups = append(out.Groups, g)
		}
	})
	return true
}

func groupPartitions(ps []kmsg.OffsetFetchResponseGroupTopicPartition) []kmsg.OffsetFetchResponseTopicPartition {
	out := make([]kmsg.OffsetFetchResponseTopicPartition, 0, len(ps))
	for _, p := range ps {
		out = append(out, kmsg.OffsetFetchResponseTopicPartition{Partition: p.Partition, Offset: p.Offset,
			LeaderEpoch: p.LeaderEpoch, Metadata: p.Metadata, ErrorCode: p.ErrorCode})
	}
	return out
}

// offsetTopicsSeen drops (listing) or errors (named) the topics the
// principal may not describe.
func offsetTopicsSeen(r *Request, topics []kmsg.OffsetFetchResponseTopic, listing bool) []kmsg.OffsetFetchResponseTopic {
	kept := topics[:0]
	for _, t := range topics {
		if r.allowed(acl.OpDescribe, acl.ResourceTopic, t.Topic) {
			kept = append(kept, t)
			continue
		}
		if listing {
			continue
		}
		for i := range t.Partitions {
			p := kmsg.NewOffsetFetchResponseTopicPartition()
			p.Partition, p.ErrorCode = t.Partitions[i].Partition, kerr.TopicAuthorizationFailed.Code
			t.Partitions[i] = p
		}
		kept = append(kept, t)
	}
	return kept
}

// authorizeFindCoordinator: DESCRIBE on the group or transactional id
// whose coordinator is asked for.
func authorizeFindCoordinator(r *Request) bool {
	req := r.Msg.(*kmsg.FindCoordinatorRequest)
	rt, code := acl.ResourceGroup, kerr.GroupAuthorizationFailed.Code
	if req.CoordinatorType == 1 {
		rt, code = acl.ResourceTransactionalID, kerr.TransactionalIDAuthorizationFailed.Code
	}
	if r.Version < 4 {
		if r.allowed(acl.OpDescribe, rt, req.CoordinatorKey) {
			return true
		}
		return answerWhole(r, code)
	}
	r.addPost(func(resp kmsg.Response) {
		out := resp.(*kmsg.FindCoordinatorResponse)
		for i := range out.Coordinators {
			c := &out.Coordinators[i]
			if !r.allowed(acl.OpDescribe, rt, c.Key) {
				*c = kmsg.FindCoordinatorResponseCoordinator{Key: c.Key, NodeID: -1, Port: -1, ErrorCode: code}
			}
		}
	})
	return true
}

// authorizeListGroups: all groups with DESCRIBE on the cluster, else the
// groups the principal may describe.
func authorizeListGroups(r *Request) bool {
	if r.allowedCluster(acl.OpDescribe) {
		return true
	}
	r.addPost(func(resp kmsg.Response) {
		out := resp.(*kmsg.ListGroupsResponse)
		kept := out.Groups[:0]
		for _, g := range out.Groups {
			if r.allowed(acl.OpDescribe, acl.ResourceGroup, g.Group) {
				kept = append(kept, g)
			}
		}
		out.Groups = kept
	})
	return true
}

// authorizeCreateTopics: CREATE on the cluster or the topic; the configs
// of a created topic are answered only with DESCRIBE_CONFIGS on it.
func authorizeCreateTopics(r *Request) bool {
	req := r.Msg.(*kmsg.CreateTopicsRequest)
	clusterCreate := r.allowedCluster(acl.OpCreate)
	var denied []string
	kept := req.Topics[:0]
	for _, t := range req.Topics {
		if clusterCreate || r.allowed(acl.OpCreate, acl.ResourceTopic, t.Topic) {
			kept = append(kept, t)
		} else {
			denied = append(denied, t.Topic)
		}
	}
	req.Topics = kept
	r.addPost(func(resp kmsg.Response) {
		out := resp.(*kmsg.CreateTopicsResponse)
		for i := range out.Topics {
			t := &out.Topics[i]
			if t.ErrorCode == 0 && !r.allowed(acl.OpDescribeConfigs, acl.ResourceTopic, t.Topic) {
				t.ConfigErrorCode, t.Configs = kerr.TopicAuthorizationFailed.Code, nil
			}
		}
		for _, name := range denied {
			t := kmsg.NewCreateTopicsResponseTopic()
			t.Topic, t.ErrorCode = name, kerr.TopicAuthorizationFailed.Code
			out.Topics = append(out.Topics, t)
		}
	})
	return true
}

// authorizeDeleteTopics: DELETE on each topic, named or by id.
func authorizeDeleteTopics(r *Request) bool {
	req := r.Msg.(*kmsg.DeleteTopicsRequest)
	var denied []kmsg.DeleteTopicsResponseTopic
	deny := func(name string, id [16]byte) {
		t := kmsg.NewDeleteTopicsResponseTopic()
		t.Topic, t.TopicID, t.ErrorCode = kmsg.StringPtr(name), id, kerr.TopicAuthorizationFailed.Code
		denied = append(denied, t)
	}
	names := req.TopicNames[:0]
	for _, n := range req.TopicNames {
		if r.allowed(acl.OpDelete, acl.ResourceTopic, n) {
			names = append(names, n)
		} else {
			deny(n, [16]byte{})
		}
	}
	req.TopicNames = names
	img := r.broker.image()
	topics := req.Topics[:0]
	for _, t := range req.Topics {
		name := ""
		if t.Topic != nil {
			name = *t.Topic
		} else if ti := img.TopicByID(t.TopicID); ti != nil {
			name = ti.Name
		}
		if name == "" || r.allowed(acl.OpDelete, acl.ResourceTopic, name) {
			topics = append(topics, t)
		} else {
			deny(name, t.TopicID)
		}
	}
	req.Topics = topics
	if len(denied) > 0 {
		r.addPost(func(resp kmsg.Response) {
			out := resp.(*kmsg.DeleteTopicsResponse)
			out.Topics = append(out.Topics, denied...)
		})
	}
	return true
}

// authorizeInitProducerID: WRITE on the transactional id; an idempotent
// producer needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic
// (KIP-679).
func authorizeInitProducerID(r *Request) bool {
	req := r.Msg.(*kmsg.InitProducerIDRequest)
	if req.TransactionalID != nil {
		if r.allowed(acl.OpWrite, acl.ResourceTransactionalID, *req.TransactionalID) {
			return true
		}
		return answerWhole(r, kerr.TransactionalIDAuthorizationFailed.Code)
	}
	if r.allowedCluster(acl.OpIdempotentWrite) {
		return true
	}
	for t := range r.broker.image().AllTopics() {
		if r.allowed(acl.OpWrite, acl.ResourceTopic, t.Name) {
			return true
		}
	}
	return answerWhole(r, kerr.ClusterAuthorizationFailed.Code)
}

// authorizeOffsetForLeaderEpoch: CLUSTER_ACTION for a follower, DESCRIBE
// on each topic for a consumer.
func authorizeOffsetForLeaderEpoch(r *Request) bool {
	req := r.Msg.(*kmsg.OffsetForLeaderEpochRequest)
	if r.Version >= 3 && req.ReplicaID >= 0 {
		if r.allowedCluster(acl.OpClusterAction) {
			return true
		}
		return answerTopicsWith(r, kerr.ClusterAuthorizationFailed.Code)
	}
	return postTopics(acl.OpDescribe, "Partitions")(r)
}

// authorizeAddPartitionsToTxn: a client's request (v0-3) needs WRITE on
// the transactional id and on each topic; the brokers' batched form (v4+)
// CLUSTER_ACTION.
func authorizeAddPartitionsToTxn(r *Request) bool {
	if r.Version >= 4 {
		return wholeCluster(acl.OpClusterAction)(r)
	}
	return all(wholeTxnTopics, filterTopics(acl.OpWrite, "Partitions", kerr.TopicAuthorizationFailed.Code))(r)
}

func wholeTxnTopics(r *Request) bool {
	req := r.Msg.(*kmsg.AddPartitionsToTxnRequest)
	if r.allowed(acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID) {
		return true
	}
	return answerTopicsWith(r, kerr.TransactionalIDAuthorizationFailed.Code)
}

// authorizeListTransactions lists the transactional ids the principal may
// describe.
func authorizeListTransactions(r *Request) bool {
	r.addPost(func(resp kmsg.Response) {
		out := resp.(*kmsg.ListTransactionsResponse)
		kept := out.TransactionStates[:0]
		for _, s := range out.TransactionStates {
			if r.allowed(acl.OpDescribe, acl.ResourceTransactionalID, s.TransactionalID) {
				kept = append(kept, s)
			}
		}
		out.TransactionStates = kept
	})
	return true
}

// authorizeAlterScram: ALTER on the cluster, else every user of the
// request answers CLUSTER_AUTHORIZATION_FAILED.
func authorizeAlterScram(r *Request) bool {
	if r.allowedCluster(acl.OpAlter) {
		return true
	}
	req := r.Msg.(*kmsg.AlterUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	seen := map[string]bool{}
	add := func(user string) {
		if !seen[user] {
			seen[user] = true
			resp.Results = append(resp.Results, kmsg.AlterUserSCRAMCredentialsResponseResult{User: user, ErrorCode: kerr.ClusterAuthorizationFailed.Code})
		}
	}
	for _, d := range req.Deletions {
		add(d.Name)
	}
	for _, u := range req.Upsertions {
		add(u.Name)
	}
	r.Respond(resp)
	return false
}

// postClusterOps reports the cluster operations the principal may
// perform, when DescribeCluster asks for them.
func postClusterOps(r *Request) bool {
	if req := r.Msg.(*kmsg.DescribeClusterRequest); req.IncludeClusterAuthorizedOperations {
		r.addPost(func(resp kmsg.Response) {
			out := resp.(*kmsg.DescribeClusterResponse)
			out.ClusterAuthorizedOperations = opsBits(r, acl.ResourceCluster, acl.ClusterName, clusterAuthorizedOps)
		})
	}
	return true
}

// postGroupOps reports the group operations the principal may perform,
// when DescribeGroups asks for them.
func postGroupOps(r *Request) bool {
	if req := r.Msg.(*kmsg.DescribeGroupsRequest); req.IncludeAuthorizedOperations {
		r.addPost(func(resp kmsg.Response) {
			out := resp.(*kmsg.DescribeGroupsResponse)
			for i := range out.Groups {
				if g := &out.Groups[i]; g.ErrorCode == 0 {
					g.AuthorizedOperations = opsBits(r, acl.ResourceGroup, g.Group, groupOperations)
				}
			}
		})
	}
	return true
}
