package testcluster

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine"
)

// TestACLsAndQuotasInCluster: ACLs and client quotas made through one
// broker are forwarded to the active controller, committed to the
// metadata log, and every broker's image has them (DescribeAcls and
// DescribeClientQuotas answered by each node agree); a restarted node
// gets them back from the log. The brokers' PLAINTEXT principal
// (User:ANONYMOUS) is a super user so that followers may fetch: a secured
// cluster authenticates its inter-broker listener instead.
func TestACLsAndQuotasInCluster(t *testing.T) {
	c := StartInProcess(t, 3, "authorizer.class.name="+engine.StandardAuthorizerClass, "super.users=User:ANONYMOUS")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := func(nd *InProcNode) *kadm.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(nd.Addr))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return kadm.NewClient(cl)
	}
	acls := kadm.NewACLs().Allow("User:alice").AllowHosts("*").Topics("orders").Groups("g").
		ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead, kadm.OpDescribe)
	if res, err := client(c.Nodes[1]).CreateACLs(ctx, acls); err != nil || len(res) == 0 || res[0].Err != nil {
		t.Fatalf("create through node 2: %v %+v", err, res)
	}
	if _, err := client(c.Nodes[2]).AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{
		Entity: kadm.ClientQuotaEntity{{Type: "user", Name: kadm.StringPtr("alice")}},
		Ops:    []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Value: 4096}}}}); err != nil {
		t.Fatalf("quota through node 3: %v", err)
	}
	everyNode := func(wantACLs, wantQuotas int) {
		t.Helper()
		c.WaitFor(15*time.Second, "every node's image has the ACLs and quotas", func() bool {
			for _, nd := range c.Nodes {
				if describeACLCount(t, ctx, nd) != wantACLs || quotaCount(nd) != wantQuotas {
					return false
				}
			}
			return true
		})
	}
	everyNode(4, 1)
	c.Nodes[2].Stop(t)
	c.Nodes[2].Start(t)
	everyNode(4, 1)
	if res, err := client(c.Nodes[0]).DeleteACLs(ctx, acls); err != nil || len(res) == 0 {
		t.Fatalf("delete through node 1: %v", err)
	}
	everyNode(0, 1)
}

func describeACLCount(t *testing.T, ctx context.Context, nd *InProcNode) int {
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType, req.ResourcePatternType, req.Operation, req.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	resp := kmsg.NewPtrDescribeACLsResponse()
	if err := askNode(nd.Addr, 1, req, resp); err != nil || resp.ErrorCode != 0 {
		return -1
	}
	n := 0
	for _, r := range resp.Resources {
		n += len(r.ACLs)
	}
	return n
}

func quotaCount(nd *InProcNode) int {
	req := kmsg.NewPtrDescribeClientQuotasRequest()
	resp := kmsg.NewPtrDescribeClientQuotasResponse()
	if err := askNode(nd.Addr, 0, req, resp); err != nil || resp.ErrorCode != 0 {
		return -1
	}
	return len(resp.Entries)
}

// askNode sends one request (at version v, not flexible: header v1) to exactly the node
// at addr and reads its answer, so each node's own image is what answers.
func askNode(addr string, v int16, req kmsg.Request, resp kmsg.Response) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	req.SetVersion(v)
	body := binary.BigEndian.AppendUint16(nil, uint16(req.Key()))
	body = binary.BigEndian.AppendUint16(body, uint16(v))
	body = binary.BigEndian.AppendUint32(body, 7)
	body = binary.BigEndian.AppendUint16(body, 0xffff) // null client id
	body = req.AppendTo(body)
	if _, err := c.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return err
	}
	frame := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(c, frame); err != nil {
		return err
	}
	resp.SetVersion(v)
	return resp.ReadFrom(frame[4:]) // after the correlation id
}
