package engine

import (
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metadata"
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

// fill gives every list of v one element (recursively) and names every
// resource "x", so that each rule's reflection meets real fields.
func fill(v reflect.Value) {
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return
	}
	for i := 0; i < v.NumField(); i++ {
		f, name := v.Field(i), v.Type().Field(i).Name
		switch {
		case !f.CanSet():
		case f.Kind() == reflect.String && name != "ClientID":
			f.SetString("x")
		case f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.String:
			x := "x"
			f.Set(reflect.ValueOf(&x))
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct:
			e := reflect.New(f.Type().Elem())
			if d, ok := e.Interface().(interface{ Default() }); ok {
				d.Default()
			}
			fill(e)
			f.Set(reflect.Append(reflect.MakeSlice(f.Type(), 0, 1), e.Elem()))
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
			f.Set(reflect.ValueOf([]string{"x"}))
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Int32:
			f.Set(reflect.ValueOf([]int32{0}))
		}
	}
}

// Every rule runs, at every version the key has, against a principal
// denied everything, on requests and answers with every list filled:
// no rule may panic (its reflection names real fields), and a rule that
// answers does so once.
func TestEveryAuthzRuleRunsDenied(t *testing.T) {
	b := &Broker{log: slog.New(slog.NewTextHandler(io.Discard, nil)), metrics: NewMetrics()}
	b.authz.cur.Store(acl.New(acl.Config{}, nil))
	b.meta.image.Store(&metadata.Image{})
	for key, rule := range authzTable {
		if rule == nil {
			continue
		}
		proto := kmsg.RequestForKey(int16(key))
		if proto == nil {
			continue
		}
		for v := int16(0); v <= proto.MaxVersion(); v++ {
			msg := kmsg.RequestForKey(int16(key))
			msg.SetVersion(v)
			fill(reflect.ValueOf(msg))
			answers := 0
			r := &Request{Key: int16(key), Version: v, Msg: msg, broker: b, Session: &Session{Remote: "10.0.0.1:1", Principal: "User:nobody"},
				done: func(resp *Response) { answers++ }}
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("%s v%d: panic %v", kmsg.NameForKey(int16(key)), v, p)
					}
				}()
				if !rule(r) {
					if answers != 1 {
						t.Errorf("%s v%d: answered %d times", kmsg.NameForKey(int16(key)), v, answers)
					}
					return
				}
				if r.authz.post != nil {
					resp := msg.ResponseKind()
					resp.SetVersion(v)
					fill(reflect.ValueOf(resp))
					r.authz.post(resp)
				}
			}()
		}
	}
}
