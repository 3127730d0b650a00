package controller

// AlterUserScramCredentials (key 51) as Kafka's controller decides it:
// results per user; a user whose changes include any error changes
// nothing; the salted password a client sends becomes a stored key and a
// server key (the image never holds a password). Brokers forward the
// request here; a single node decides with the same function.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metadata"
	"github.com/sluice-broker/sluice/security/sasl"
)

// ScramRecords decides an AlterUserScramCredentials request against img:
// the records to commit (for the users without error) and the response.
func ScramRecords(img metadata.Image, req *kmsg.AlterUserSCRAMCredentialsRequest) ([]metadata.Record, *kmsg.AlterUserSCRAMCredentialsResponse) {
	resp := req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
	type change struct {
		recs []metadata.Record
		err  *kerr.Error
		msg  string
	}
	changes := map[string]*change{}
	var order []string
	seen := map[metadata.ScramKey]bool{}
	user := func(name string) *change {
		if c, ok := changes[name]; ok {
			return c
		}
		c := &change{}
		changes[name] = c
		order = append(order, name)
		return c
	}
	fail := func(c *change, e *kerr.Error, msg string) {
		if c.err == nil {
			c.err, c.msg = e, msg
		}
	}
	check := func(name string, mech int8) *change {
		c := user(name)
		k := metadata.ScramKey{User: name, Mechanism: mech}
		switch {
		case name == "":
			fail(c, kerr.UnacceptableCredential, "Username must not be empty")
		case mech != metadata.ScramSHA256 && mech != metadata.ScramSHA512:
			fail(c, kerr.UnsupportedSaslMechanism, "Unknown SCRAM mechanism")
		case seen[k]:
			fail(c, kerr.DuplicateResource, "A user credential cannot be altered twice in the same request")
		}
		seen[k] = true
		return c
	}
	for _, d := range req.Deletions {
		c := check(d.Name, d.Mechanism)
		if _, ok := img.ScramCredential(d.Name, d.Mechanism); !ok && c.err == nil {
			fail(c, kerr.ResourceNotFound, "Attempt to delete a user credential that does not exist")
		}
		c.recs = append(c.recs, metadata.RemoveUserScramCredentialRecord{Name: d.Name, Mechanism: d.Mechanism})
	}
	for _, u := range req.Upsertions {
		c := check(u.Name, u.Mechanism)
		if c.err != nil {
			continue
		}
		if u.Iterations < metadata.MinScramIterations || u.Iterations > metadata.MaxScramIterations {
			fail(c, kerr.UnacceptableCredential, "Iterations must be between 4096 and 16384")
			continue
		}
		if len(u.Salt) == 0 || len(u.SaltedPassword) == 0 || len(u.Salt) > 128 || len(u.SaltedPassword) > 128 {
			fail(c, kerr.UnacceptableCredential, "Salt and salted password must be non-empty and at most 128 bytes")
			continue
		}
		cred, err := sasl.NewScramCredential(sasl.ScramMechanismName(u.Mechanism), u.Salt, u.SaltedPassword, u.Iterations)
		if err != nil {
			fail(c, kerr.UnsupportedSaslMechanism, err.Error())
			continue
		}
		c.recs = append(c.recs, metadata.UserScramCredentialRecord{Name: u.Name, Mechanism: u.Mechanism,
			Salt: cred.Salt, StoredKey: cred.StoredKey, ServerKey: cred.ServerKey, Iterations: u.Iterations})
	}
	var recs []metadata.Record
	for _, name := range order {
		c := changes[name]
		res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
		res.User = name
		if c.err != nil {
			res.ErrorCode, res.ErrorMessage = c.err.Code, &c.msg
		} else {
			recs = append(recs, c.recs...)
		}
		resp.Results = append(resp.Results, res)
	}
	return recs, resp
}

// alterScram commits the credentials of the users without error; if the
// commit fails every user gets its error.
func (cs *connState) alterScram(req *kmsg.AlterUserSCRAMCredentialsRequest) kmsg.Response {
	var resp *kmsg.AlterUserSCRAMCredentialsResponse
	failed := cs.decide(func(a *active) *kerr.Error {
		var recs []metadata.Record
		recs, resp = ScramRecords(a.s.store.Image(), req)
		if len(recs) == 0 {
			return nil
		}
		return commitErr(a.commit(recs))
	})
	if failed != nil {
		resp = req.ResponseKind().(*kmsg.AlterUserSCRAMCredentialsResponse)
		seen := map[string]bool{}
		for _, n := range append(scramNames(req.Deletions), scramUpsertNames(req.Upsertions)...) {
			if !seen[n] {
				seen[n] = true
				res := kmsg.NewAlterUserSCRAMCredentialsResponseResult()
				res.User, res.ErrorCode = n, failed.Code
				resp.Results = append(resp.Results, res)
			}
		}
	}
	return resp
}

func scramNames(ds []kmsg.AlterUserSCRAMCredentialsRequestDeletion) []string {
	out := make([]string, len(ds))
	for i := range ds {
		out[i] = ds[i].Name
	}
	return out
}

func scramUpsertNames(us []kmsg.AlterUserSCRAMCredentialsRequestUpsertion) []string {
	out := make([]string, len(us))
	for i := range us {
		out[i] = us[i].Name
	}
	return out
}
