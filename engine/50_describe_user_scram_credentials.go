package engine

// DescribeUserScramCredentials (key 50), version 0.
//
// Lists users' SCRAM mechanisms and iteration counts (never salts or
// keys): every user with a credential for a null or empty list, else the
// named ones, RESOURCE_NOT_FOUND for a user without credentials and
// DUPLICATE_RESOURCE for a user named twice, as Kafka answers. Served from
// this broker's image.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metadata"
)

func init() {
	register(kmsg.DescribeUserSCRAMCredentials, 0, 0, (*Broker).handleDescribeUserScramCredentials)
}

func (b *Broker) handleDescribeUserScramCredentials(r *Request) {
	req := r.Msg.(*kmsg.DescribeUserSCRAMCredentialsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeUserSCRAMCredentialsResponse)
	img := b.image()
	byUser := map[string][]metadata.ScramKey{}
	var users []string
	for _, k := range img.ScramUsers() {
		if len(byUser[k.User]) == 0 {
			users = append(users, k.User)
		}
		byUser[k.User] = append(byUser[k.User], k)
	}
	if len(req.Users) > 0 {
		users = users[:0]
		count := map[string]int{}
		for _, u := range req.Users {
			if count[u.Name]++; count[u.Name] == 1 {
				users = append(users, u.Name)
			}
		}
		for _, u := range users {
			res := scramDescribeResult(img, u, byUser[u])
			if count[u] > 1 {
				res.ErrorCode, res.ErrorMessage = kerr.DuplicateResource.Code, stringPtr("Cannot describe SCRAM credentials for the same user twice in a single request")
				res.CredentialInfos = nil
			}
			resp.Results = append(resp.Results, res)
		}
		r.Respond(resp)
		return
	}
	for _, u := range users {
		resp.Results = append(resp.Results, scramDescribeResult(img, u, byUser[u]))
	}
	r.Respond(resp)
}

func scramDescribeResult(img metadata.Image, user string, keys []metadata.ScramKey) kmsg.DescribeUserSCRAMCredentialsResponseResult {
	res := kmsg.NewDescribeUserSCRAMCredentialsResponseResult()
	res.User = user
	if len(keys) == 0 {
		res.ErrorCode, res.ErrorMessage = kerr.ResourceNotFound.Code, stringPtr("Attempt to describe a user credential that does not exist: "+user)
		return res
	}
	for _, k := range keys {
		c, _ := img.ScramCredential(k.User, k.Mechanism)
		ci := kmsg.NewDescribeUserSCRAMCredentialsResponseResultCredentialInfo()
		ci.Mechanism, ci.Iterations = k.Mechanism, c.Iterations
		res.CredentialInfos = append(res.CredentialInfos, ci)
	}
	return res
}

// ScramCredential returns a user's SCRAM credential for a mechanism code
// from the current image (the SASL listeners look credentials up here).
func (b *Broker) ScramCredential(user string, mechanism int8) (metadata.ScramCredential, bool) {
	return b.image().ScramCredential(user, mechanism)
}
