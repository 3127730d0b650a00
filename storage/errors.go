package storage

import (
	"errors"
	"fmt"
)

// Errors returned by the log. Each maps to exactly one Kafka error code; the
// engine maps them with errors.Is, so detailed variants below wrap these.
var (
	ErrCorruptMessage       = errors.New("storage: corrupt message")                   // CORRUPT_MESSAGE (2)
	ErrInvalidRecord        = errors.New("storage: invalid record")                    // INVALID_RECORD (87)
	ErrMessageTooLarge      = errors.New("storage: message too large")                 // MESSAGE_TOO_LARGE (10)
	ErrRecordListTooLarge   = errors.New("storage: record list too large for segment") // RECORD_LIST_TOO_LARGE (18)
	ErrOffsetOutOfRange     = errors.New("storage: offset out of range")               // OFFSET_OUT_OF_RANGE (1)
	ErrOutOfOrderSequence   = errors.New("storage: out of order sequence number")      // OUT_OF_ORDER_SEQUENCE_NUMBER (45)
	ErrInvalidProducerEpoch = errors.New("storage: invalid producer epoch")            // INVALID_PRODUCER_EPOCH (47)
	ErrUnknownProducerID    = errors.New("storage: unknown producer id")               // UNKNOWN_PRODUCER_ID (59)
	ErrInvalidTimestamp     = errors.New("storage: invalid timestamp")                 // INVALID_TIMESTAMP (32)
	ErrClosed               = errors.New("storage: log closed")
	ErrLogCorrupt           = errors.New("storage: log corrupt")
	// ErrUnexpectedAppendOffset: AppendAsFollower was given batches that
	// do not continue the log end offset (Kafka's
	// UnexpectedAppendOffsetException). No Kafka error code: the follower
	// fetcher answers it by re-synchronising (truncation), not a client.
	ErrUnexpectedAppendOffset = errors.New("storage: follower batch does not continue the log end offset")
)

// Detailed validation errors. They are built once so that rejecting a batch
// on the produce path allocates nothing.
var (
	errBatchTruncated      = fmt.Errorf("%w: record batch truncated", ErrCorruptMessage)
	errBatchTooShort       = fmt.Errorf("%w: record batch length below the v2 header size", ErrCorruptMessage)
	errBadCRC              = fmt.Errorf("%w: record batch CRC-32C mismatch", ErrCorruptMessage)
	errEmptyRecordSet      = fmt.Errorf("%w: empty record set", ErrCorruptMessage)
	errBadMagic            = fmt.Errorf("%w: record batch magic is not 2", ErrInvalidRecord)
	errBadLastOffsetDelta  = fmt.Errorf("%w: lastOffsetDelta does not match the record count", ErrInvalidRecord)
	errNoRecords           = fmt.Errorf("%w: record batch has no records", ErrInvalidRecord)
	errBadCompression      = fmt.Errorf("%w: unknown compression codec", ErrInvalidRecord)
	errControlFromClient   = fmt.Errorf("%w: clients may not write control batches", ErrInvalidRecord)
	errBadBaseSequence     = fmt.Errorf("%w: idempotent batch without a base sequence", ErrInvalidRecord)
	errTxnWithoutPID       = fmt.Errorf("%w: transactional batch without a producer id", ErrInvalidRecord)
	errNewEpochSeq         = fmt.Errorf("%w: a new producer epoch must start at sequence 0", ErrOutOfOrderSequence)
	errFollowerOverlap     = fmt.Errorf("%w: batch starts below the log end offset (overlap)", ErrUnexpectedAppendOffset)
	errFollowerGap         = fmt.Errorf("%w: batch starts past the log end offset (gap)", ErrUnexpectedAppendOffset)
	errFollowerOffsetRange = fmt.Errorf("%w: batch offsets out of range", ErrUnexpectedAppendOffset)
)

// CorruptError reports corruption found by recovery in the middle of a log:
// damage that is followed by valid data, so truncating would silently drop
// acknowledged records. errors.Is(err, ErrLogCorrupt) holds.
type CorruptError struct {
	File   string // segment file path
	Pos    int64  // byte position of the first bad batch
	Reason error  // what was wrong with the batch at Pos
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("storage: log corrupt: %s at position %d: %v (valid batches follow; refusing to truncate)", e.File, e.Pos, e.Reason)
}

// Is makes errors.Is(err, ErrLogCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrLogCorrupt }

// Unwrap exposes the batch-level reason.
func (e *CorruptError) Unwrap() error { return e.Reason }
