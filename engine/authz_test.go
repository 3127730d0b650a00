package engine_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/engine"
	"github.com/sluice-broker/sluice/internal/testbroker"
)

// startSecured starts a broker with the StandardAuthorizer on, User:admin
// a super user, and principals named by client id (SetTestPrincipal),
// with topics orders and secret created by admin.
func startSecured(t *testing.T, mut ...func(*engine.Config)) (*testbroker.Broker, *kadm.Client) {
	t.Helper()
	engine.SetTestPrincipal(t)
	tb := testbroker.Start(t, append([]func(*engine.Config){func(c *engine.Config) {
		c.Authz.AuthorizerClass = engine.StandardAuthorizerClass
		c.Authz.SuperUsers = "User:admin"
	}}, mut...)...)
	adm := kadm.NewClient(tb.Client(t, kgo.ClientID("admin")))
	if _, err := adm.CreateTopics(adminCtx(t), 2, 1, nil, "orders", "secret"); err != nil {
		t.Fatal(err)
	}
	return tb, adm
}

func addACLs(t *testing.T, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	res, err := adm.CreateACLs(adminCtx(t), b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create acl %+v: %v", r, r.Err)
		}
	}
}

func request[R kmsg.Response](t *testing.T, cl *kgo.Client, req kmsg.Request) R {
	t.Helper()
	resp, err := cl.Request(adminCtx(t), req)
	if err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp.(R)
}

func TestAuthzProduceFetchMetadata(t *testing.T) {
	tb, adm := startSecured(t)
	addACLs(t, adm, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpWrite, kadm.OpRead).
		ResourcePatternType(kadm.ACLPatternLiteral))
	addACLs(t, adm, kadm.NewACLs().Allow("User:alice").Groups("g1").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternLiteral))

	// admin (super user) writes a secret.
	admin := tb.Client(t, kgo.ClientID("admin"))
	if err := admin.ProduceSync(adminCtx(t), &kgo.Record{Topic: "secret", Value: []byte("s3cr3t")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	alice := tb.Client(t, kgo.ClientID("alice"), kgo.RequestRetries(0))

	// Metadata of all topics shows only what alice may describe.
	md := request[*kmsg.MetadataResponse](t, alice, kmsg.NewPtrMetadataRequest())
	var names []string
	for _, tp := range md.Topics {
		names = append(names, *tp.Topic)
	}
	if !slices.Equal(names, []string{"orders"}) {
		t.Fatalf("alice sees topics %v", names)
	}
	// Named: TOPIC_AUTHORIZATION_FAILED and no partitions.
	mreq := kmsg.NewPtrMetadataRequest()
	for _, n := range []string{"secret", "orders", "unknown-and-not-creatable"} {
		mt := kmsg.NewMetadataRequestTopic()
		mt.Topic = kmsg.StringPtr(n)
		mreq.Topics = append(mreq.Topics, mt)
	}
	mreq.AllowAutoTopicCreation = true
	md = request[*kmsg.MetadataResponse](t, alice, mreq)
	got := map[string]int16{}
	for _, tp := range md.Topics {
		got[*tp.Topic] = tp.ErrorCode
		if tp.ErrorCode != 0 && len(tp.Partitions) > 0 {
			t.Errorf("%s: partitions leak with error %d", *tp.Topic, tp.ErrorCode)
		}
	}
	want := map[string]int16{"secret": kerr.TopicAuthorizationFailed.Code, "orders": 0, "unknown-and-not-creatable": kerr.TopicAuthorizationFailed.Code}
	if !maps_equal(got, want) {
		t.Fatalf("named metadata: %v, want %v", got, want)
	}
	if tb.Broker.Topic("unknown-and-not-creatable") != nil {
		t.Fatal("alice auto-created a topic without CREATE")
	}

	// Produce: orders yes, secret no (and nothing written to it).
	if err := alice.ProduceSync(adminCtx(t), &kgo.Record{Topic: "orders", Value: []byte("hi")}).FirstErr(); err != nil {
		t.Fatalf("produce to orders: %v", err)
	}
	preq := kmsg.NewPtrProduceRequest()
	preq.Acks, preq.TimeoutMillis = 1, 5000
	for _, n := range []string{"orders", "secret"} {
		pt := kmsg.NewProduceRequestTopic()
		pt.Topic = n
		pp := kmsg.NewProduceRequestTopicPartition()
		pp.Records = oneBatch(t)
		pt.Partitions = append(pt.Partitions, pp)
		preq.Topics = append(preq.Topics, pt)
	}
	presp := request[*kmsg.ProduceResponse](t, alice, preq)
	codes := map[string]int16{}
	for _, tp := range presp.Topics {
		codes[tp.Topic] = tp.Partitions[0].ErrorCode
	}
	if codes["orders"] != 0 || codes["secret"] != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("produce codes %v", codes)
	}
	if hw := tb.Broker.Topic("secret").Partition(0).HighWatermark() + tb.Broker.Topic("secret").Partition(1).HighWatermark(); hw != 1 {
		t.Fatalf("secret has %d records, want admin's 1", hw)
	}

	// Fetch: secret answers TOPIC_AUTHORIZATION_FAILED with no records,
	// by name (v12) and by id (v13+).
	for _, v := range []int16{12, 16} {
		rc := dialRaw(t, tb.Addr)
		rc.fmt = kmsg.NewRequestFormatter(kmsg.FormatterClientID("alice"))
		freq := kmsg.NewPtrFetchRequest()
		freq.ReplicaID, freq.MaxBytes = -1, 1<<20
		names := map[[16]byte]string{}
		for _, n := range []string{"orders", "secret"} {
			ft := kmsg.NewFetchRequestTopic()
			ft.Topic, ft.TopicID = n, tb.Broker.Topic(n).ID
			names[ft.TopicID] = n
			for p := int32(0); p < 2; p++ {
				fp := kmsg.NewFetchRequestTopicPartition()
				fp.Partition, fp.PartitionMaxBytes = p, 1<<20
				ft.Partitions = append(ft.Partitions, fp)
			}
			freq.Topics = append(freq.Topics, ft)
		}
		fresp := do[*kmsg.FetchResponse](rc, freq, v)
		seen := 0
		for _, tp := range fresp.Topics {
			name := tp.Topic
			if v >= 13 {
				name = names[tp.TopicID]
			}
			for _, p := range tp.Partitions {
				seen++
				switch {
				case name == "secret" && (p.ErrorCode != kerr.TopicAuthorizationFailed.Code || len(p.RecordBatches) > 0):
					t.Errorf("v%d fetch secret/%d: code %d, %d bytes", v, p.Partition, p.ErrorCode, len(p.RecordBatches))
				case name == "orders" && p.ErrorCode != 0:
					t.Errorf("v%d fetch orders/%d: code %d", v, p.Partition, p.ErrorCode)
				case name != "orders" && name != "secret":
					t.Errorf("v%d fetch answered topic %q", v, name)
				}
			}
		}
		if seen != 4 {
			t.Errorf("v%d fetch answered %d partitions, want 4", v, seen)
		}
	}

	// A consumer group alice may read works; another does not.
	c := tb.Client(t, kgo.ClientID("alice"), kgo.ConsumeTopics("orders"), kgo.ConsumerGroup("g1"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if fs := c.PollFetches(ctx); fs.NumRecords() == 0 {
		t.Fatalf("alice in g1 read nothing: %v", fs.Errors())
	}
	jreq := kmsg.NewPtrFindCoordinatorRequest()
	jreq.CoordinatorKey = "g2"
	jreq.Version = 3
	if fc := request[*kmsg.FindCoordinatorResponse](t, alice, jreq); fc.ErrorCode != kerr.GroupAuthorizationFailed.Code {
		t.Fatalf("find coordinator of g2: %d", fc.ErrorCode)
	}
}

func maps_equal(a, b map[string]int16) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// oneBatch is a one-record batch as a plain producer sends it.
func oneBatch(t *testing.T) []byte { return engineBatch(t, []byte("x")) }

func engineBatch(t *testing.T, value []byte) []byte {
	return engine.BuildTestBatch(t, engine.TestBatchOpts{ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1, FirstTimestamp: time.Now().UnixMilli()},
		engine.TestRecord{Value: value})
}

func TestAuthzAdminAPIs(t *testing.T) {
	tb, adm := startSecured(t)
	alice := kadm.NewClient(tb.Client(t, kgo.ClientID("alice"), kgo.RequestRetries(0)))
	ctx := adminCtx(t)

	// Without ACLs alice may do nothing.
	if _, err := alice.CreateTopic(ctx, 1, 1, nil, "mine"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("create topic: %v", err)
	}
	if res, _ := alice.DeleteTopics(ctx, "secret"); res["secret"].Err == nil || !errors.Is(res["secret"].Err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("delete topic: %+v", res["secret"])
	}
	if tb.Broker.Topic("secret") == nil {
		t.Fatal("secret deleted")
	}
	dc, err := alice.DescribeTopicConfigs(ctx, "secret")
	if len(dc) == 1 && err == nil {
		err = dc[0].Err
	}
	if !errors.Is(err, kerr.TopicAuthorizationFailed) || len(dc) == 1 && len(dc[0].Configs) > 0 {
		t.Fatalf("describe configs: %v %+v", err, dc)
	}
	if _, err := alice.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("x").Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternLiteral)); err != nil {
		t.Fatal(err)
	} else if res, _ := alice.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").Topics("x").Operations(kadm.OpAll).ResourcePatternType(kadm.ACLPatternLiteral)); len(res) != 1 || !errors.Is(res[0].Err, kerr.ClusterAuthorizationFailed) {
		t.Fatalf("alice created an ACL: %+v", res)
	}
	dreq := kmsg.NewPtrDescribeACLsRequest()
	dreq.ResourceType, dreq.ResourcePatternType, dreq.Operation, dreq.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	if da := request[*kmsg.DescribeACLsResponse](t, tb.Client(t, kgo.ClientID("alice")), dreq); da.ErrorCode != kerr.ClusterAuthorizationFailed.Code || len(da.Resources) > 0 {
		t.Fatalf("describe acls: %+v", da)
	}

	// Prefixed CREATE lets alice create app.* topics only.
	addACLs(t, adm, kadm.NewACLs().Allow("User:alice").Topics("app.").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpCreate, kadm.OpDelete))
	if _, err := alice.CreateTopic(ctx, 1, 1, nil, "app.events"); err != nil {
		t.Fatalf("create app.events: %v", err)
	}
	if _, err := alice.CreateTopic(ctx, 1, 1, nil, "other"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("create other: %v", err)
	}
	// A deny wins over the prefixed allow.
	addACLs(t, adm, kadm.NewACLs().Deny("User:alice").Topics("app.events").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpDelete))
	if res, _ := alice.DeleteTopics(ctx, "app.events"); !errors.Is(res["app.events"].Err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("delete denied topic: %+v", res["app.events"])
	}

	// admin lists, then removes alice's ACLs; her next create fails.
	admin := tb.Client(t, kgo.ClientID("admin"))
	dreq.Principal = kmsg.StringPtr("User:alice")
	if da := request[*kmsg.DescribeACLsResponse](t, admin, dreq); da.ErrorCode != 0 || len(da.Resources) != 2 {
		t.Fatalf("describe: %+v", da)
	}
	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourcePatternType, f.Operation, f.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	f.Principal = kmsg.StringPtr("User:alice")
	del.Filters = append(del.Filters, f)
	if dr := request[*kmsg.DeleteACLsResponse](t, admin, del); len(dr.Results) != 1 || dr.Results[0].ErrorCode != 0 || len(dr.Results[0].MatchingACLs) != 3 {
		t.Fatalf("delete: %+v", dr)
	}
	if _, err := alice.CreateTopic(ctx, 1, 1, nil, "app.more"); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("create after revoke: %v", err)
	}
	// ACLs survive a restart (they are in the metadata log).
	addACLs(t, adm, kadm.NewACLs().Allow("User:bob").Topics("orders").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead))
	tb.Restart(t)
	if n := tb.Broker.ACLCount(); n != 1 {
		t.Fatalf("%d ACLs after restart", n)
	}
}

// Regression: a full Metadata answer came from the broker-wide cache of
// encoded answers (every topic) once another client had filled it, so an
// authorized principal's listing showed topics it may not describe.
func TestAuthzFullMetadataNotFromTheSharedCache(t *testing.T) {
	tb, adm := startSecured(t)
	addACLs(t, adm, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral))
	admin := tb.Client(t, kgo.ClientID("admin"))
	alice := tb.Client(t, kgo.ClientID("alice"))
	for i := 0; i < 2; i++ { // the second round finds the cache filled
		if md := request[*kmsg.MetadataResponse](t, admin, kmsg.NewPtrMetadataRequest()); len(md.Topics) < 3 {
			t.Fatalf("admin sees %d topics", len(md.Topics))
		}
		md := request[*kmsg.MetadataResponse](t, alice, kmsg.NewPtrMetadataRequest())
		if len(md.Topics) != 1 || *md.Topics[0].Topic != "orders" {
			t.Fatalf("round %d: alice sees %d topics", i, len(md.Topics))
		}
	}
}

// Authorized-operation bitfields (Metadata v8+, DescribeCluster) report
// what the principal may do, implied DESCRIBE included.
func TestAuthzAuthorizedOperations(t *testing.T) {
	tb, adm := startSecured(t)
	addACLs(t, adm, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpRead, kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral))
	addACLs(t, adm, kadm.NewACLs().Allow("User:alice").Clusters().Operations(kadm.OpIdempotentWrite).ResourcePatternType(kadm.ACLPatternLiteral))
	alice := tb.Client(t, kgo.ClientID("alice"))
	req := kmsg.NewPtrMetadataRequest()
	req.IncludeClusterAuthorizedOperations, req.IncludeTopicAuthorizedOperations = true, true
	md := request[*kmsg.MetadataResponse](t, alice, req)
	const read, write, describe, idempotentWrite = 1 << 3, 1 << 4, 1 << 8, 1 << 12
	if len(md.Topics) != 1 || md.Topics[0].AuthorizedOperations != read|write|describe {
		t.Fatalf("topics %+v", md.Topics)
	}
	// (Metadata v11+ has no cluster bitfield; DescribeCluster has it.)
	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeClusterAuthorizedOperations = true
	if resp := request[*kmsg.DescribeClusterResponse](t, alice, dc); resp.ClusterAuthorizedOperations != idempotentWrite {
		t.Fatalf("DescribeCluster operations %b", resp.ClusterAuthorizedOperations)
	}
}

// TestACLAPIsSecurityDisabledWithoutAuthorizer: with no
// authorizer.class.name, DescribeAcls, CreateAcls and DeleteAcls answer
// SECURITY_DISABLED, as Kafka's brokers do, and no ACL is written.
func TestACLAPIsSecurityDisabledWithoutAuthorizer(t *testing.T) {
	tb := testbroker.Start(t)
	cl := tb.Client(t)
	adm := kadm.NewClient(cl)
	b := kadm.NewACLs().Allow("User:alice").AllowHosts("*").Topics("orders").
		ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpRead)
	created, err := adm.CreateACLs(adminCtx(t), b)
	if err != nil || len(created) != 1 || !errors.Is(created[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("CreateAcls: %v %+v, want SECURITY_DISABLED", err, created)
	}
	d := kmsg.NewPtrDescribeACLsRequest()
	d.ResourceType, d.ResourcePatternType, d.Operation, d.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	if resp := request[*kmsg.DescribeACLsResponse](t, cl, d); resp.ErrorCode != kerr.SecurityDisabled.Code {
		t.Fatalf("DescribeAcls answered %d, want SECURITY_DISABLED", resp.ErrorCode)
	}
	deleted, err := adm.DeleteACLs(adminCtx(t), b)
	if err != nil || len(deleted) != 1 || !errors.Is(deleted[0].Err, kerr.SecurityDisabled) {
		t.Fatalf("DeleteAcls: %v %+v, want SECURITY_DISABLED", err, deleted)
	}
	if n := tb.Broker.ACLCount(); n != 0 {
		t.Fatalf("%d ACLs written without an authorizer", n)
	}
}

// TestShareFetchAndAcknowledgeRefuseOnlyDeniedTopics: a ShareFetch and a
// ShareAcknowledge naming a topic the member may read and one it may not
// answer the second's partitions TOPIC_AUTHORIZATION_FAILED and serve the
// first (records acquired, then acknowledged), as Kafka does, instead of
// refusing the whole request.
func TestShareFetchAndAcknowledgeRefuseOnlyDeniedTopics(t *testing.T) {
	tb, adm := startSecured(t, func(c *engine.Config) { c.ShareStateTopicPartitions = 2 })
	addACLs(t, adm, kadm.NewACLs().Allow("User:reader").Topics("orders").Groups("sg").Operations(kadm.OpRead).
		ResourcePatternType(kadm.ACLPatternLiteral))
	admin := tb.Client(t, kgo.ClientID("admin"))
	setGroupConfig(t, admin, "sg", map[string]string{"share.auto.offset.reset": "earliest"})
	for _, topic := range []string{"orders", "secret"} {
		if err := admin.ProduceSync(adminCtx(t), &kgo.Record{Topic: topic, Partition: 0, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	orders, secret := tb.Broker.Topic("orders").ID, tb.Broker.Topic("secret").ID
	reader := tb.Client(t, kgo.ClientID("reader"), kgo.RequestRetries(0))

	fetch := kmsg.NewPtrShareFetchRequest()
	fetch.GroupID, fetch.MemberID, fetch.ShareSessionEpoch = kmsg.StringPtr("sg"), kmsg.StringPtr("m1"), 0
	fetch.MaxRecords, fetch.MaxBytes, fetch.MaxWaitMillis = 100, 1<<20, 2000
	for _, id := range [][16]byte{orders, secret} {
		fetch.Topics = append(fetch.Topics, kmsg.ShareFetchRequestTopic{TopicID: id,
			Partitions: []kmsg.ShareFetchRequestTopicPartition{{Partition: 0}, {Partition: 1}}})
	}
	fr := request[*kmsg.ShareFetchResponse](t, reader, fetch)
	if fr.ErrorCode != 0 {
		t.Fatalf("ShareFetch refused whole: %d", fr.ErrorCode)
	}
	acquired, denied, acquiredFrom := 0, 0, int32(-1)
	for _, tp := range fr.Topics {
		for _, p := range tp.Partitions {
			switch {
			case tp.TopicID == secret && p.ErrorCode == kerr.TopicAuthorizationFailed.Code:
				denied++
			case tp.TopicID == orders && p.ErrorCode == 0:
				for _, a := range p.AcquiredRecords {
					acquired += int(a.LastOffset - a.FirstOffset + 1)
					acquiredFrom = p.Partition
				}
			default:
				t.Fatalf("ShareFetch partition %x/%d answered %d", tp.TopicID[:4], p.Partition, p.ErrorCode)
			}
		}
	}
	if acquired != 1 || denied != 2 {
		t.Fatalf("acquired %d records of orders (want 1), %d secret partitions denied (want 2)", acquired, denied)
	}

	ack := kmsg.NewPtrShareAcknowledgeRequest()
	ack.GroupID, ack.MemberID, ack.ShareSessionEpoch = kmsg.StringPtr("sg"), kmsg.StringPtr("m1"), 1
	for _, id := range [][16]byte{orders, secret} {
		ack.Topics = append(ack.Topics, kmsg.ShareAcknowledgeRequestTopic{TopicID: id, Partitions: []kmsg.ShareAcknowledgeRequestTopicPartition{{Partition: acquiredFrom,
			AcknowledgementBatches: []kmsg.ShareAcknowledgeRequestTopicPartitionAcknowledgementBatch{{FirstOffset: 0, LastOffset: 0, AcknowledgeTypes: []int8{1}}}}}})
	}
	ar := request[*kmsg.ShareAcknowledgeResponse](t, reader, ack)
	if ar.ErrorCode != 0 {
		t.Fatalf("ShareAcknowledge refused whole: %d", ar.ErrorCode)
	}
	for _, tp := range ar.Topics {
		want := int16(0)
		if tp.TopicID == secret {
			want = kerr.TopicAuthorizationFailed.Code
		}
		if len(tp.Partitions) != 1 || tp.Partitions[0].ErrorCode != want {
			t.Fatalf("ShareAcknowledge of %x: %+v, want code %d", tp.TopicID[:4], tp.Partitions, want)
		}
	}
	if len(ar.Topics) != 2 {
		t.Fatalf("ShareAcknowledge answered %d topics", len(ar.Topics))
	}
}
