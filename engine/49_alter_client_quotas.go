package engine

// AlterClientQuotas (key 49), versions 0-1.
//
// Needs ALTER_CONFIGS on the cluster (else every entry answers
// CLUSTER_AUTHORIZATION_FAILED). Each entry names an entity (user,
// client-id, both, or ip; a null name is the type's default) and sets or
// removes quota keys: producer_byte_rate, consumer_byte_rate (whole
// bytes/s), request_percentage, controller_mutation_rate for users and
// client ids, connection_creation_rate for ips (kept, not yet enforced
// per ip: max.connection.creation.rate is broker-wide). A bad entry
// answers INVALID_REQUEST with the reason and changes nothing; the
// others still apply. ValidateOnly checks only. The change is one
// ClientQuotaRecord per key (controller.AlterClientQuotas decides, on the
// active controller in a cluster); the answer waits for this broker's
// image.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/controller"
	"github.com/sluice-broker/sluice/metadata"
	"github.com/sluice-broker/sluice/security/acl"
)

func init() { register(kmsg.AlterClientQuotas, 0, 1, (*Broker).handleAlterClientQuotas) }

func (b *Broker) handleAlterClientQuotas(r *Request) {
	req := r.Msg.(*kmsg.AlterClientQuotasRequest)
	failed := func(resp kmsg.Response, code int16) {
		out := resp.(*kmsg.AlterClientQuotasResponse)
		for i := range out.Entries {
			if out.Entries[i].ErrorCode == 0 {
				out.Entries[i].ErrorCode = code
			}
		}
	}
	if !r.allowedCluster(acl.OpAlterConfigs) {
		_, resp := controller.AlterClientQuotas(metadata.Image{}, req)
		failed(resp, kerr.ClusterAuthorizationFailed.Code)
		r.Respond(resp)
		return
	}
	decide := func(img metadata.Image) ([]metadata.Record, kmsg.Response) {
		return controller.AlterClientQuotas(img, req)
	}
	r.Respond(b.adminChange(req, decide, func(resp kmsg.Response, img metadata.Image) bool {
		return req.ValidateOnly || quotasApplied(req, resp.(*kmsg.AlterClientQuotasResponse), img)
	}, failed))
}

// quotasApplied reports whether img shows every op of the entries the
// controller accepted.
func quotasApplied(req *kmsg.AlterClientQuotasRequest, resp *kmsg.AlterClientQuotasResponse, img metadata.Image) bool {
	for i, en := range req.Entries {
		if i >= len(resp.Entries) || resp.Entries[i].ErrorCode != 0 {
			continue
		}
		e, err := controller.QuotaEntity(en.Entity)
		if err != nil {
			continue
		}
		for _, op := range en.Ops {
			v, ok := img.ClientQuotas()[e][op.Key]
			if op.Remove == ok || !op.Remove && v != op.Value {
				return false
			}
		}
	}
	return true
}
