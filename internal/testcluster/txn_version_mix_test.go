package testcluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluice-broker/sluice/tools/chaos/check"
)

// TestTxnV1EndAfterV2OffsetCommit: a transaction whose producer ends it
// with EndTxn v4 (transactions version 1: no epoch bump, markers at the
// records' epoch) after one of its requests came in the version 2 form
// (TxnOffsetCommit v5, which adds the group's offsets partition
// implicitly). Kafka takes a transaction's version from the EndTxn that
// ends it; the transaction must commit: its records visible at
// read_committed, its offset the group's, no transaction left open.
// Found by TestCoordinatorKilledBeforeOffsetsMarker, whose franz-go
// producer ran its first transaction on version 1 (it opts into version 2
// only once it has seen the feature) while kgo sent the raw
// TxnOffsetCommit at v5.
func TestTxnV1EndAfterV2OffsetCommit(t *testing.T) {
	c := StartInProcess(t, 1, "transaction.state.log.num.partitions=1", "transaction.state.log.replication.factor=1",
		"offsets.topic.replication.factor=1")
	adm := kadm.NewClient(c.Client())
	createTopic(t, adm, "mix", 1, 1)
	const id, group = "mix-tx", "mix-group"
	v1 := kversion.Stable()
	v1.SetMaxKeyVersion(int16(kmsg.EndTxn), 4) // franz-go then stays on transactions version 1
	prod := c.Client(kgo.MaxVersions(v1), kgo.TransactionalID(id), kgo.DefaultProduceTopic("mix"))
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := prod.ProduceSync(ctxT(t, 20*time.Second), &kgo.Record{Value: fmt.Appendf(nil, "%d", i)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	txnCommitOffset(t, prod, c.Client(), id, group, "mix", 3) // TxnOffsetCommit at v5
	if err := prod.EndTransaction(ctxT(t, 20*time.Second), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	logs, err := check.ReadCommitted(ctx, c.Bootstrap(), "mix", 1)
	if err != nil {
		t.Fatal(err) // a hanging transaction: the LSO stays below the HW
	}
	if got := fmt.Sprint(logs[0].Values); got != "[0 1 2]" {
		t.Fatalf("read_committed read %s, want [0 1 2]", got)
	}
}
