package engine

// producerIDManager is owned by the idempotent-producer work.
type producerIDManager struct{}

func newProducerIDManager(dataDir string) (*producerIDManager, error) { return &producerIDManager{}, nil }
