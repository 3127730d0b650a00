package acl

import (
	"fmt"
	"testing"
)

func allow(rt ResourceType, pt PatternType, name, principal string, op Operation) Binding {
	return Binding{ResourceType: rt, ResourceName: name, PatternType: pt, Principal: principal, Host: "*", Operation: op, Permission: PermissionAllow}
}

func deny(rt ResourceType, pt PatternType, name, principal string, op Operation) Binding {
	b := allow(rt, pt, name, principal, op)
	b.Permission = PermissionDeny
	return b
}

func TestAuthorize(t *testing.T) {
	const alice, bob = "User:alice", "User:bob"
	type check struct {
		principal, host string
		op              Operation
		rt              ResourceType
		name            string
		want            bool
	}
	for _, tc := range []struct {
		name   string
		cfg    Config
		acls   []Binding
		checks []check
	}{
		{name: "no acls: denied unless allow.everyone.if.no.acl.found",
			checks: []check{{alice, "1.2.3.4", OpRead, ResourceTopic, "t", false}}},
		{name: "no acls with allow.everyone", cfg: Config{AllowIfNoACL: true},
			checks: []check{{alice, "1.2.3.4", OpRead, ResourceTopic, "t", true}}},
		{name: "an acl for someone else closes the resource even with allow.everyone", cfg: Config{AllowIfNoACL: true},
			acls: []Binding{allow(ResourceTopic, PatternLiteral, "t", bob, OpRead)},
			checks: []check{
				{alice, "h", OpRead, ResourceTopic, "t", false},
				{bob, "h", OpRead, ResourceTopic, "t", true},
				{alice, "h", OpRead, ResourceTopic, "other", true},
			}},
		{name: "super user", cfg: Config{SuperUsers: []string{"User:admin"}},
			acls: []Binding{deny(ResourceTopic, PatternLiteral, "t", WildcardPrincipal, OpAll)},
			checks: []check{
				{"User:admin", "h", OpDelete, ResourceTopic, "t", true},
				{"User:admin", "h", OpAlter, ResourceCluster, ClusterName, true},
				{alice, "h", OpRead, ResourceTopic, "t", false},
			}},
		{name: "literal allow is exact",
			acls: []Binding{allow(ResourceTopic, PatternLiteral, "orders", alice, OpRead)},
			checks: []check{
				{alice, "h", OpRead, ResourceTopic, "orders", true},
				{alice, "h", OpRead, ResourceTopic, "orders2", false},
				{alice, "h", OpWrite, ResourceTopic, "orders", false},
				{alice, "h", OpRead, ResourceGroup, "orders", false},
				{bob, "h", OpRead, ResourceTopic, "orders", false},
			}},
		{name: "wildcard resource and principal",
			acls: []Binding{allow(ResourceTopic, PatternLiteral, "*", WildcardPrincipal, OpWrite)},
			checks: []check{
				{alice, "h", OpWrite, ResourceTopic, "anything", true},
				{bob, "h", OpWrite, ResourceTopic, "*", true},
				{bob, "h", OpRead, ResourceTopic, "x", false},
			}},
		{name: "prefixed",
			acls: []Binding{allow(ResourceTopic, PatternPrefixed, "app.", alice, OpRead), allow(ResourceGroup, PatternPrefixed, "g", alice, OpRead)},
			checks: []check{
				{alice, "h", OpRead, ResourceTopic, "app.orders", true},
				{alice, "h", OpRead, ResourceTopic, "app.", true},
				{alice, "h", OpRead, ResourceTopic, "app", false},
				{alice, "h", OpRead, ResourceTopic, "xapp.orders", false},
				{alice, "h", OpRead, ResourceGroup, "group-1", true},
			}},
		{name: "deny wins over allow, across patterns",
			acls: []Binding{
				allow(ResourceTopic, PatternPrefixed, "app.", alice, OpAll),
				deny(ResourceTopic, PatternLiteral, "app.secret", alice, OpRead),
				deny(ResourceTopic, PatternLiteral, "*", bob, OpWrite),
				allow(ResourceTopic, PatternLiteral, "app.x", bob, OpWrite),
			},
			checks: []check{
				{alice, "h", OpRead, ResourceTopic, "app.orders", true},
				{alice, "h", OpRead, ResourceTopic, "app.secret", false},
				{alice, "h", OpWrite, ResourceTopic, "app.secret", true},
				{alice, "h", OpDescribe, ResourceTopic, "app.secret", true}, // a deny of READ does not deny DESCRIBE
				{bob, "h", OpWrite, ResourceTopic, "app.x", false},
			}},
		{name: "deny of ALL denies everything, for User:*",
			acls:   []Binding{allow(ResourceTopic, PatternLiteral, "t", alice, OpAll), deny(ResourceTopic, PatternLiteral, "t", WildcardPrincipal, OpAll)},
			checks: []check{{alice, "h", OpDescribe, ResourceTopic, "t", false}}},
		{name: "implied operations",
			acls: []Binding{
				allow(ResourceTopic, PatternLiteral, "r", alice, OpRead),
				allow(ResourceTopic, PatternLiteral, "w", alice, OpWrite),
				allow(ResourceTopic, PatternLiteral, "d", alice, OpDelete),
				allow(ResourceTopic, PatternLiteral, "a", alice, OpAlter),
				allow(ResourceTopic, PatternLiteral, "ac", alice, OpAlterConfigs),
				allow(ResourceTopic, PatternLiteral, "all", alice, OpAll),
			},
			checks: []check{
				{alice, "h", OpDescribe, ResourceTopic, "r", true},
				{alice, "h", OpDescribe, ResourceTopic, "w", true},
				{alice, "h", OpDescribe, ResourceTopic, "d", true},
				{alice, "h", OpDescribe, ResourceTopic, "a", true},
				{alice, "h", OpDescribeConfigs, ResourceTopic, "ac", true},
				{alice, "h", OpDescribe, ResourceTopic, "ac", false},
				{alice, "h", OpRead, ResourceTopic, "w", false}, // WRITE does not imply READ
				{alice, "h", OpClusterAction, ResourceTopic, "all", true},
			}},
		{name: "hosts",
			acls: []Binding{{ResourceType: ResourceTopic, ResourceName: "t", PatternType: PatternLiteral, Principal: alice,
				Host: "10.0.0.1", Operation: OpRead, Permission: PermissionAllow}},
			checks: []check{
				{alice, "10.0.0.1", OpRead, ResourceTopic, "t", true},
				{alice, "10.0.0.2", OpRead, ResourceTopic, "t", false},
			}},
		{name: "cluster resource",
			acls: []Binding{allow(ResourceCluster, PatternLiteral, ClusterName, alice, OpIdempotentWrite)},
			checks: []check{
				{alice, "h", OpIdempotentWrite, ResourceCluster, ClusterName, true},
				{alice, "h", OpAlter, ResourceCluster, ClusterName, false},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := New(tc.cfg, tc.acls)
			for _, c := range tc.checks {
				if got := a.Authorize(c.principal, c.host, c.op, c.rt, c.name); got != c.want {
					t.Errorf("%s from %s: %v %v:%s = %v, want %v", c.principal, c.host, c.op, c.rt, c.name, got, c.want)
				}
			}
		})
	}
}

func strp(s string) *string { return &s }

func TestFilterMatches(t *testing.T) {
	lit := allow(ResourceTopic, PatternLiteral, "orders", "User:alice", OpRead)
	wild := allow(ResourceTopic, PatternLiteral, "*", "User:alice", OpRead)
	pre := allow(ResourceTopic, PatternPrefixed, "ord", "User:alice", OpRead)
	any := Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}
	for _, tc := range []struct {
		name string
		f    Filter
		b    Binding
		want bool
	}{
		{"any matches all", any, pre, true},
		{"literal name", Filter{ResourceType: ResourceTopic, ResourceName: strp("orders"), PatternType: PatternLiteral, Operation: OpAny, Permission: PermissionAny}, lit, true},
		{"literal filter skips prefixed", Filter{ResourceType: ResourceTopic, ResourceName: strp("ord"), PatternType: PatternLiteral, Operation: OpAny, Permission: PermissionAny}, pre, false},
		{"any pattern compares names exactly", Filter{ResourceType: ResourceTopic, ResourceName: strp("ord"), PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}, pre, true},
		{"match finds the prefix", Filter{ResourceType: ResourceTopic, ResourceName: strp("orders"), PatternType: PatternMatch, Operation: OpAny, Permission: PermissionAny}, pre, true},
		{"match finds the wildcard", Filter{ResourceType: ResourceTopic, ResourceName: strp("orders"), PatternType: PatternMatch, Operation: OpAny, Permission: PermissionAny}, wild, true},
		{"match not a longer prefix", Filter{ResourceType: ResourceTopic, ResourceName: strp("or"), PatternType: PatternMatch, Operation: OpAny, Permission: PermissionAny}, pre, false},
		{"resource type", Filter{ResourceType: ResourceGroup, PatternType: PatternAny, Operation: OpAny, Permission: PermissionAny}, lit, false},
		{"principal", Filter{ResourceType: ResourceAny, PatternType: PatternAny, Principal: strp("User:bob"), Operation: OpAny, Permission: PermissionAny}, lit, false},
		{"host", Filter{ResourceType: ResourceAny, PatternType: PatternAny, Host: strp("*"), Operation: OpAny, Permission: PermissionAny}, lit, true},
		{"operation", Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpWrite, Permission: PermissionAny}, lit, false},
		{"permission", Filter{ResourceType: ResourceAny, PatternType: PatternAny, Operation: OpAny, Permission: PermissionDeny}, lit, false},
	} {
		if got := tc.f.Matches(tc.b); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestValidate(t *testing.T) {
	good := allow(ResourceTopic, PatternLiteral, "t", "User:a", OpRead)
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mut := range map[string]func(*Binding){
		"any resource":     func(b *Binding) { b.ResourceType = ResourceAny },
		"match pattern":    func(b *Binding) { b.PatternType = PatternMatch },
		"any op":           func(b *Binding) { b.Operation = OpAny },
		"any permission":   func(b *Binding) { b.Permission = PermissionAny },
		"empty name":       func(b *Binding) { b.ResourceName = "" },
		"bad principal":    func(b *Binding) { b.Principal = "alice" },
		"empty host":       func(b *Binding) { b.Host = "" },
		"cluster name":     func(b *Binding) { b.ResourceType = ResourceCluster },
		"prefixed *":       func(b *Binding) { b.PatternType, b.ResourceName = PatternPrefixed, "*" },
		"unknown op":       func(b *Binding) { b.Operation = 99 },
		"negative type":    func(b *Binding) { b.ResourceType = -3 },
		"principal no nme": func(b *Binding) { b.Principal = "User:" },
	} {
		b := good
		mut(&b)
		if b.Validate() == nil {
			t.Errorf("%s: accepted %v", name, b)
		}
	}
}

// manyACLs is 10,000 ACLs the way a large deployment has them: per-user
// literal topic and group ACLs, prefixed ACLs per team, some denies.
func manyACLs() []Binding {
	var out []Binding
	for i := 0; len(out) < 10_000; i++ {
		user := fmt.Sprintf("User:user-%d", i)
		out = append(out,
			allow(ResourceTopic, PatternLiteral, fmt.Sprintf("topic-%d", i), user, OpWrite),
			allow(ResourceTopic, PatternLiteral, fmt.Sprintf("topic-%d", i), user, OpRead),
			allow(ResourceGroup, PatternLiteral, fmt.Sprintf("group-%d", i), user, OpRead),
			allow(ResourceTopic, PatternPrefixed, fmt.Sprintf("team-%d.", i%50), user, OpRead),
			deny(ResourceTopic, PatternLiteral, fmt.Sprintf("topic-%d", i+1), user, OpDelete),
		)
	}
	return out
}

func BenchmarkAuthorize10kACLs(b *testing.B) {
	a := New(Config{}, manyACLs())
	b.Run("literal-allow", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !a.Authorize("User:user-777", "10.0.0.1", OpWrite, ResourceTopic, "topic-777") {
				b.Fatal("denied")
			}
		}
	})
	b.Run("prefixed-allow", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if !a.Authorize("User:user-777", "10.0.0.1", OpRead, ResourceTopic, "team-27.orders") {
				b.Fatal("denied")
			}
		}
	})
	b.Run("denied", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if a.Authorize("User:user-777", "10.0.0.1", OpWrite, ResourceTopic, "topic-778") {
				b.Fatal("allowed")
			}
		}
	})
}

// The check allocates nothing, whatever it finds.
func TestAuthorizeAllocatesNothing(t *testing.T) {
	a := New(Config{SuperUsers: []string{"User:admin"}}, manyACLs())
	for _, c := range []struct {
		p, name string
		op      Operation
	}{{"User:user-5", "topic-5", OpWrite}, {"User:user-5", "team-5.x", OpRead}, {"User:user-5", "topic-6", OpDelete}, {"User:admin", "x", OpAlter}} {
		if n := testing.AllocsPerRun(100, func() { a.Authorize(c.p, "10.0.0.1", c.op, ResourceTopic, c.name) }); n != 0 {
			t.Errorf("%s %v %s: %v allocs", c.p, c.op, c.name, n)
		}
	}
}
