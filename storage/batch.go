package storage

// The batch format itself (header layout, attributes, records, codecs)
// lives in package record; this file holds what the log checks of a batch
// before it appends or recovers it.

import "github.com/sluice-broker/sluice/record"

// checkBatch validates the batch at the start of b as it is validated on
// append and at recovery: length bounds, magic, CRC-32C, and a lastOffsetDelta
// that agrees with the record count. It returns the batch size. maxSize <= 0
// means no size limit.
func checkBatch(b []byte, maxSize int64) (int64, error) {
	return checkBatchAs(b, maxSize, false)
}

// checkBatchAs is checkBatch; cleaned admits batches the cleaner wrote,
// which keep their original offset span (lastOffsetDelta) with fewer
// records, down to none (the last batch of a producer is kept empty).
func checkBatchAs(b []byte, maxSize int64, cleaned bool) (int64, error) {
	h, err := parseHeader(b)
	if err != nil {
		return 0, err
	}
	return checkParsed(b, &h, maxSize, cleaned)
}

// checkedHeader is checkBatchAs returning the batch's header (whose Size is
// the batch size).
func checkedHeader(b []byte, maxSize int64, cleaned bool) (record.Header, error) {
	h, err := parseHeader(b)
	if err == nil {
		_, err = checkParsed(b, &h, maxSize, cleaned)
	}
	return h, err
}

// parseHeader is record.ParseHeader with the log's error.
func parseHeader(b []byte) (record.Header, error) {
	h, err := record.ParseHeader(b)
	if err != nil {
		return h, errBatchTruncated
	}
	return h, nil
}

// checkParsed is checkBatchAs for a batch whose header h was parsed from b
// already. The checks that need no CRC run first, so garbage is rejected
// cheaply.
func checkParsed(b []byte, h *record.Header, maxSize int64, cleaned bool) (int64, error) {
	size := h.Size()
	switch {
	case size < record.HeaderLen:
		return 0, errBatchTooShort
	case h.Magic != record.Magic:
		return 0, errBadMagic
	case maxSize > 0 && size > maxSize:
		return 0, ErrMessageTooLarge
	case size > int64(len(b)):
		return 0, errBatchTruncated
	}
	if err := checkCounts(h, cleaned); err != nil {
		return 0, err
	}
	if record.Checksum(b[:size]) != h.CRC {
		return 0, errBadCRC
	}
	return size, nil
}

// checkCounts checks the record count against lastOffsetDelta and the
// attribute bits that the log layer cares about.
func checkCounts(h *record.Header, cleaned bool) error {
	n, delta := h.NumRecords, h.LastOffsetDelta
	switch {
	case cleaned && (n < 0 || delta < 0 || n > delta+1):
		return errBadLastOffsetDelta
	case !cleaned && n <= 0:
		return errNoRecords
	case !cleaned && delta != n-1:
		return errBadLastOffsetDelta
	case !h.Compression().Valid():
		return errBadCompression
	case h.HasProducerID() && h.BaseSequence < 0 && !h.IsControl():
		return errBadBaseSequence
	case !h.HasProducerID() && h.IsTransactional():
		return errTxnWithoutPID
	}
	return nil
}
