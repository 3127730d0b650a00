//go:build race

package netpoll

// The race detector's instrumentation allocates; allocation counts are
// meaningless under it.
func init() { raceEnabled = true }
