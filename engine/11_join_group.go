package engine

// JoinGroup (key 11), versions 0-9.
//
// A member joins (or rejoins) a classic group; the response waits until the
// join phase ends and is sent from whatever completes it (the last member's
// join, a leave, or a timer), never by blocking this goroutine.
//
//   - v4+: a member without an id gets MEMBER_ID_REQUIRED and its new id,
//     and must join again with it within its session timeout (KIP-394).
//     Static members (group.instance.id, v5+) skip this step.
//   - A static member joining without a member id replaces its previous
//     incarnation, whose parked requests get FENCED_INSTANCE_ID. In a Stable
//     group whose selected protocol would not change, it gets the current
//     generation back without a rebalance (KIP-345).
//   - The protocol is chosen by vote among those every member supports.
//   - An Empty group's first join phase lasts group.initial.rebalance.delay.ms,
//     extended while new members keep arriving, up to the rebalance timeout.
//   - v0 has no rebalance timeout: the session timeout stands in (as in Kafka).
//   - v7+ carries ProtocolType; v9 SkipAssignment is always false (it only
//     matters to KIP-848 server-side assignors, which Sluice does not run).
//
// Errors: INVALID_GROUP_ID, INVALID_SESSION_TIMEOUT (outside
// group.{min,max}.session.timeout.ms), INCONSISTENT_GROUP_PROTOCOL,
// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID, GROUP_MAX_SIZE_REACHED.

import (
	"bytes"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine/group"
)

func init() { register(kmsg.JoinGroup, 0, 9, (*Broker).handleJoinGroup) }

func (b *Broker) handleJoinGroup(r *Request) {
	req := r.Msg.(*kmsg.JoinGroupRequest)
	if b.isShareGroup(req.Group) { // a share group's id, as Kafka answers it
		r.Respond(joinResponse(req, group.JoinResult{ErrorCode: kerr.InconsistentGroupProtocol.Code}))
		return
	}
	b.groups.Join(joinRequest(r, req), func(res group.JoinResult) { r.Respond(joinResponse(req, res)) })
}

// joinRequest translates a JoinGroup, with the protocol metadata copied
// out of the request frame (which is reused once the request is answered).
func joinRequest(r *Request, req *kmsg.JoinGroupRequest) *group.JoinRequest {
	j := &group.JoinRequest{
		Group:            req.Group,
		MemberID:         req.MemberID,
		ClientID:         r.ClientID,
		ClientHost:       clientHost(r),
		SessionTimeout:   msDuration(req.SessionTimeoutMillis),
		RebalanceTimeout: msDuration(req.RebalanceTimeoutMillis),
		ProtocolType:     req.ProtocolType,
		Protocols:        make([]group.Protocol, len(req.Protocols)),
		RequireMemberID:  r.Version >= 4,
	}
	if r.Version == 0 || req.RebalanceTimeoutMillis < 0 {
		j.RebalanceTimeout = j.SessionTimeout
	}
	if req.InstanceID != nil {
		j.InstanceID = *req.InstanceID
	}
	for i, p := range req.Protocols {
		j.Protocols[i] = group.Protocol{Name: p.Name, Metadata: bytes.Clone(p.Metadata)}
	}
	return j
}

func joinResponse(req *kmsg.JoinGroupRequest, res group.JoinResult) *kmsg.JoinGroupResponse {
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.MemberID = res.MemberID
	if res.ErrorCode != 0 {
		resp.ErrorCode = res.ErrorCode
		return resp
	}
	resp.Generation = res.Generation
	resp.ProtocolType = kmsg.StringPtr(res.ProtocolType)
	resp.Protocol = kmsg.StringPtr(res.Protocol)
	resp.LeaderID = res.Leader
	for _, m := range res.Members {
		rm := kmsg.JoinGroupResponseMember{MemberID: m.MemberID, ProtocolMetadata: m.Metadata}
		if m.InstanceID != "" {
			rm.InstanceID = kmsg.StringPtr(m.InstanceID)
		}
		resp.Members = append(resp.Members, rm)
	}
	return resp
}
