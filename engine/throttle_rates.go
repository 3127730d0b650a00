package engine

// ReplicationThrottles returns the leader and follower replication
// throttles in bytes/s (leader.replication.throttled.rate and
// follower.replication.throttled.rate; math.MaxInt64 means none), from
// server.properties.
//
// The dynamic broker configs (the dynconfig work, engine/dynconfig.go)
// define this method over the effective config (per-broker > cluster
// default > static); when they land this file goes, and the throttles
// follow AlterConfigs with no other change.
func (b *Broker) ReplicationThrottles() (leader, follower int64) {
	return b.cfg.LeaderReplicationThrottledRate, b.cfg.FollowerReplicationThrottledRate
}
