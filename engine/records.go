package engine

// Compatibility names for group_log.go and group_load.go, which move to
// engine/group and onto package record in the same change (issue 9);
// delete them then. The record format itself lives in package record.

import (
	"errors"
	"hash/crc32"

	"github.com/sluice-broker/sluice/record"
)

var errBadRecord = errors.New("malformed record in batch")

const (
	codecNone        = record.None
	batchLogOverhead = record.LogOverhead
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// batchRecords is record.Records with the default decompression limit.
func batchRecords(scratch, batch []byte, h record.Header) ([]byte, error) {
	return record.Records(scratch, batch, h, record.DefaultDecompressLimit)
}

// grow extends dst by n bytes (contents of the new bytes unspecified).
func grow(dst []byte, n int) []byte {
	if cap(dst)-len(dst) >= n {
		return dst[:len(dst)+n]
	}
	return append(dst, make([]byte, n)...)
}
