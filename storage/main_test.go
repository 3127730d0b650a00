package storage

import (
	"fmt"
	"os"
	"testing"
)

// TestMain fails a passing run that leaked a Region: one whose log was
// closed or whose descriptor was evicted keeps that descriptor open (and
// counted against the descriptor budget, which later tests rely on) until
// it is released.
func TestMain(m *testing.M) {
	code := m.Run()
	if _, lending := OpenLogFiles(); code == 0 && lending != 0 {
		fmt.Fprintf(os.Stderr, "storage tests leaked %d descriptors held by unreleased Regions\n", lending)
		code = 1
	}
	os.Exit(code)
}
