package engine

// ShareAcknowledge (key 79), versions 1-2.
//
// Acknowledges records of a share session without fetching: the same
// rules as ShareFetch's acknowledgements (share_sessions.go for the
// epochs; epoch 0 is INVALID_SHARE_SESSION_EPOCH here, since an
// acknowledgement needs an open session). Each partition answers with the
// first error of its batches: INVALID_RECORD_STATE for records not
// acquired by this member (or whose lock expired), INVALID_REQUEST for a
// malformed batch. Epoch -1 closes the session after applying them,
// releasing the rest. RENEW (v2) is honoured unless the group sets
// share.renew.acknowledge.enable=false.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.ShareAcknowledge, 1, 2, (*Broker).handleShareAcknowledge) }

func (b *Broker) handleShareAcknowledge(r *Request) {
	req := r.Msg.(*kmsg.ShareAcknowledgeRequest)
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	switch {
	case req.GroupID == nil || *req.GroupID == "" || req.MemberID == nil || *req.MemberID == "":
		resp.ErrorCode = kerr.InvalidRequest.Code
	case req.ShareSessionEpoch == 0:
		resp.ErrorCode = kerr.InvalidShareSessionEpoch.Code
	}
	if resp.ErrorCode != 0 {
		r.Respond(resp)
		return
	}
	group, member := *req.GroupID, *req.MemberID
	resp.AcquisitionLockTimeoutMillis = int32(b.sharePartitionConfig(group).LockDuration.Milliseconds())
	tps, code := b.share.session(connID(r), group, member, req.ShareSessionEpoch, nil, nil)
	if code != 0 {
		resp.ErrorCode = code
		r.Respond(resp)
		return
	}
	renew := b.shareRenewEnabled(group)
	for _, t := range req.Topics {
		rt := kmsg.ShareAcknowledgeResponseTopic{TopicID: t.TopicID}
		for _, p := range t.Partitions {
			batches := make([]ackBatch, len(p.AcknowledgementBatches))
			for i, ab := range p.AcknowledgementBatches {
				batches[i] = ackBatch{ab.FirstOffset, ab.LastOffset, ab.AcknowledgeTypes}
			}
			rp := kmsg.NewShareAcknowledgeResponseTopicPartition()
			rp.Partition = p.Partition
			rp.CurrentLeader.LeaderID, rp.CurrentLeader.LeaderEpoch = -1, -1
			rp.ErrorCode = b.shareAcknowledge(group, member, shareTP{t.TopicID, p.Partition}, batches, renew)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if req.ShareSessionEpoch == -1 {
		b.share.releaseSession(group, member, tps)
	}
	r.Respond(resp)
}
