//go:build race

package engine

// The race detector's instrumentation allocates and sync.Pool drops items
// at random under it; allocation counts are meaningless there.
func init() { raceEnabled = true }
