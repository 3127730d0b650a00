package group

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Description is DescribeGroups' answer for one group.
type Description struct {
	ErrorCode    int16 // NOT_COORDINATOR when the group is not coordinated here
	State        string
	ProtocolType string
	Protocol     string // only while Stable
	Members      []MemberDescription
}

// MemberDescription is one member of a described group; Metadata and
// Assignment are empty unless the group is Stable (mid-rebalance they are
// not meaningful).
type MemberDescription struct {
	MemberID   string
	InstanceID string // "" for a dynamic member
	ClientID   string
	ClientHost string
	Metadata   []byte
	Assignment []byte
}

// Describe describes a group; one that does not exist is Dead.
func (c *Coordinator) Describe(name string) Description {
	d := Description{State: groupDead.String(), Members: []MemberDescription{}}
	// "" is a valid name here: commits may use it (as in Kafka).
	g, m := c.lockGroup(name, false)
	if g == nil {
		d.ErrorCode = m.code(0, 0)
		return d
	}
	defer g.unlock()
	if g.cons != nil {
		return g.describeConsumerAsClassic()
	}
	d.State = g.state.String()
	d.ProtocolType = g.protocolType
	stable := g.state == groupStable
	if stable {
		d.Protocol = g.protocol
	}
	for _, m := range g.sortedMembers() {
		dm := MemberDescription{MemberID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
			Metadata: []byte{}, Assignment: []byte{}}
		if stable {
			dm.Metadata = m.metadataFor(g.protocol)
			if m.assignment != nil {
				dm.Assignment = m.assignment
			}
		}
		d.Members = append(d.Members, dm)
	}
	return d
}

// Listing is one group in ListGroups.
type Listing struct {
	Group        string
	ProtocolType string
	State        string
	Type         string // TypeClassic or TypeConsumer
}

// List lists the live groups coordinated here, sorted by name.
func (c *Coordinator) List() []Listing {
	var out []Listing
	c.eachGroup(func(g *group) {
		out = append(out, g.listing())
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// DeleteGroup deletes an Empty group: its offsets and metadata are
// tombstoned, then it is gone. GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, or
// NOT_COORDINATOR (tombstones not written, or group not coordinated here).
func (c *Coordinator) DeleteGroup(name string) int16 {
	g, m := c.lockGroup(name, false)
	if g == nil {
		return m.code(kerr.GroupIDNotFound.Code, kerr.GroupIDNotFound.Code)
	}
	defer g.unlock()
	return g.deleteGroup()
}

// deleteGroup tombstones an Empty group's offsets and metadata and
// removes it.
func (g *group) deleteGroup() int16 {
	if g.state != groupEmpty {
		return kerr.NonEmptyGroup.Code
	}
	recs := make([]offsetsRecord, 0, len(g.offsets)+1)
	for tp := range g.offsets {
		recs = append(recs, offsetCommitRecord(g.name, tp, nil))
	}
	recs = append(recs, g.metadataTombstones()...)
	if err := g.append(recs); err != nil {
		g.c.log.Error("deleting group failed", "group", g.name, "err", err)
		return appendErrorCode(err, false)
	}
	g.offsets = map[offsetTP]*committedOffset{}
	g.markDead()
	return 0
}
