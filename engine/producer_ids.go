package engine

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// producerIDManager hands out producer ids for InitProducerId.
//
// An id must never be handed out twice, also across restarts and crashes:
// every partition remembers the last sequence numbers of the ids it has
// seen, so a reused id would have its first batches rejected as out of
// order or, worse, acknowledged as duplicates without being written. Ids are
// therefore handed out in blocks, and the end of a block is made durable
// (temp file, fsync, rename) before its first id is used, as Kafka does with
// producer-id blocks in its metadata log. A crash wastes at most the rest of
// one block.
type producerIDManager struct {
	path string

	mu struct {
		sync.Mutex
		// Invariant: next <= blockEnd, and blockEnd is on disk.
		next, blockEnd int64
	}
}

const (
	producerIDsFile     = "sluice-producer-ids"
	producerIDBlockSize = 1000
)

// newProducerIDManager loads the persisted block end from dataDir; ids
// continue from there.
func newProducerIDManager(dataDir string) (*producerIDManager, error) {
	m := &producerIDManager{path: filepath.Join(dataDir, producerIDsFile)}
	end, err := readProducerIDBlockEnd(m.path)
	if err != nil {
		return nil, err
	}
	m.mu.next, m.mu.blockEnd = end, end
	return m, nil
}

// next returns a producer id no one has had before.
func (m *producerIDManager) next() (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.next == m.mu.blockEnd {
		end := m.mu.blockEnd + producerIDBlockSize
		if err := writeProducerIDBlockEnd(m.path, end); err != nil {
			return -1, err
		}
		m.mu.blockEnd = end
	}
	id := m.mu.next
	m.mu.next++
	return id, nil
}

// The file is properties-style like meta.properties, so it reads well:
//
//	version=1
//	next.block.start=3000
func readProducerIDBlockEnd(path string) (int64, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := splitProperty(sc.Text()); ok && k == "next.block.start" {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return 0, fmt.Errorf("%s: bad next.block.start %q", path, v)
			}
			return n, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no next.block.start", path)
}

func writeProducerIDBlockEnd(path string, end int64) error {
	return writeFileAtomic(path, fmt.Appendf(nil, "version=1\nnext.block.start=%d\n", end))
}
