package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-broker/sluice/metadata"
)

// TestFormatAddScramCredentialLogsIn: `sluice format --add-scram` puts a
// SCRAM-SHA-512 credential in the bootstrap metadata; the broker started
// on that data dir has it from its first image, so alice logs in on the
// SASL_PLAINTEXT listener, the only one, with no user created over the
// wire; a wrong password is refused. A malformed --add-scram fails the
// format.
func TestFormatAddScramCredentialLogsIn(t *testing.T) {
	if binPath == "" {
		t.Skip("end-to-end: skipped under -short")
	}
	dir, addr := t.TempDir(), freeAddr(t)
	props := filepath.Join(t.TempDir(), "server.properties")
	os.WriteFile(props, []byte("node.id=1\nlisteners=SASL_PLAINTEXT://"+addr+"\nsasl.enabled.mechanisms=SCRAM-SHA-512\nlog.dirs="+dir+"\n"), 0o644)
	out, err := exec.Command(binPath, "format", "--cluster-id", metadata.NewClusterID(), "--config", props,
		"--add-scram", "SCRAM-SHA-512=[name=alice,password=alice-secret,iterations=8192]").CombinedOutput()
	if err != nil {
		t.Fatalf("format: %v\n%s", err, out)
	}
	for _, bad := range []string{"SCRAM-SHA-1=[name=a,password=b]", "SCRAM-SHA-512=[name=a]", "SCRAM-SHA-512=[name=a,password=b,salt=c]", "SCRAM-SHA-512=name=a"} {
		if out, err := exec.Command(binPath, "format", "--cluster-id", metadata.NewClusterID(), "--config", props, "--add-scram", bad).CombinedOutput(); err == nil {
			t.Errorf("--add-scram %q accepted:\n%s", bad, out)
		}
	}
	startProc(t, dir, addr, "--config", props)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := client(t, addr, kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()),
		kgo.DefaultProduceTopic("boot"), kgo.AllowAutoTopicCreation())
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatalf("produce as alice: %v", err)
	}
	wrong := client(t, addr, kgo.SASL(scram.Auth{User: "alice", Pass: "nope"}.AsSha512Mechanism()), kgo.DefaultProduceTopic("boot"))
	if err := wrong.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr(); err == nil {
		t.Fatal("a wrong password produced")
	}
}
