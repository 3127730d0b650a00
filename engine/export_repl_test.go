package engine

// Hooks for the replication tests of package engine_test.

// SetISRBatch sets how many partitions one AlterPartition of b carries
// (1: one request per partition, as before batching).
func SetISRBatch(b *Broker, n int) {
	s := b.replicas.isr
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mu.batch = n
}

// ISRRequests is how many AlterPartition requests b sent and how many
// partition changes they carried.
func ISRRequests(b *Broker) (requests, partitions int64) {
	return b.replicas.isr.requests.Load(), b.replicas.isr.partitions.Load()
}

// FetchSessions is how many fetch sessions b's cache holds.
func FetchSessions(b *Broker) int {
	b.sessions.mu.Lock()
	defer b.sessions.mu.Unlock()
	return len(b.sessions.sessions)
}

// ParkedFetches is how many fetches wait in b's purgatory.
func ParkedFetches(b *Broker) int64 { return int64(b.waiters.waiting.Load()) }
