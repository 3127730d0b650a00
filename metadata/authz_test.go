package metadata

import (
	"errors"
	"math"
	"reflect"
	"testing"
)

func aclRec(id byte, name string) AccessControlEntryRecord {
	return AccessControlEntryRecord{ID: [16]byte{id}, ACL: ACL{ResourceType: 2, ResourceName: name, PatternType: 3,
		Principal: "User:alice", Host: "*", Operation: 4, Permission: 3}}
}

func named(n string) EntityName { return EntityName{Kind: EntityNamed, Name: n} }

func TestApplyACLsAndQuotas(t *testing.T) {
	alice := QuotaEntity{User: named("alice")}
	img, err := ApplyAll(Image{}, []Record{
		aclRec(1, "a"), aclRec(2, "b"), RemoveAccessControlEntryRecord{ID: [16]byte{1}},
		ClientQuotaRecord{Entity: alice, Key: "producer_byte_rate", Value: 1024},
		ClientQuotaRecord{Entity: alice, Key: "consumer_byte_rate", Value: 2048},
		ClientQuotaRecord{Entity: alice, Key: "consumer_byte_rate", Remove: true},
		ClientQuotaRecord{Entity: QuotaEntity{ClientID: EntityName{Kind: EntityDefault}}, Key: "request_percentage", Value: 50},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := img.ACLs(); len(got) != 1 || got[[16]byte{2}].ResourceName != "b" {
		t.Fatalf("acls %v", got)
	}
	if q := img.ClientQuotas()[alice]; !reflect.DeepEqual(q, map[string]float64{"producer_byte_rate": 1024}) {
		t.Fatalf("alice's quotas %v", q)
	}
	// The snapshot rebuilds the same image.
	again, err := ApplyAll(Image{}, img.Records())
	if err != nil || !reflect.DeepEqual(again.ACLs(), img.ACLs()) || !reflect.DeepEqual(again.ClientQuotas(), img.ClientQuotas()) {
		t.Fatalf("snapshot: %v %v %v", err, again.ACLs(), again.ClientQuotas())
	}
	// Removing the last key drops the entity.
	img, _ = Apply(img, ClientQuotaRecord{Entity: alice, Key: "producer_byte_rate", Remove: true})
	if _, ok := img.ClientQuotas()[alice]; ok || img.IsEmpty() {
		t.Fatalf("quotas after remove: %v", img.ClientQuotas())
	}
}

func TestApplyRefusesBadACLsAndQuotas(t *testing.T) {
	base, _ := Apply(Image{}, aclRec(1, "a"))
	bad := func(f func(*AccessControlEntryRecord)) Record { r := aclRec(9, "x"); f(&r); return r }
	for name, r := range map[string]Record{
		"taken id":         aclRec(1, "b"),
		"zero id":          bad(func(r *AccessControlEntryRecord) { r.ID = [16]byte{} }),
		"any resource":     bad(func(r *AccessControlEntryRecord) { r.ACL.ResourceType = 1 }),
		"match pattern":    bad(func(r *AccessControlEntryRecord) { r.ACL.PatternType = 2 }),
		"any op":           bad(func(r *AccessControlEntryRecord) { r.ACL.Operation = 1 }),
		"any permission":   bad(func(r *AccessControlEntryRecord) { r.ACL.Permission = 1 }),
		"empty principal":  bad(func(r *AccessControlEntryRecord) { r.ACL.Principal = "" }),
		"unknown remove":   RemoveAccessControlEntryRecord{ID: [16]byte{7}},
		"empty entity":     ClientQuotaRecord{Key: "k", Value: 1},
		"ip and user":      ClientQuotaRecord{Entity: QuotaEntity{User: named("a"), IP: named("1.2.3.4")}, Key: "k", Value: 1},
		"nan":              ClientQuotaRecord{Entity: QuotaEntity{User: named("a")}, Key: "k", Value: math.NaN()},
		"negative":         ClientQuotaRecord{Entity: QuotaEntity{User: named("a")}, Key: "k", Value: -1},
		"empty key":        ClientQuotaRecord{Entity: QuotaEntity{User: named("a")}, Value: 1},
		"default and name": ClientQuotaRecord{Entity: QuotaEntity{User: EntityName{Kind: EntityDefault, Name: "x"}}, Key: "k", Value: 1},
	} {
		if _, err := Apply(base, r); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err %v", name, err)
		}
	}
}

func TestDecodeRefusesBadEntityKind(t *testing.T) {
	b := AppendRecord(nil, ClientQuotaRecord{Entity: QuotaEntity{User: EntityName{Kind: EntityDefault}}, Key: "k", Value: 1})
	b[2] = 3 // user kind
	if _, err := DecodeRecord(b); !errors.Is(err, ErrMalformed) {
		t.Fatalf("err %v", err)
	}
}
