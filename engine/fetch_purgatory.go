package engine

// fetchPurgatory is owned by the fetch work.
type fetchPurgatory struct{}

func newFetchPurgatory() *fetchPurgatory { return &fetchPurgatory{} }

func (p *fetchPurgatory) close() {}
