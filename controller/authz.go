package controller

// ACL and client-quota changes (CreateAcls 30, DeleteAcls 31,
// AlterClientQuotas 49): pure decisions over the image, shared by the
// active controller (brokers forward these requests, as KRaft brokers do)
// and a single node's broker, which commits them to its own store.

import (
	"crypto/rand"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metadata"
	"github.com/sluice-broker/sluice/security/acl"
)

// NewACLID returns a random ACL id (never zero).
func NewACLID() [16]byte {
	var id [16]byte
	for id == ([16]byte{}) {
		rand.Read(id[:])
	}
	return id
}

// ACLBinding converts an image ACL.
func ACLBinding(a metadata.ACL) acl.Binding {
	return acl.Binding{ResourceType: acl.ResourceType(a.ResourceType), ResourceName: a.ResourceName,
		PatternType: acl.PatternType(a.PatternType), Principal: a.Principal, Host: a.Host,
		Operation: acl.Operation(a.Operation), Permission: acl.Permission(a.Permission)}
}

func imageACL(b acl.Binding) metadata.ACL {
	return metadata.ACL{ResourceType: int8(b.ResourceType), ResourceName: b.ResourceName, PatternType: int8(b.PatternType),
		Principal: b.Principal, Host: b.Host, Operation: int8(b.Operation), Permission: int8(b.Permission)}
}

// CreateACLs decides a CreateAcls request: one AccessControlEntryRecord
// per new binding; a binding that exists already (or twice in the
// request) succeeds without a record, as in Kafka. An invalid binding
// answers INVALID_REQUEST with the reason.
func CreateACLs(img metadata.Image, req *kmsg.CreateACLsRequest, newID func() [16]byte) ([]metadata.Record, *kmsg.CreateACLsResponse) {
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	have := map[metadata.ACL]bool{}
	for _, a := range img.ACLs() {
		have[a] = true
	}
	var recs []metadata.Record
	for _, c := range req.Creations {
		res := kmsg.NewCreateACLsResponseResult()
		b := acl.Binding{ResourceType: acl.ResourceType(c.ResourceType), ResourceName: c.ResourceName,
			PatternType: acl.PatternType(c.ResourcePatternType), Principal: c.Principal, Host: c.Host,
			Operation: acl.Operation(c.Operation), Permission: acl.Permission(c.PermissionType)}
		if err := checkBinding(b); err != nil {
			res.ErrorCode, res.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
		} else if a := imageACL(b); !have[a] {
			have[a] = true
			recs = append(recs, metadata.AccessControlEntryRecord{ID: newID(), ACL: a})
		}
		resp.Results = append(resp.Results, res)
	}
	return recs, resp
}

func checkBinding(b acl.Binding) error {
	if err := b.Validate(); err != nil {
		return err
	}
	if len(b.ResourceName) > metadata.MaxStringLen || len(b.Principal) > metadata.MaxStringLen || len(b.Host) > metadata.MaxStringLen {
		return fmt.Errorf("a string longer than %d bytes", metadata.MaxStringLen)
	}
	return nil
}

// ACLFilter converts a DeleteAcls filter.
func ACLFilter(f kmsg.DeleteACLsRequestFilter) acl.Filter {
	return acl.Filter{ResourceType: acl.ResourceType(f.ResourceType), ResourceName: f.ResourceName,
		PatternType: acl.PatternType(f.ResourcePatternType), Principal: f.Principal, Host: f.Host,
		Operation: acl.Operation(f.Operation), Permission: acl.Permission(f.PermissionType)}
}

// DeleteACLs decides a DeleteAcls request: each filter lists the ACLs it
// matches, and every matched ACL is removed once.
func DeleteACLs(img metadata.Image, req *kmsg.DeleteACLsRequest) ([]metadata.Record, *kmsg.DeleteACLsResponse) {
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	removed := map[[16]byte]bool{}
	var recs []metadata.Record
	for _, kf := range req.Filters {
		res := kmsg.NewDeleteACLsResponseResult()
		f := ACLFilter(kf)
		if err := f.Validate(); err != nil {
			res.ErrorCode, res.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
			resp.Results = append(resp.Results, res)
			continue
		}
		for id, a := range img.ACLs() {
			b := ACLBinding(a)
			if !f.Matches(b) {
				continue
			}
			m := kmsg.NewDeleteACLsResponseResultMatchingACL()
			m.ResourceType, m.ResourceName, m.ResourcePatternType = kmsg.ACLResourceType(b.ResourceType), b.ResourceName, kmsg.ACLResourcePatternType(b.PatternType)
			m.Principal, m.Host = b.Principal, b.Host
			m.Operation, m.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
			res.MatchingACLs = append(res.MatchingACLs, m)
			if !removed[id] {
				removed[id] = true
				recs = append(recs, metadata.RemoveAccessControlEntryRecord{ID: id})
			}
		}
		resp.Results = append(resp.Results, res)
	}
	return recs, resp
}

// quotaKeys are the quota keys Kafka knows, by the entity kind they
// apply to, and whether their value is a whole number (Kafka's LONG).
var quotaKeys = map[string]struct {
	ip, whole bool
}{
	"producer_byte_rate":       {whole: true},
	"consumer_byte_rate":       {whole: true},
	"request_percentage":       {},
	"controller_mutation_rate": {},
	"connection_creation_rate": {ip: true, whole: true},
}

// QuotaEntity converts a request's entity, checking its shape: user,
// client-id, both, or ip; each type once.
func QuotaEntity(parts []kmsg.AlterClientQuotasRequestEntryEntity) (metadata.QuotaEntity, error) {
	var e metadata.QuotaEntity
	for _, p := range parts {
		n := metadata.EntityName{Kind: metadata.EntityDefault}
		if p.Name != nil {
			if *p.Name == "" || len(*p.Name) > metadata.MaxStringLen {
				return e, fmt.Errorf("entity %s has an empty or too long name", p.Type)
			}
			n = metadata.EntityName{Kind: metadata.EntityNamed, Name: *p.Name}
		}
		var slot *metadata.EntityName
		switch p.Type {
		case "user":
			slot = &e.User
		case "client-id":
			slot = &e.ClientID
		case "ip":
			slot = &e.IP
		default:
			return e, fmt.Errorf("unknown entity type %q", p.Type)
		}
		if slot.Kind != metadata.EntityAbsent {
			return e, fmt.Errorf("entity type %s given twice", p.Type)
		}
		*slot = n
	}
	ip := e.IP.Kind != metadata.EntityAbsent
	if len(parts) == 0 || ip && len(parts) > 1 {
		return e, fmt.Errorf("an entity is a user, a client-id, both, or an ip")
	}
	return e, nil
}

// AlterClientQuotas decides an AlterClientQuotas request: one
// ClientQuotaRecord per op of each valid entry (an entry is all or
// nothing); with ValidateOnly, none.
func AlterClientQuotas(img metadata.Image, req *kmsg.AlterClientQuotasRequest) ([]metadata.Record, *kmsg.AlterClientQuotasResponse) {
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	var recs []metadata.Record
	for _, en := range req.Entries {
		out := kmsg.NewAlterClientQuotasResponseEntry()
		for _, p := range en.Entity {
			out.Entity = append(out.Entity, kmsg.AlterClientQuotasResponseEntryEntity{Type: p.Type, Name: p.Name})
		}
		entryRecs, err := quotaRecords(en)
		if err != nil {
			out.ErrorCode, out.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
		} else if !req.ValidateOnly {
			recs = append(recs, entryRecs...)
		}
		resp.Entries = append(resp.Entries, out)
	}
	return recs, resp
}

func quotaRecords(en kmsg.AlterClientQuotasRequestEntry) ([]metadata.Record, error) {
	e, err := QuotaEntity(en.Entity)
	if err != nil {
		return nil, err
	}
	ip := e.IP.Kind != metadata.EntityAbsent
	seen := map[string]bool{}
	var recs []metadata.Record
	for _, op := range en.Ops {
		k, ok := quotaKeys[op.Key]
		switch {
		case !ok || k.ip != ip:
			return nil, fmt.Errorf("%q is not a quota of this entity", op.Key)
		case seen[op.Key]:
			return nil, fmt.Errorf("%q given twice", op.Key)
		case !op.Remove && (math.IsNaN(op.Value) || math.IsInf(op.Value, 0) || op.Value <= 0):
			return nil, fmt.Errorf("%s must be a positive number, not %v", op.Key, op.Value)
		case !op.Remove && k.whole && op.Value != math.Trunc(op.Value):
			return nil, fmt.Errorf("%s must be a whole number, not %v", op.Key, op.Value)
		}
		seen[op.Key] = true
		recs = append(recs, metadata.ClientQuotaRecord{Entity: e, Key: op.Key, Value: op.Value, Remove: op.Remove})
	}
	return recs, nil
}

// The forwarded forms, on the active controller. A decision that failed
// (not active, not committed) answers every result with its code.

func (cs *connState) createACLs(req *kmsg.CreateACLsRequest) kmsg.Response {
	var resp *kmsg.CreateACLsResponse
	e := cs.decide(func(a *active) *kerr.Error {
		var recs []metadata.Record
		recs, resp = CreateACLs(a.s.store.Image(), req, NewACLID)
		return commitErr(a.commit(recs))
	})
	if e != nil {
		_, resp = CreateACLs(metadata.Image{}, req, NewACLID)
		for i := range resp.Results {
			resp.Results[i].ErrorCode = e.Code
		}
	}
	return resp
}

func (cs *connState) deleteACLs(req *kmsg.DeleteACLsRequest) kmsg.Response {
	var resp *kmsg.DeleteACLsResponse
	e := cs.decide(func(a *active) *kerr.Error {
		var recs []metadata.Record
		recs, resp = DeleteACLs(a.s.store.Image(), req)
		return commitErr(a.commit(recs))
	})
	if e != nil {
		_, resp = DeleteACLs(metadata.Image{}, req)
		for i := range resp.Results {
			resp.Results[i].ErrorCode = e.Code
		}
	}
	return resp
}

func (cs *connState) alterClientQuotas(req *kmsg.AlterClientQuotasRequest) kmsg.Response {
	var resp *kmsg.AlterClientQuotasResponse
	e := cs.decide(func(a *active) *kerr.Error {
		var recs []metadata.Record
		recs, resp = AlterClientQuotas(a.s.store.Image(), req)
		return commitErr(a.commit(recs))
	})
	if e != nil {
		_, resp = AlterClientQuotas(metadata.Image{}, req)
		for i := range resp.Entries {
			resp.Entries[i].ErrorCode = e.Code
		}
	}
	return resp
}
