// Package bench is Sluice's load generator and its side-by-side runner.
//
// The load generator (Run) speaks Kafka through franz-go, so it measures any
// Kafka-compatible broker the same way: producers send records whose first
// bytes carry a run id and the time the record was meant to be sent,
// consumers read them back, and both sides feed HDR histograms:
//
//	record value: | run id (8) | send time, unix ns (8) | random bytes … |
//
// Produce-ack latency runs from a record's send time to its produce promise;
// end-to-end latency from the same time to the consumer seeing it. In
// fixed-rate runs the send time is the time the schedule meant the record to
// go, not when the generator got round to it, so a stall in the broker (or
// the client) is charged to every record it delayed (no coordinated
// omission).
//
// RawFetch is a second consumer that frames Fetch requests itself and skips
// record bytes without decoding them, so client decoding cost does not hide
// the broker's.
//
// The side-by-side runner (Sluice vs Kafka vs kfake) is package
// bench/compare, built as its own command so the sluice binary links no
// test broker.
package bench
