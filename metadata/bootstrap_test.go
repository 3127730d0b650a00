package metadata

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestBootstrapRoundTripAndDamage: the bootstrap file reads back what was
// written; a missing file is no records; a truncated or trailing-garbage
// file is ErrMalformed, never a panic.
func TestBootstrapRoundTripAndDamage(t *testing.T) {
	dir := t.TempDir()
	if recs, err := ReadBootstrap(dir); err != nil || recs != nil {
		t.Fatalf("no file: %v %v", recs, err)
	}
	want := []Record{
		UserScramCredentialRecord{Name: "broker", Mechanism: ScramSHA512, Salt: []byte("salt"), StoredKey: []byte("stored"), ServerKey: []byte("server"), Iterations: 4096},
		UserScramCredentialRecord{Name: "admin", Mechanism: ScramSHA256, Salt: []byte("s2"), StoredKey: []byte("k2"), ServerKey: []byte("v2"), Iterations: 8192},
	}
	if err := WriteBootstrap(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadBootstrap(dir)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("read back %+v %v", got, err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, BootstrapFile))
	for name, bad := range map[string][]byte{
		"truncated": data[:len(data)-3],
		"trailing":  append(append([]byte(nil), data...), 1, 2),
		"magic":     append([]byte("XXXX"), data[4:]...),
		"count":     append(append([]byte(nil), data[:4]...), 0xff, 0xff, 0xff, 0xff),
	} {
		os.WriteFile(filepath.Join(dir, BootstrapFile), bad, 0o644)
		if _, err := ReadBootstrap(dir); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}
