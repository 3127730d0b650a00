package engine

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var updateConfigDoc = flag.Bool("update-config-doc", false, "rewrite CONFIG.md from the config table")

// TestConfigDoc keeps CONFIG.md, the users' list of keys, generated from
// the config table: `go test ./engine -run TestConfigDoc -update-config-doc`.
func TestConfigDoc(t *testing.T) {
	const path = "CONFIG.md"
	got := configDoc()
	if *updateConfigDoc {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil || string(want) != got {
		t.Fatalf("%s is not the config table's (%v); rerun with -update-config-doc", path, err)
	}
}

func configDoc() string {
	var b strings.Builder
	b.WriteString(`# server.properties keys

Generated from the config table (configkeys.go) by TestConfigDoc; do not edit.

` + "`sluice serve --config FILE`" + ` reads a Kafka-style server.properties once. Flags
(--listen, --advertise, --data-dir, --node-id, --net, --net-loops) override the file;
SLUICE_NET sets sluice.net's default. An unknown key is warned about and ignored; a bad
value stops the broker with a message naming the key and line. Of a key's spellings the
most specific wins, as in Kafka (log.retention.ms > minutes > hours; log.roll.ms > hours;
log.dirs > log.dir); node.id and broker.id must agree. "Kafka dynamic" is the key's
update mode in Kafka; Sluice changes the same keys at run time (AlterConfigs and
IncrementalAlterConfigs on a BROKER resource: one broker, or the cluster-wide default;
stored in the metadata log), but for those marked restart-only. Of a key's values the
broker's own dynamic one wins, then the cluster-wide dynamic default, then this file, then
the default. The topic key is the topic-level config whose default the broker key provides.

| key | type | default | valid values | topic key | Kafka dynamic | meaning |
|---|---|---|---|---|---|---|
`)
	var ignored, topicOnly []string
	for i := range configKeys {
		k := &configKeys[i]
		if k.use == useIgnored {
			ignored = append(ignored, "`"+k.name+"`")
			continue
		}
		if k.topicOnly {
			topicOnly = append(topicOnly, "`"+k.name+"`")
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", docNames(k), strings.ToLower(k.typ.String()),
			docNumber(k.def), docValid(k), docCode(k.topic), [...]string{"read-only", "per-broker", "cluster-wide"}[k.scope], docMeaning(k))
	}
	b.WriteString("\nAccepted and ignored (a single node has nothing to tune with them): " + strings.Join(ignored, ", ") + ".\n")
	b.WriteString("\nTopic keys with no broker key (set per topic only): " + strings.Join(topicOnly, ", ") + ".\n")
	b.WriteString(groupDoc())
	return b.String()
}

func docNames(k *configKey) string {
	names := []string{"`" + k.name + "`"}
	for _, a := range k.aliases {
		names = append(names, "`"+a.name+"`")
	}
	return strings.Join(names, ", ")
}

func docValid(k *configKey) string {
	switch {
	case k.oneOf != nil:
		return strings.Join(k.oneOf, ", ")
	case k.typ == typeInt || k.typ == typeLong || k.typ == typeDouble:
		min, max := k.bounds()
		return "[" + docNumber(itoa(min)) + ", " + docNumber(itoa(max)) + "]"
	}
	return ""
}

func docNumber(v string) string {
	switch v {
	case "2147483647":
		return "2^31-1"
	case "9223372036854775807":
		return "2^63-1"
	}
	return v
}

func docCode(v string) string {
	if v == "" {
		return ""
	}
	return "`" + v + "`"
}

// groupDoc lists the GROUP resource configs (groupconfig.go).
func groupDoc() string {
	var b strings.Builder
	b.WriteString(`
# Group configs

Set per group id with AlterConfigs / IncrementalAlterConfigs on a GROUP resource
(` + "`kafka-configs --entity-type groups`" + `), stored in the metadata log. The default is the
broker key's value; a value must lie within the broker keys named as bounds. They belong to
the consumer, share and streams group protocols; classic groups ignore them, as in Kafka.

| key | type | default (broker key) | valid values | bounds (broker keys) | meaning |
|---|---|---|---|---|---|
`)
	for _, name := range groupKeyNames {
		k := groupKeys[name]
		def := k.def
		if k.broker != "" {
			def = docCode(k.broker)
		}
		bounds := strings.Trim(docCode(k.lo)+" – "+docCode(k.hi), " –")
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", docCode(name), strings.ToLower(k.typ.String()), def, docValid(&k.configKey), bounds, k.doc)
	}
	return b.String()
}

func docMeaning(k *configKey) string {
	if k.restartOnly {
		return k.doc + " (Sluice changes it at restart only: a dynamic alteration is refused)"
	}
	switch k.use {
	case useFixed:
		return k.doc + " (Sluice runs with the default; a server.properties line setting it is warned about as unknown)"
	case useFixedAccepted:
		return k.doc + " (Sluice runs with the default; the key is accepted and ignored)"
	}
	return k.doc
}
