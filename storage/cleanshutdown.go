package storage

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// The clean-shutdown record of a data directory. CloseAll leaves one file
// per parent directory of the logs it closed (the broker's data
// directory), naming every partition directory it closed cleanly, where it
// used to leave a marker in each partition directory; Kafka keeps one per
// log directory too. A start takes the record (TakeCleanShutdown: read,
// removed, the directory fsynced once) before it opens any log, and opens
// the logs through it, so that a crash from then on finds no record and
// recovers every log written since. The per-partition marker of Close, and
// of data directories written before this record existed, still counts,
// and is removed (with a directory fsync) when its log opens.
//
// File layout, text like Kafka's checkpoints:
//
//	0                      version
//	2                      count of the names that follow
//	orders-0               a partition directory closed cleanly
//	orders-1
//
// A record that does not parse whole (a crash while it was written) names
// nothing: every log recovers, which is always safe.

// dirCleanShutdownFile is the record's name in the parent directory.
const dirCleanShutdownFile = ".clean-shutdown"

// CleanShutdown is the taken record of one parent directory: the partition
// directories that were closed cleanly and have not been opened since.
// Each counts once: a log closed and opened again within the process
// relies on its own marker. The zero value and nil name nothing.
type CleanShutdown struct {
	parent string
	mu     struct {
		sync.Mutex
		names map[string]bool
	}
}

// TakeCleanShutdown reads and removes the clean-shutdown record of parent.
// It must run before any log under parent is opened (and the logs be
// opened through it): once it returns, a crash leaves no record.
func TakeCleanShutdown(parent string) (*CleanShutdown, error) {
	c := &CleanShutdown{parent: filepath.Clean(parent)}
	path := filepath.Join(parent, dirCleanShutdownFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, err
	}
	c.mu.names = parseCleanShutdown(data)
	if err := os.Remove(path); err != nil {
		return nil, err
	}
	return c, syncDir(parent)
}

// Len is how many logs the record still vouches for.
func (c *CleanShutdown) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.mu.names)
}

// Open opens the log in dir as the package's Open does, as cleanly shut
// down if the record names it (once).
func (c *CleanShutdown) Open(dir string, cfg Config) (*Log, error) {
	return open(dir, cfg, c.take(dir))
}

// take reports whether the record names dir, and forgets it.
func (c *CleanShutdown) take(dir string) bool {
	if c == nil || filepath.Dir(filepath.Clean(dir)) != c.parent {
		return false
	}
	name := filepath.Base(dir)
	c.mu.Lock()
	defer c.mu.Unlock()
	ok := c.mu.names[name]
	delete(c.mu.names, name)
	return ok
}

// parseCleanShutdown returns the names of a whole record, or none.
func parseCleanShutdown(data []byte) map[string]bool {
	if len(data) == 0 || data[len(data)-1] != '\n' {
		return nil // cut short, perhaps inside a name
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<16)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if sc.Err() != nil || len(lines) < 2 || lines[0] != "0" {
		return nil
	}
	count, err := strconv.Atoi(lines[1])
	if err != nil || count != len(lines)-2 {
		return nil
	}
	names := make(map[string]bool, count)
	for _, name := range lines[2:] {
		if name == "" || strings.ContainsAny(name, "/\x00") {
			return nil
		}
		names[name] = true
	}
	return names
}

// writeCleanShutdown writes the record of parent naming the partition
// directories names, durably on its own (a temporary file fsynced, then
// renamed; the caller's syncfs makes the rename durable).
func writeCleanShutdown(parent string, names []string) error {
	slices.Sort(names)
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(names))
	for _, n := range names {
		b.WriteString(n)
		b.WriteByte('\n')
	}
	path := filepath.Join(parent, dirCleanShutdownFile)
	f, err := os.OpenFile(path+tmpSuffix, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(b.Bytes())
	err = errors.Join(err, f.Sync(), f.Close())
	if err != nil {
		return err
	}
	return os.Rename(path+tmpSuffix, path)
}
