// Package replication is Kafka's partition replication as pure state
// machines: what a partition's leader knows of its followers (their log
// end offsets, who is in sync, the high watermark), and what a follower
// does to join its leader (truncate to where their histories agree, then
// fetch).
//
// Nothing here does I/O, starts a goroutine or reads a clock: events come
// in as method calls carrying the time, and decisions come out as return
// values — "the high watermark moved", "propose this ISR to the
// controller", "truncate your log to offset N". The drivers (the engine's
// partition type, the follower fetchers, the AlterPartition sender) do the
// I/O. That keeps every scenario of the seed write-up — a follower falling
// behind and leaving the ISR, a new leader cutting off an old leader's
// uncommitted tail — a table test that never sleeps.
//
// The rules are Kafka's:
//
//   - HW = the smallest log end offset among the leader and the replicas
//     of the "maximal" ISR: the committed ISR plus members whose addition is
//     in flight (a member's removal counts only once committed), so the HW
//     never passes a replica the controller may still elect. It never moves
//     backwards.
//   - A follower is caught up at time t when, at its fetch at t, it had
//     reached the leader's log end as of its previous fetch; it leaves the
//     ISR when it has not been caught up for replica.lag.time.max.ms, and
//     joins when its log end reaches the HW (and the leader's epoch start).
//   - ISR changes are proposed to the controller one at a time and take
//     effect only when the controller commits them (AlterPartition, KIP-497),
//     so the leader and the controller never disagree on who may be elected.
//   - A new follower fetches at once from its log end naming its latest
//     leader epoch (Fetch v12+'s LastFetchedEpoch, NewFetchingFollower);
//     the leader answers where the histories part (DivergingEpoch) and
//     the follower truncates there. When that answer names an epoch the
//     follower lacks it asks again (OffsetForLeaderEpoch, KIP-101/KIP-279;
//     NewFollower starts with that question). It never truncates below its
//     high watermark without the leader's answer.
//   - Replication throttles (KIP-73, throttle.go): a byte-rate Quota with
//     time as input, and the topics' throttled-replica lists.
package replication
