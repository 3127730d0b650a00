package engine

// groupCoordinator is owned by the consumer-group work (groups*.go).
type groupCoordinator struct{ b *Broker }

func newGroupCoordinator(b *Broker) (*groupCoordinator, error) { return &groupCoordinator{b: b}, nil }

func (g *groupCoordinator) close() {}

// offsetsTopic is Kafka's internal topic of committed offsets.
const offsetsTopic = "__consumer_offsets"
