package engine

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluice-broker/sluice/storage"
)

// storageErrors maps each storage error to the Kafka error it answers with.
var storageErrors = []struct {
	err  error
	code *kerr.Error
}{
	{storage.ErrCorruptMessage, kerr.CorruptMessage},
	{storage.ErrInvalidRecord, kerr.InvalidRecord},
	{storage.ErrMessageTooLarge, kerr.MessageTooLarge},
	{storage.ErrRecordListTooLarge, kerr.RecordListTooLarge},
	{storage.ErrOffsetOutOfRange, kerr.OffsetOutOfRange},
	{storage.ErrOutOfOrderSequence, kerr.OutOfOrderSequenceNumber},
	{storage.ErrInvalidProducerEpoch, kerr.InvalidProducerEpoch},
	{storage.ErrUnknownProducerID, kerr.UnknownProducerID},
	{storage.ErrInvalidTimestamp, kerr.InvalidTimestamp},
	{storage.ErrClosed, kerr.NotLeaderForPartition},
	{storage.ErrTransactionCoordinatorFenced, kerr.TransactionCoordinatorFenced},
}

// storageErrorCode maps a storage error to a Kafka code; anything else is
// a failed disk (KAFKA_STORAGE_ERROR), which clients retry elsewhere.
func storageErrorCode(err error) int16 {
	for _, e := range storageErrors {
		if errors.Is(err, e.err) {
			return e.code.Code
		}
	}
	return kerr.KafkaStorageError.Code
}
