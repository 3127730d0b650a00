// Package acl is Kafka's authorization model: ACL bindings (a resource
// pattern and an access control entry), the filters DescribeAcls and
// DeleteAcls match them with, and an Authorizer with the semantics of
// Kafka's StandardAuthorizer (org.apache.kafka.metadata.authorizer):
//
//   - a principal in super.users may do anything;
//   - the ACLs that apply to a resource are its literal ACLs, the literal
//     ACLs on the wildcard name "*", and the prefixed ACLs whose prefix
//     starts its name;
//   - of those, an entry applies when its principal is the caller's or
//     "User:*" and its host is the caller's or "*";
//   - a DENY entry for the operation (or ALL) refuses, whatever allows;
//   - an ALLOW entry for the operation, ALL, or an operation that implies
//     it (READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS
//     implies DESCRIBE_CONFIGS) allows;
//   - a resource with no ACLs at all (for anyone) is allowed when
//     allow.everyone.if.no.acl.found is set, refused otherwise.
//
// The package is a leaf: it knows nothing of requests or metadata. The
// engine builds an Authorizer from the ACLs of its metadata image (a new
// one per change: they are immutable) and asks it one question per
// resource of a request.
package acl

import (
	"errors"
	"fmt"
	"strings"
)

// ResourceType is Kafka's resource type code (AclResourceType /
// org.apache.kafka.common.resource.ResourceType).
type ResourceType int8

const (
	ResourceUnknown         ResourceType = 0
	ResourceAny             ResourceType = 1 // filters only
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
	numResourceTypes                     = 8
)

// ClusterName is the only name a CLUSTER resource has.
const ClusterName = "kafka-cluster"

// Wildcard is the literal resource name, principal and host that match
// every one.
const (
	WildcardResource  = "*"
	WildcardPrincipal = "User:*"
	WildcardHost      = "*"
)

// PatternType is how a binding's resource name matches (Kafka's
// PatternType).
type PatternType int8

const (
	PatternUnknown  PatternType = 0
	PatternAny      PatternType = 1 // filters only: literal or prefixed, name compared exactly
	PatternMatch    PatternType = 2 // filters only: every pattern that matches the name
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

// Operation is Kafka's AclOperation code.
type Operation int8

const (
	OpUnknown         Operation = 0
	OpAny             Operation = 1 // filters only
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
	numOperations               = 15
)

// Permission is Kafka's AclPermissionType code.
type Permission int8

const (
	PermissionUnknown Permission = 0
	PermissionAny     Permission = 1 // filters only
	PermissionDeny    Permission = 2
	PermissionAllow   Permission = 3
)

// Binding is one ACL: a resource pattern and an access control entry.
type Binding struct {
	ResourceType ResourceType
	ResourceName string
	PatternType  PatternType // literal or prefixed
	Principal    string      // "Type:Name", e.g. User:alice, or User:*
	Host         string      // an address, or * for any
	Operation    Operation
	Permission   Permission // allow or deny
}

// Validate checks a binding is one that may be created: concrete types
// (no ANY, MATCH or UNKNOWN), a non-empty name, a principal of the form
// Type:Name and a host. It reports why not.
func (b Binding) Validate() error {
	switch {
	case b.ResourceType <= ResourceAny || b.ResourceType >= numResourceTypes:
		return fmt.Errorf("resource type %d cannot be given an ACL", b.ResourceType)
	case b.PatternType != PatternLiteral && b.PatternType != PatternPrefixed:
		return fmt.Errorf("pattern type %d: only LITERAL and PREFIXED ACLs can be created", b.PatternType)
	case b.Operation <= OpAny || b.Operation >= numOperations:
		return fmt.Errorf("operation %d cannot be given an ACL", b.Operation)
	case b.Permission != PermissionAllow && b.Permission != PermissionDeny:
		return fmt.Errorf("permission %d: only ALLOW and DENY", b.Permission)
	case b.ResourceName == "":
		return errors.New("resource name is empty")
	case b.Host == "":
		return errors.New("host is empty")
	case b.ResourceType == ResourceCluster && b.ResourceName != ClusterName:
		return fmt.Errorf("the cluster resource is named %s, not %q", ClusterName, b.ResourceName)
	case b.PatternType == PatternPrefixed && b.ResourceName == WildcardResource:
		return errors.New("a prefixed ACL on * is a literal ACL on *")
	}
	return ValidPrincipal(b.Principal)
}

// ValidPrincipal checks Kafka's "Type:Name" form.
func ValidPrincipal(p string) error {
	i := strings.IndexByte(p, ':')
	if i <= 0 || i == len(p)-1 {
		return fmt.Errorf("principal %q is not of the form Type:Name", p)
	}
	return nil
}

// Filter selects bindings, as DescribeAcls and DeleteAcls do (Kafka's
// AclBindingFilter). A nil string matches any value; the ANY codes match
// any value of their field.
type Filter struct {
	ResourceType ResourceType
	ResourceName *string
	PatternType  PatternType // any, match, literal or prefixed
	Principal    *string
	Host         *string
	Operation    Operation
	Permission   Permission
}

// Validate refuses a filter whose codes are unknown (UNKNOWN matches
// nothing in Kafka and is an error in a request).
func (f Filter) Validate() error {
	switch {
	case f.ResourceType <= ResourceUnknown || f.ResourceType >= numResourceTypes:
		return fmt.Errorf("filter resource type %d", f.ResourceType)
	case f.PatternType <= PatternUnknown || f.PatternType > PatternPrefixed:
		return fmt.Errorf("filter pattern type %d", f.PatternType)
	case f.Operation <= OpUnknown || f.Operation >= numOperations:
		return fmt.Errorf("filter operation %d", f.Operation)
	case f.Permission <= PermissionUnknown || f.Permission > PermissionAllow:
		return fmt.Errorf("filter permission %d", f.Permission)
	}
	return nil
}

// Matches reports whether the filter selects b.
func (f Filter) Matches(b Binding) bool {
	return f.matchesPattern(b) &&
		(f.Principal == nil || *f.Principal == b.Principal) &&
		(f.Host == nil || *f.Host == b.Host) &&
		(f.Operation == OpAny || f.Operation == b.Operation) &&
		(f.Permission == PermissionAny || f.Permission == b.Permission)
}

// matchesPattern is Kafka's ResourcePatternFilter.matches: with MATCH and
// a name, every pattern that would apply to that name is selected (the
// literal name, the wildcard, prefixes of it).
func (f Filter) matchesPattern(b Binding) bool {
	if f.ResourceType != ResourceAny && f.ResourceType != b.ResourceType {
		return false
	}
	if f.PatternType != PatternAny && f.PatternType != PatternMatch && f.PatternType != b.PatternType {
		return false
	}
	if f.ResourceName == nil {
		return true
	}
	name := *f.ResourceName
	if f.PatternType != PatternMatch {
		return name == b.ResourceName
	}
	if b.PatternType == PatternPrefixed {
		return strings.HasPrefix(name, b.ResourceName)
	}
	return name == b.ResourceName || b.ResourceName == WildcardResource
}

// implies reports whether an ALLOW of granted allows op.
func implies(granted, op Operation) bool {
	switch {
	case granted == op || granted == OpAll:
		return true
	case op == OpDescribe:
		return granted == OpRead || granted == OpWrite || granted == OpDelete || granted == OpAlter
	case op == OpDescribeConfigs:
		return granted == OpAlterConfigs
	}
	return false
}

var resourceNames = [...]string{"UNKNOWN", "ANY", "TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"}

func (t ResourceType) String() string {
	if t >= 0 && int(t) < len(resourceNames) {
		return resourceNames[t]
	}
	return fmt.Sprintf("ResourceType(%d)", int8(t))
}

var opNames = [...]string{"UNKNOWN", "ANY", "ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE",
	"CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "CREATE_TOKENS", "DESCRIBE_TOKENS"}

func (o Operation) String() string {
	if o >= 0 && int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("Operation(%d)", int8(o))
}

func (b Binding) String() string {
	perm, pat := "ALLOW", "LITERAL"
	if b.Permission == PermissionDeny {
		perm = "DENY"
	}
	if b.PatternType == PatternPrefixed {
		pat = "PREFIXED"
	}
	return fmt.Sprintf("%s %s %s on %s:%s:%s from %s", b.Principal, perm, b.Operation, b.ResourceType, pat, b.ResourceName, b.Host)
}
