// Package properties reads Java .properties files the way Kafka's
// configuration files are written: "key=value" or "key: value" lines, with
// '#' and '!' comment lines and blank lines skipped. It is the one reader
// of server.properties (engine's config) and meta.properties (metadata).
package properties

import (
	"bufio"
	"io"
	"strings"
)

// Line is one key of a file, with its 1-based line number for messages.
type Line struct {
	Key, Value string
	Number     int
}

// Read returns the file's keys in file order. A line without a separator
// is a key with an empty value, so the caller can name it in an error.
func Read(r io.Reader) ([]Line, error) {
	var out []Line
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		if key, val, ok := Split(sc.Text()); ok {
			out = append(out, Line{key, val, n})
		}
	}
	return out, sc.Err()
}

// Split parses one line; ok is false for comments and blank lines.
func Split(s string) (key, val string, ok bool) {
	s = strings.TrimSpace(s)
	if s == "" || s[0] == '#' || s[0] == '!' {
		return "", "", false
	}
	i := strings.IndexAny(s, "=:")
	if i < 0 {
		return s, "", true
	}
	return strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+1:]), true
}
