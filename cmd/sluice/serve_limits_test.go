package main

import "testing"

// TestStorageBudgetsLeaveRoomForSockets: the .log descriptor cache gets
// at most 3/8 of RLIMIT_NOFILE (the lending descriptors as many again, a
// quarter left for sockets) and the mapping cache at most 3/8 of
// vm.max_map_count in segments (2 mappings each); tiny limits still give
// workable caches.
func TestStorageBudgetsLeaveRoomForSockets(t *testing.T) {
	for _, tt := range []struct {
		nofile uint64
		files  int
	}{{20000, 7500}, {1 << 20, 393216}, {4096, 1536}, {1024, 32}, {0, 32}} {
		if got := logFileBudget(tt.nofile); got != tt.files {
			t.Errorf("logFileBudget(%d) = %d, want %d", tt.nofile, got, tt.files)
		}
	}
	for _, tt := range []struct {
		maps   uint64
		mapped int
	}{{65530, 24574}, {262144, 98304}, {4096, 32}} {
		if got := mappedSegmentBudget(tt.maps); got != tt.mapped {
			t.Errorf("mappedSegmentBudget(%d) = %d, want %d", tt.maps, got, tt.mapped)
		}
	}
}
