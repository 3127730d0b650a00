package acl

import "slices"

// Config is the authorizer's broker configuration.
type Config struct {
	// SuperUsers are principals ("User:admin") allowed everything
	// (super.users, semicolon-separated in Kafka's file).
	SuperUsers []string
	// AllowIfNoACL allows any operation on a resource that has no ACL at
	// all (allow.everyone.if.no.acl.found).
	AllowIfNoACL bool
}

// Authorizer answers whether a principal may perform an operation on a
// resource. It is immutable: build a new one when the ACLs change and
// swap it in atomically. Authorize allocates nothing.
type Authorizer struct {
	super        map[string]bool
	allowIfNoACL bool
	// patterns holds every ACL, indexed by its resource pattern.
	// Invariant: no node is empty.
	patterns map[patternKey]*node
	// prefixLens[t] lists, ascending and without duplicates, the lengths
	// of the prefixed patterns of resource type t, so a check looks up
	// only prefixes that some ACL has.
	prefixLens [numResourceTypes][]int
	count      int
}

type patternKey struct {
	typ      ResourceType
	prefixed bool
	name     string
}

// node is the ACLs of one resource pattern, by principal (User:* among
// them).
type node struct {
	byPrincipal map[string][]entry
}

// entry is the part of an ACL left once its pattern and principal are
// known.
type entry struct {
	host string
	op   Operation
	deny bool
}

// New builds an authorizer over acls, which must be valid (Validate).
func New(cfg Config, acls []Binding) *Authorizer {
	a := &Authorizer{super: map[string]bool{}, allowIfNoACL: cfg.AllowIfNoACL, patterns: map[patternKey]*node{}, count: len(acls)}
	for _, p := range cfg.SuperUsers {
		a.super[p] = true
	}
	for _, b := range acls {
		a.add(b)
	}
	return a
}

func (a *Authorizer) add(b Binding) {
	if b.ResourceType < 0 || b.ResourceType >= numResourceTypes {
		return
	}
	k := patternKey{typ: b.ResourceType, prefixed: b.PatternType == PatternPrefixed, name: b.ResourceName}
	n := a.patterns[k]
	if n == nil {
		n = &node{byPrincipal: map[string][]entry{}}
		a.patterns[k] = n
	}
	n.byPrincipal[b.Principal] = append(n.byPrincipal[b.Principal], entry{host: b.Host, op: b.Operation, deny: b.Permission == PermissionDeny})
	if k.prefixed {
		lens := a.prefixLens[b.ResourceType]
		if i, found := slices.BinarySearch(lens, len(b.ResourceName)); !found {
			a.prefixLens[b.ResourceType] = slices.Insert(lens, i, len(b.ResourceName))
		}
	}
}

// Len returns the number of ACLs.
func (a *Authorizer) Len() int { return a.count }

// IsSuperUser reports whether principal is in super.users.
func (a *Authorizer) IsSuperUser(principal string) bool { return a.super[principal] }

// Authorize reports whether principal, connected from host, may perform op
// on the resource (typ, name).
func (a *Authorizer) Authorize(principal, host string, op Operation, typ ResourceType, name string) bool {
	if a.super[principal] {
		return true
	}
	if typ < 0 || typ >= numResourceTypes {
		return false
	}
	var v verdict
	v.check(a.patterns[patternKey{typ: typ, name: name}], principal, host, op)
	if name != WildcardResource {
		v.check(a.patterns[patternKey{typ: typ, name: WildcardResource}], principal, host, op)
	}
	for _, l := range a.prefixLens[typ] {
		if l > len(name) || v.denied {
			break
		}
		v.check(a.patterns[patternKey{typ: typ, prefixed: true, name: name[:l]}], principal, host, op)
	}
	switch {
	case v.denied:
		return false
	case v.allowed:
		return true
	}
	return !v.anyACL && a.allowIfNoACL
}

// verdict accumulates what the ACLs of a resource say.
type verdict struct {
	anyACL  bool // the resource has an ACL, for anyone
	allowed bool
	denied  bool
}

func (v *verdict) check(n *node, principal, host string, op Operation) {
	if n == nil || v.denied {
		return
	}
	v.anyACL = true
	v.entries(n.byPrincipal[principal], host, op)
	if principal != WildcardPrincipal {
		v.entries(n.byPrincipal[WildcardPrincipal], host, op)
	}
}

func (v *verdict) entries(es []entry, host string, op Operation) {
	for i := range es {
		e := &es[i]
		if e.host != WildcardHost && e.host != host {
			continue
		}
		if e.deny {
			// A DENY refuses only the operation it names (or ALL): a deny
			// of READ does not refuse DESCRIBE.
			if e.op == op || e.op == OpAll {
				v.denied = true
				return
			}
			continue
		}
		if implies(e.op, op) {
			v.allowed = true
		}
	}
}
