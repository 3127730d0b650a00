package engine

// Record-batch compression: the rewrite a produce needs when a topic's
// compression.type names a codec other than the one the producer used.
//
// Batches are stored as sent ("producer") unless the topic forces a codec;
// then the records section is decompressed and compressed again
// (record.Rebuild), and the batch gets a new length, codec bits and
// CRC-32C. Everything else in the header (producer id, sequence,
// timestamps) is kept, as Kafka keeps it. The codecs themselves live in
// package record.

import "github.com/sluice-broker/sluice/record"

// codecProducer means "store what the producer sent".
const codecProducer record.Codec = -1

// topicCodec maps a compression.type value to the codec batches are stored
// with, or codecProducer.
func topicCodec(compressionType string) record.Codec {
	switch compressionType {
	case "uncompressed":
		return record.None
	case "gzip":
		return record.Gzip
	case "snappy":
		return record.Snappy
	case "lz4":
		return record.LZ4
	case "zstd":
		return record.Zstd
	}
	return codecProducer
}
