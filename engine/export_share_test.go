package engine

import "github.com/sluice-broker/sluice/engine/share"

// ShareStateKeysForTest lists the share coordinator's loaded states of a
// topic.
func ShareStateKeysForTest(b *Broker, id [16]byte) []share.SPKey {
	return b.share.states.KeysOfTopic(id)
}
