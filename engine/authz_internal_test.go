package engine

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/security/acl"
)

// Every served API has a row in the authorization table: an API without
// one would be served to super users only.
func TestEveryServedAPIHasAnAuthzRule(t *testing.T) {
	for _, a := range servedAPIs() {
		if authzTable[a.key] == nil {
			t.Errorf("%s (key %d) has no row in authzTable (authz_apis.go)", a.name, a.key)
		}
	}
}

// securedRequest is a produce of one batch to topic-777 by User:user-777,
// against an authorizer of 10,000 ACLs.
func securedRequest(tb testing.TB) *Request {
	var acls []acl.Binding
	for i := 0; len(acls) < 10_000; i++ {
		for _, op := range []acl.Operation{acl.OpWrite, acl.OpRead} {
			acls = append(acls, acl.Binding{ResourceType: acl.ResourceTopic, ResourceName: fmt.Sprintf("topic-%d", i),
				PatternType: acl.PatternLiteral, Principal: fmt.Sprintf("User:user-%d", i), Host: "*", Operation: op, Permission: acl.PermissionAllow})
		}
	}
	b := &Broker{}
	b.authz.cur.Store(acl.New(acl.Config{}, acls))
	req := kmsg.NewPtrProduceRequest()
	req.Acks = 1
	t := kmsg.NewProduceRequestTopic()
	t.Topic = "topic-777"
	t.Partitions = append(t.Partitions, kmsg.NewProduceRequestTopicPartition())
	req.Topics = append(req.Topics, t)
	return &Request{Key: 0, Version: 9, Msg: req, broker: b,
		Session: &Session{Remote: "10.0.0.1:5555", Principal: "User:user-777"}}
}

// The produce and fetch checks of an allowed principal allocate nothing.
func TestAuthorizeHotPathsAllocateNothing(t *testing.T) {
	r := securedRequest(t)
	if n := testing.AllocsPerRun(200, func() {
		if !authorizeProduce(r) {
			t.Fatal("denied")
		}
	}); n != 0 {
		t.Errorf("produce check: %v allocs", n)
	}
	if n := testing.AllocsPerRun(200, func() {
		r.authz.lastValid = false
		if r.fetchDenied("topic-777", false) {
			t.Fatal("denied")
		}
	}); n != 0 {
		t.Errorf("fetch check: %v allocs", n)
	}
}

func BenchmarkAuthorizeProduce(b *testing.B) {
	r := securedRequest(b)
	b.ReportAllocs()
	for b.Loop() {
		authorizeProduce(r)
	}
}

func BenchmarkAuthorizeFetchPartition(b *testing.B) {
	r := securedRequest(b)
	b.ReportAllocs()
	for b.Loop() {
		r.authz.lastValid = false
		r.fetchDenied("topic-777", false)
	}
}
