package engine

import "github.com/twmb/franz-go/pkg/kmsg"

// DescribedKey is what DescribeConfigs must report for one key, from the
// config table, for the external tests.
type DescribedKey struct {
	Type      kmsg.ConfigType
	ReadOnly  bool
	Sensitive bool
}

// DescribedBrokerKeys and DescribedTopicKeys list, by name, every key a
// BROKER or TOPIC resource must answer, each once.
func DescribedBrokerKeys() map[string]DescribedKey {
	out := map[string]DescribedKey{}
	for _, name := range brokerKeyNames {
		k := describedBrokerKeys[name].key
		out[name] = DescribedKey{k.typ, k.readOnly(), k.sensitive()}
	}
	return out
}

func DescribedTopicKeys() map[string]DescribedKey {
	out := map[string]DescribedKey{}
	for name, k := range topicKeys {
		out[name] = DescribedKey{k.typ, false, k.sensitive()}
	}
	return out
}
