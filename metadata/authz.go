package metadata

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"maps"
	"math"
	"slices"
	"strings"
)

// The authorization records, in KRaft's shapes: AccessControlEntryRecord
// (18) adds one ACL under an id, RemoveAccessControlEntryRecord (19)
// removes it, ClientQuotaRecord (14) sets or removes one quota of a
// user / client-id / ip entity. The codes inside an ACL are Kafka's
// (security/acl names them); the image keeps them as numbers, since this
// package imports nothing of Sluice's.

const (
	ClientQuotaRecordType                RecordType = 14
	AccessControlEntryRecordType         RecordType = 18
	RemoveAccessControlEntryRecordType   RecordType = 19
	maxQuotaKeyLen                                  = 255
	aclResourceTypeMax, aclOperationMax  int8       = 7, 14
	aclPatternLiteral, aclPatternPrefix  int8       = 3, 4
	aclPermissionDeny, aclPermissionAllw int8       = 2, 3
)

// ACL is one access control entry with its resource pattern (Kafka's
// AclBinding), as AccessControlEntryRecord carries it.
type ACL struct {
	ResourceType int8
	ResourceName string
	PatternType  int8 // 3 literal, 4 prefixed
	Principal    string
	Host         string
	Operation    int8
	Permission   int8 // 2 deny, 3 allow
}

// AccessControlEntryRecord adds an ACL. ID is unique and never zero.
type AccessControlEntryRecord struct {
	ID  [16]byte
	ACL ACL
}

// RemoveAccessControlEntryRecord removes the ACL with the given id.
type RemoveAccessControlEntryRecord struct {
	ID [16]byte
}

// QuotaEntity names what a client quota applies to: a user, a client id,
// or both (a user's quota for one client id), or an ip; each part either
// a name or the default of its type. Kafka's entity types are "user",
// "client-id" and "ip".
type QuotaEntity struct {
	User, ClientID, IP EntityName
}

// EntityName is one part of a quota entity.
type EntityName struct {
	Kind EntityKind
	Name string // set only when Kind is EntityNamed
}

// EntityKind says whether an entity part is absent, named or the default.
type EntityKind uint8

const (
	EntityAbsent EntityKind = iota
	EntityNamed
	EntityDefault
)

// ClientQuotaRecord sets (Remove false) or removes one quota key of an
// entity (producer_byte_rate, consumer_byte_rate, request_percentage,
// controller_mutation_rate, connection_creation_rate).
type ClientQuotaRecord struct {
	Entity QuotaEntity
	Key    string
	Value  float64
	Remove bool
}

func (AccessControlEntryRecord) Type() RecordType       { return AccessControlEntryRecordType }
func (RemoveAccessControlEntryRecord) Type() RecordType { return RemoveAccessControlEntryRecordType }
func (ClientQuotaRecord) Type() RecordType              { return ClientQuotaRecordType }

// Encoding (see records.go for the primitives):
//
//	AccessControlEntryRecord        id 16B, resource type i8, resource name, pattern i8,
//	                                principal, host, operation i8, permission i8
//	RemoveAccessControlEntryRecord  id 16B
//	ClientQuotaRecord               user, client-id, ip: each kind u8 (0 absent, 1 named,
//	                                2 default) and, when named, a string;
//	                                key, value f64 bits, remove u8 (0|1)
func (r AccessControlEntryRecord) appendBody(dst []byte) []byte {
	dst = append(dst, r.ID[:]...)
	dst = append(dst, byte(r.ACL.ResourceType))
	dst = appendString(dst, r.ACL.ResourceName)
	dst = append(dst, byte(r.ACL.PatternType))
	dst = appendString(dst, r.ACL.Principal)
	dst = appendString(dst, r.ACL.Host)
	return append(dst, byte(r.ACL.Operation), byte(r.ACL.Permission))
}

func (r RemoveAccessControlEntryRecord) appendBody(dst []byte) []byte { return append(dst, r.ID[:]...) }

func (r ClientQuotaRecord) appendBody(dst []byte) []byte {
	for _, p := range [...]EntityName{r.Entity.User, r.Entity.ClientID, r.Entity.IP} {
		dst = append(dst, byte(p.Kind))
		if p.Kind == EntityNamed {
			dst = appendString(dst, p.Name)
		}
	}
	dst = appendString(dst, r.Key)
	dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(r.Value))
	return append(dst, boolByte(r.Remove))
}

func (d *decoder) accessControlEntry() AccessControlEntryRecord {
	r := AccessControlEntryRecord{ID: d.uuid()}
	r.ACL.ResourceType, r.ACL.ResourceName = int8(d.u8()), d.str()
	r.ACL.PatternType, r.ACL.Principal, r.ACL.Host = int8(d.u8()), d.str(), d.str()
	r.ACL.Operation, r.ACL.Permission = int8(d.u8()), int8(d.u8())
	return r
}

func (d *decoder) clientQuota() ClientQuotaRecord {
	var r ClientQuotaRecord
	for _, p := range [...]*EntityName{&r.Entity.User, &r.Entity.ClientID, &r.Entity.IP} {
		p.Kind = EntityKind(d.u8())
		switch p.Kind {
		case EntityNamed:
			p.Name = d.str()
		case EntityAbsent, EntityDefault:
		default:
			d.bad = true
		}
	}
	r.Key = d.str()
	r.Value = math.Float64frombits(uint64(d.i64()))
	r.Remove = d.boolean()
	return r
}

// ACLs returns every ACL by id (read-only).
func (img Image) ACLs() map[[16]byte]ACL { return img.acls }

// ACLCount returns the number of ACLs.
func (img Image) ACLCount() int { return len(img.acls) }

// ClientQuotas returns every entity's quotas (read-only).
func (img Image) ClientQuotas() map[QuotaEntity]map[string]float64 { return img.quotas }

func (b *builder) addACL(r AccessControlEntryRecord) error {
	a := r.ACL
	switch {
	case r.ID == [16]byte{}:
		return invalid("ACL with the zero id")
	case b.hasACL(r.ID):
		return invalid("ACL id %x is taken", r.ID)
	case a.ResourceType < 2 || a.ResourceType > aclResourceTypeMax,
		a.PatternType != aclPatternLiteral && a.PatternType != aclPatternPrefix,
		a.Operation < 2 || a.Operation > aclOperationMax,
		a.Permission != aclPermissionDeny && a.Permission != aclPermissionAllw:
		return invalid("ACL %x has codes outside Kafka's: %+v", r.ID, a)
	case a.ResourceName == "" || a.Principal == "" || a.Host == "":
		return invalid("ACL %x has an empty resource name, principal or host", r.ID)
	case len(a.ResourceName) > MaxStringLen || len(a.Principal) > MaxStringLen || len(a.Host) > MaxStringLen:
		return invalid("ACL %x: a string longer than %d bytes", r.ID, MaxStringLen)
	}
	if !b.ownACLs {
		b.img.acls = cloneOrMake(b.img.acls)
		b.ownACLs = true
	}
	b.img.acls[r.ID] = a
	return nil
}

func (b *builder) hasACL(id [16]byte) bool {
	_, ok := b.img.acls[id]
	return ok
}

func (b *builder) removeACL(r RemoveAccessControlEntryRecord) error {
	if !b.hasACL(r.ID) {
		return invalid("remove of unknown ACL %x", r.ID)
	}
	if !b.ownACLs {
		b.img.acls = cloneOrMake(b.img.acls)
		b.ownACLs = true
	}
	delete(b.img.acls, r.ID)
	return nil
}

func (b *builder) clientQuota(r ClientQuotaRecord) error {
	if err := r.Entity.check(); err != nil {
		return err
	}
	switch {
	case r.Key == "" || len(r.Key) > maxQuotaKeyLen:
		return invalid("quota key %q", r.Key)
	case !r.Remove && (math.IsNaN(r.Value) || math.IsInf(r.Value, 0) || r.Value < 0):
		return invalid("quota %s = %v", r.Key, r.Value)
	}
	if _, ok := b.img.quotas[r.Entity][r.Key]; r.Remove && !ok {
		return nil // removing an absent quota changes nothing
	}
	if !b.ownQuotas {
		b.img.quotas = cloneOrMake(b.img.quotas)
		b.ownQuotas = true
	}
	kv := cloneOrMake(b.img.quotas[r.Entity])
	if r.Remove {
		delete(kv, r.Key)
	} else {
		kv[r.Key] = r.Value
	}
	if len(kv) == 0 {
		delete(b.img.quotas, r.Entity)
	} else {
		b.img.quotas[r.Entity] = kv
	}
	return nil
}

// check states what an entity may be: at least one part; an ip alone;
// names bounded and non-empty.
func (e QuotaEntity) check() error {
	parts := [...]EntityName{e.User, e.ClientID, e.IP}
	n := 0
	for _, p := range parts {
		switch {
		case p.Kind > EntityDefault:
			return invalid("quota entity part of kind %d", p.Kind)
		case p.Kind != EntityNamed && p.Name != "":
			return invalid("quota entity part has a name but is not named")
		case p.Kind == EntityNamed && (p.Name == "" || len(p.Name) > MaxStringLen):
			return invalid("quota entity name of %d bytes", len(p.Name))
		case p.Kind != EntityAbsent:
			n++
		}
	}
	if n == 0 || e.IP.Kind != EntityAbsent && n > 1 {
		return invalid("quota entity %+v: one of user, client-id, user and client-id, or ip", e)
	}
	return nil
}

func (img Image) authzRecords() []Record {
	var out []Record
	for _, id := range slices.SortedFunc(maps.Keys(img.acls), func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) }) {
		out = append(out, AccessControlEntryRecord{ID: id, ACL: img.acls[id]})
	}
	for _, e := range slices.SortedFunc(maps.Keys(img.quotas), compareEntities) {
		kv := img.quotas[e]
		for _, k := range slices.Sorted(maps.Keys(kv)) {
			out = append(out, ClientQuotaRecord{Entity: e, Key: k, Value: kv[k]})
		}
	}
	return out
}

func compareEntities(a, b QuotaEntity) int {
	c := func(x, y EntityName) int { return cmp.Or(cmp.Compare(x.Kind, y.Kind), strings.Compare(x.Name, y.Name)) }
	return cmp.Or(c(a.User, b.User), c(a.ClientID, b.ClientID), c(a.IP, b.IP))
}
