package compare

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kfake"
)

// KfakeMain is `benchcompare serve-kfake`: franz-go's in-memory kfake broker as a
// process of its own, so the runner can measure it like the other brokers
// (CPU time and peak RSS from /proc). It serves until ctx ends.
func KfakeMain(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("benchcompare serve-kfake", flag.ContinueOnError)
	port := fs.Int("port", 9093, "port to listen on (on 127.0.0.1)")
	parts := fs.Int("partitions", 1, "partitions of auto-created topics")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	c, err := kfake.NewCluster(
		kfake.Ports(*port),
		kfake.NumBrokers(1),
		kfake.AllowAutoTopicCreation(),
		kfake.DefaultNumPartitions(*parts),
	)
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintln(os.Stderr, "kfake listening on", c.ListenAddrs())
	<-ctx.Done()
	return nil
}
