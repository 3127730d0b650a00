package testcluster

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/controller"
)

func derefOr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// brokerConfig describes key on broker id (kadm sends a named broker's
// configs to that broker), as that broker applies it.
func brokerConfig(t *testing.T, adm *kadm.Client, id int32, key string) (kadm.Config, error) {
	rcs, err := adm.DescribeBrokerConfigs(ctxT(t, 10*time.Second), id)
	if err != nil {
		return kadm.Config{}, err
	}
	rc, err := rcs.On(strconv.Itoa(int(id)), nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return kadm.Config{}, err
	}
	for _, c := range rc.Configs {
		if c.Key == key {
			return c, nil
		}
	}
	return kadm.Config{}, fmt.Errorf("%s not described", key)
}

// TestDynamicConfigsReachEveryBroker: a cluster-wide default altered
// through one broker is committed by the controller and applied by every
// broker from its image (described with DYNAMIC_DEFAULT_BROKER_CONFIG,
// and in force: message.max.bytes refuses large batches on every leader);
// a per-broker value stays with its broker; a group config set through
// one broker is described by another; the controller refuses what its
// config table refuses, sent to it directly; a restarted broker applies
// them again from the metadata log.
func TestDynamicConfigsReachEveryBroker(t *testing.T) {
	c := Start(t, 3, Options{})
	adm := kadm.NewClient(c.Client())
	createTopic(t, adm, "capped", 3, 1)
	c.WaitFor(10*time.Second, "3 partitions on 3 leaders", func() bool {
		leaders, _ := topicLeaders(t, c, c.Nodes[0], "capped")
		seen := map[int32]bool{}
		for _, l := range leaders {
			seen[l] = l >= 0
		}
		return len(leaders) == 3 && seen[1] && seen[2] && seen[3]
	})

	via := kadm.NewClient(c.clientOf(t, c.Nodes[0]))
	resp, err := via.AlterBrokerConfigs(ctxT(t, 20*time.Second), []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "log.retention.ms", Value: kadm.StringPtr("3600000")},
		{Op: kadm.SetConfig, Name: "message.max.bytes", Value: kadm.StringPtr("1000")},
	})
	if err != nil || resp[0].Err != nil {
		t.Fatalf("cluster default: %v %v", err, resp)
	}
	start := time.Now()
	c.WaitFor(10*time.Second, "the cluster default on every broker", func() bool {
		for _, nd := range c.Nodes {
			cfg, err := brokerConfig(t, adm, nd.ID, "log.retention.ms")
			if err != nil || cfg.MaybeValue() != "3600000" || cfg.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig {
				return false
			}
		}
		return true
	})
	t.Logf("cluster default on all 3 brokers %v after the answer", time.Since(start))

	prod := c.Client(kgo.RecordRetries(0), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(3) {
		r := &kgo.Record{Topic: "capped", Partition: p, Value: make([]byte, 4000)}
		if err := prod.ProduceSync(ctxT(t, 20*time.Second), r).FirstErr(); !errors.Is(err, kerr.MessageTooLarge) {
			t.Errorf("partition %d: %v, want MESSAGE_TOO_LARGE from its leader", p, err)
		}
	}

	resp, err = adm.AlterBrokerConfigs(ctxT(t, 20*time.Second), []kadm.AlterConfig{
		{Op: kadm.SetConfig, Name: "log.retention.ms", Value: kadm.StringPtr("7200000")}}, 2)
	if err != nil || resp[0].Err != nil {
		t.Fatalf("broker 2: %v %v", err, resp)
	}
	c.WaitFor(10*time.Second, "broker 2's own value", func() bool {
		cfg, err := brokerConfig(t, adm, 2, "log.retention.ms")
		return err == nil && cfg.MaybeValue() == "7200000" && cfg.Source == kmsg.ConfigSourceDynamicBrokerConfig
	})
	for _, id := range []int32{1, 3} {
		if cfg, err := brokerConfig(t, adm, id, "log.retention.ms"); err != nil || cfg.MaybeValue() != "3600000" {
			t.Errorf("broker %d: %v %+v, want the cluster default", id, err, cfg)
		}
	}

	// A group config through broker 3, described by broker 1.
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "tuned-group"
	op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	op.Name, op.Value = "consumer.heartbeat.interval.ms", kmsg.StringPtr("6000")
	rr.Configs = append(rr.Configs, op)
	req.Resources = append(req.Resources, rr)
	if r, err := req.RequestWith(ctxT(t, 20*time.Second), c.clientOf(t, c.Nodes[2])); err != nil || r.Resources[0].ErrorCode != 0 {
		t.Fatalf("group config: %v %+v", err, r)
	}
	c.WaitFor(10*time.Second, "the group config on broker 1", func() bool {
		d := kmsg.NewPtrDescribeConfigsRequest()
		dr := kmsg.NewDescribeConfigsRequestResource()
		dr.ResourceType, dr.ResourceName, dr.ConfigNames = kmsg.ConfigResourceTypeGroupConfig, "tuned-group", []string{"consumer.heartbeat.interval.ms"}
		d.Resources = append(d.Resources, dr)
		r, err := d.RequestWith(ctxT(t, 10*time.Second), c.clientOf(t, c.Nodes[0]))
		return err == nil && len(r.Resources[0].Configs) == 1 && r.Resources[0].Configs[0].Source == kmsg.ConfigSourceGroupConfig
	})

	// The controller checks what it commits itself, whatever a broker
	// sends it: changes no broker would forward are refused there.
	ctl := controller.NewClient([]string{c.Nodes[0].ControllerAddr, c.Nodes[1].ControllerAddr, c.Nodes[2].ControllerAddr})
	defer ctl.Close()
	for _, tc := range []struct {
		typ        kmsg.ConfigResourceType
		name, k, v string
		want       *kerr.Error
		msg        string
	}{
		{kmsg.ConfigResourceTypeBroker, "", "num.partitions", "3", kerr.InvalidRequest, "Cannot update these configs dynamically: Set(num.partitions)"},
		{kmsg.ConfigResourceTypeBroker, "1", "log.retention.ms", "soon", kerr.InvalidRequest, "Invalid value soon"},
		{kmsg.ConfigResourceTypeGroupConfig, "g", "consumer.session.timeout.ms", "1000", kerr.InvalidConfig, "must be in the range 45000 to 60000"},
		{kmsg.ConfigResourceTypeTopic, "capped", "retention.ms", "soon", kerr.InvalidConfig, "retention.ms"},
	} {
		req := kmsg.NewPtrIncrementalAlterConfigsRequest()
		rr := kmsg.NewIncrementalAlterConfigsRequestResource()
		rr.ResourceType, rr.ResourceName = tc.typ, tc.name
		op := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		op.Name, op.Value = tc.k, kmsg.StringPtr(tc.v)
		rr.Configs = append(rr.Configs, op)
		req.Resources = append(req.Resources, rr)
		resp, err := ctl.Call(ctxT(t, 20*time.Second), controller.LineAdmin, req)
		if err != nil {
			t.Fatalf("to the controller: %v", err)
		}
		r := resp.(*kmsg.IncrementalAlterConfigsResponse).Resources[0]
		if msg := derefOr(r.ErrorMessage); r.ErrorCode != tc.want.Code || !strings.Contains(msg, tc.msg) {
			t.Errorf("%v %q %s=%s: %v %q, want %v %q", tc.typ, tc.name, tc.k, tc.v, kerr.ErrorForCode(r.ErrorCode), msg, tc.want, tc.msg)
		}
	}

	c.Nodes[2].Restart()
	c.WaitFor(30*time.Second, "broker 3 back with the cluster default", func() bool {
		cfg, err := brokerConfig(t, adm, 3, "message.max.bytes")
		return err == nil && cfg.MaybeValue() == "1000" && cfg.Source == kmsg.ConfigSourceDynamicDefaultBrokerConfig
	})
}
