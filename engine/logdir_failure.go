package engine

import (
	"fmt"
)

// logFailed is told, once per log, that a partition's log failed: a write
// or fsync error (ENOSPC, EIO) left it refusing writes until the broker
// restarts and recovery truncates the torn tail.
//
// Kafka takes the log dir offline and halts the broker when it was its last
// one, so the controller moves the leaders elsewhere. Sluice has one data
// dir per broker, so in a cluster the first failed log stops the broker the
// same way, but through the controlled shutdown (Fatal → Shutdown): its
// leaders move at once instead of after the session timeout, and no
// clean-shutdown mark is written for a failed log. The supervisor that
// restarts a crashed broker restarts this one. A single node keeps serving
// reads and every log that still writes: there is nowhere to move leaders
// to, and stopping would take the readable data offline too.
func (b *Broker) logFailed(topic string, partition int32, err error) {
	b.log.Error("partition log failed", "topic", topic, "partition", partition, "err", err)
	if b.cluster == nil {
		return
	}
	fatal := fmt.Errorf("data dir failed (%s-%d: %w); stopping so the controller moves this broker's leaders, as Kafka halts when its last log dir goes offline", topic, partition, err)
	select {
	case b.cluster.fatal <- fatal:
	default: // already stopping
	}
}
