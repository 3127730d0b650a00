// Package metadata is the cluster metadata of Sluice: topics and their ids,
// partitions with replicas, ISR, leader and epochs, configs per resource,
// producer-id blocks and the cluster id, held in one immutable Image that
// changes only by applying typed records, with one durable Store of those
// records under it. It imports nothing of Sluice's.
//
// The records are shaped after KRaft's (same names, fields and type
// numbers): TopicRecord, PartitionRecord, ConfigRecord, RemoveTopicRecord,
// ProducerIDsRecord, FeatureLevelRecord, plus Sluice's ClusterRecord; and
// for a cluster RegisterBrokerRecord, UnregisterBrokerRecord,
// FenceBrokerRecord, UnfenceBrokerRecord, BrokerRegistrationChangeRecord
// (brokers.go) and PartitionChangeRecord (partition_change.go). Apply is a
// pure function (image, record) → image; every broker that applies the
// same records reaches the same image. What to propose is decided
// elsewhere (package controller); Apply only refuses what does not follow
// (an unknown broker or a stale broker epoch, ISR ⊄ replicas, a leader
// outside the ISR).
//
// How it is used:
//
//	build records → Store.Append (durable) → publish the returned Image
//
// On a single node the Store is a FileStore: a small log file of fsynced
// batches plus a snapshot, both in <data-dir>/metadata/ (see store.go for
// the layout). It is its own format rather than a storage.Log of Kafka
// record batches: metadata needs none of a partition log's machinery
// (indexes, retention, compaction, zero-copy reads), a whole batch per
// Append is the unit of atomicity, and the local file is temporary — in the
// cluster issue a Raft log on go.etcd.io/raft/v3 takes its place behind
// the same Store interface (Append = propose, wait for commit, apply), with
// Image.Records as its snapshot.
//
// meta.properties (the node's identity, in Kafka's format) is read and
// written here too, and MigrateLegacy moves a data directory of the
// earlier ad-hoc files (sluice-topics.json, sluice-producer-ids) into the
// store.
package metadata
