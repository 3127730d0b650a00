// Package share is KIP-932 share groups as pure state machines: queue
// semantics over Kafka partitions, where many members of one group read
// the same partition and each record is acknowledged on its own.
//
// Three parts, each taking time as an input (an injected group.Clock or a
// now argument), so their tests drive a fake clock and never sleep:
//
//   - Partition (partition.go) is one share-partition on the leader of a
//     topic partition: the records in flight between the share-partition
//     start offset (SPSO) and end offset (SPEO), each Available, Acquired
//     by one member under a lock that expires, Acknowledged or Archived,
//     with its delivery count.
//   - Groups (groups.go) is the share-group coordinator's membership: the
//     ShareGroupHeartbeat and ShareGroupDescribe state machine (member
//     and group epochs, the simple assignor, session timeouts), written to
//     __consumer_offsets with Kafka's share-group record schemas and
//     replayed from it when a partition of that topic is loaded.
//   - States (states.go) is the share coordinator: the durable state of
//     every share-partition (its SPSO and state batches) as ShareSnapshot
//     records in __share_group_state, partitioned by the key
//     "group:topicId:partition" as Kafka does, loaded and unloaded with
//     the leadership of that topic's partitions.
//
// Records (records.go) are Kafka's coordinator records: the key is an
// int16 record type and the key fields (not flexible), the value an int16
// version (0) and the flexible value fields, so that Kafka's tools decode
// what Sluice writes.
package share
