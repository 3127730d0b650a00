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
update mode in Kafka; Sluice reads every broker key at startup only. The topic key is the
topic-level config whose default the broker key provides.

| key | type | default | valid values | topic key | Kafka dynamic | meaning |
|---|---|---|---|---|---|---|
`)
	var ignored []string
	for i := range configKeys {
		k := &configKeys[i]
		if k.use == useIgnored {
			ignored = append(ignored, "`"+k.name+"`")
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", docNames(k), strings.ToLower(k.typ.String()),
			docNumber(k.def), docValid(k), docCode(k.topic), [...]string{"read-only", "per-broker", "cluster-wide"}[k.scope], docMeaning(k))
	}
	b.WriteString("\nAccepted and ignored (a single node has nothing to tune with them): " + strings.Join(ignored, ", ") + ".\n")
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

func docMeaning(k *configKey) string {
	switch k.use {
	case useFixed:
		return k.doc + " (Sluice runs with the default; a server.properties line setting it is warned about as unknown)"
	case useFixedAccepted:
		return k.doc + " (Sluice runs with the default; the key is accepted and ignored)"
	}
	return k.doc
}
