package metadata

// The bootstrap metadata: records `sluice format` writes beside
// meta.properties for the cluster's first metadata (Kafka's
// bootstrap.checkpoint, which kafka-storage format --add-scram fills), so
// that a cluster whose nodes log in to each other with SCRAM has their
// credentials before any node could create one. The first active
// controller (or a single node, at its first start) commits them with the
// cluster record, once: a metadata log that already has a cluster id
// ignores the file.
//
// File: "SLBM", a 4-byte record count, then each record as a 4-byte
// length and its AppendRecord encoding; big-endian.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sluice-broker/sluice/internal/fsutil"
)

// BootstrapFile is the bootstrap metadata's name in a data dir.
const BootstrapFile = "bootstrap.checkpoint"

// maxBootstrapRecords bounds the file's records.
const maxBootstrapRecords = 10000

var bootstrapMagic = [4]byte{'S', 'L', 'B', 'M'}

// WriteBootstrap writes recs as dataDir's bootstrap metadata, replacing
// any before.
func WriteBootstrap(dataDir string, recs []Record) error {
	if len(recs) > maxBootstrapRecords {
		return fmt.Errorf("more than %d bootstrap records", maxBootstrapRecords)
	}
	out := binary.BigEndian.AppendUint32(bootstrapMagic[:], uint32(len(recs)))
	for _, r := range recs {
		body := AppendRecord(nil, r)
		out = append(binary.BigEndian.AppendUint32(out, uint32(len(body))), body...)
	}
	return fsutil.WriteFileAtomic(filepath.Join(dataDir, BootstrapFile), out)
}

// ReadBootstrap reads dataDir's bootstrap metadata; none when there is
// no file.
func ReadBootstrap(dataDir string) ([]Record, error) {
	b, err := os.ReadFile(filepath.Join(dataDir, BootstrapFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(b) < 8 || [4]byte(b[:4]) != bootstrapMagic {
		return nil, fmt.Errorf("%s: %w: not a bootstrap file", BootstrapFile, ErrMalformed)
	}
	n := binary.BigEndian.Uint32(b[4:])
	if n > maxBootstrapRecords {
		return nil, fmt.Errorf("%s: %w: %d records", BootstrapFile, ErrMalformed, n)
	}
	b = b[8:]
	recs := make([]Record, 0, n)
	for range n {
		if len(b) < 4 || uint64(binary.BigEndian.Uint32(b)) > uint64(len(b)-4) {
			return nil, fmt.Errorf("%s: %w: truncated", BootstrapFile, ErrMalformed)
		}
		l := binary.BigEndian.Uint32(b)
		r, err := DecodeRecord(b[4 : 4+l])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", BootstrapFile, err)
		}
		recs, b = append(recs, r), b[4+l:]
	}
	if len(b) != 0 {
		return nil, fmt.Errorf("%s: %w: %d bytes after the records", BootstrapFile, ErrMalformed, len(b))
	}
	return recs, nil
}
