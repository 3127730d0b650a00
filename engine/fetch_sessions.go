package engine

// fetchSessionCache is owned by the fetch work.
type fetchSessionCache struct{ max int }

func newFetchSessionCache(max int) *fetchSessionCache { return &fetchSessionCache{max: max} }
