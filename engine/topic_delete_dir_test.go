package engine_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/sluice-broker/sluice/internal/testbroker"
)

// TestTopicDeletedJustBeforeShutdownLeavesNoDirectory: a deleted topic's
// directory is renamed aside and removed after file.delete.delay.ms; a
// broker stopped within that delay used to leave the renamed directory on
// disk for good. The next start removes what a stop left behind, as
// Kafka's log manager does.
func TestTopicDeletedJustBeforeShutdownLeavesNoDirectory(t *testing.T) {
	tb := testbroker.Start(t)
	adm := tb.Admin(t)
	ctx := context.Background()
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "doomed"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.DeleteTopics(ctx, "doomed"); err != nil {
		t.Fatal(err)
	}
	tb.Restart(t) // well within the default 60 s delay
	ents, err := os.ReadDir(tb.Config.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "doomed-") {
			t.Errorf("%s left in the data directory after restart", e.Name())
		}
	}
}
