package engine

import "sync"

// producerIDManager hands out producer ids for InitProducerId.
//
// An id must never be handed out twice, also across restarts and crashes:
// every partition remembers the last sequence numbers of the ids it has
// seen, so a reused id would have its first batches rejected as out of
// order or, worse, acknowledged as duplicates without being written. Ids are
// therefore handed out in blocks, each allocated by a ProducerIDsRecord that
// is durable in the metadata log before its first id is used, as Kafka
// does. A crash wastes at most the rest of one block.
type producerIDManager struct {
	// allocate allocates the next block of size ids and returns its start.
	allocate func(size int64) (int64, error)

	mu struct {
		sync.Mutex
		// Invariant: next <= blockEnd, and [next, blockEnd) is allocated
		// to this broker in the metadata log.
		next, blockEnd int64
	}
}

const producerIDBlockSize = 1000

// newProducerIDManager starts with no block: the first id allocates one,
// after every block allocated before.
func newProducerIDManager(allocate func(size int64) (int64, error)) *producerIDManager {
	return &producerIDManager{allocate: allocate}
}

// next returns a producer id no one has had before.
func (m *producerIDManager) next() (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mu.next == m.mu.blockEnd {
		start, err := m.allocate(producerIDBlockSize)
		if err != nil {
			return -1, err
		}
		m.mu.next, m.mu.blockEnd = start, start+producerIDBlockSize
	}
	id := m.mu.next
	m.mu.next++
	return id, nil
}
