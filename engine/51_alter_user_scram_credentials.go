package engine

// AlterUserScramCredentials (key 51), version 0.
//
// Upserts and deletes users' SCRAM-SHA-256/512 credentials, as
// `kafka-configs --entity-type users --alter --add-config
// 'SCRAM-SHA-512=[password=…]'` sends them: the client salts the password,
// the broker keeps the salt, the stored key and the server key
// (UserScramCredentialRecord). Kafka's rules (controller.ScramRecords):
// results per user, a user with any bad change changes nothing, iterations
// within [4096, 16384], RESOURCE_NOT_FOUND for deleting a credential that
// does not exist, DUPLICATE_RESOURCE for one credential twice. In a
// cluster the request goes to the active controller, like every metadata
// write, and the answer waits until this broker's image has the change,
// so that the user can log in here at once.

import (
	"bytes"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/controller"
	"github.com/sluice-broker/sluice/metadata"
)

func init() {
	register(kmsg.AlterUserSCRAMCredentials, 0, 0, (*Broker).handleAlterUserScramCredentials)
}

func (b *Broker) handleAlterUserScramCredentials(r *Request) {
	req := r.Msg.(*kmsg.AlterUserSCRAMCredentialsRequest)
	if b.cluster != nil {
		go func() { r.Respond(b.cluster.forwardScram(req)) }()
		return
	}
	b.meta.mu.Lock()
	defer b.meta.mu.Unlock()
	recs, resp := controller.ScramRecords(b.image(), req)
	if len(recs) > 0 {
		if err := b.commitLocked(recs...); err != nil {
			b.log.Error("cannot store SCRAM credentials", "err", err)
			for i := range resp.Results {
				resp.Results[i].ErrorCode = kerr.UnknownServerError.Code
			}
		}
	}
	r.Respond(resp)
}

// forwardScram sends the change to the controller and waits until this
// broker's image shows the credentials of every user it accepted.
func (l *clusterLink) forwardScram(req *kmsg.AlterUserSCRAMCredentialsRequest) kmsg.Response {
	resp, err := l.call(controller.LineAdmin, req)
	if err != nil {
		out := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
		seen := map[string]bool{}
		add := func(n string) {
			if !seen[n] {
				seen[n] = true
				res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
				res.User, res.ErrorCode = n, kerr.RequestTimedOut.Code
				out.Results = append(out.Results, res)
			}
		}
		for _, d := range req.Deletions {
			add(d.Name)
		}
		for _, u := range req.Upsertions {
			add(u.Name)
		}
		return out
	}
	ok := map[string]bool{}
	for _, res := range resp.(*kmsg.AlterUserSCRAMCredentialsResponse).Results {
		ok[res.User] = res.ErrorCode == 0
	}
	l.waitImage(func(img metadata.Image) bool { return scramApplied(img, req, ok) })
	return resp
}

// scramApplied reports whether img shows the accepted users' changes.
func scramApplied(img metadata.Image, req *kmsg.AlterUserSCRAMCredentialsRequest, ok map[string]bool) bool {
	for _, d := range req.Deletions {
		if _, has := img.ScramCredential(d.Name, d.Mechanism); ok[d.Name] && has {
			return false
		}
	}
	for _, u := range req.Upsertions {
		c, has := img.ScramCredential(u.Name, u.Mechanism)
		if ok[u.Name] && (!has || !bytes.Equal(c.Salt, u.Salt) || c.Iterations != u.Iterations) {
			return false
		}
	}
	return true
}
