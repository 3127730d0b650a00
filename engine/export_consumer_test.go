package engine

// SetGroupBrokerInt sets an Int broker key of the group protocols
// (group.consumer.heartbeat.interval.ms, …) for the external tests.
func SetGroupBrokerInt(c *Config, name string, v int64) {
	for i := range groupBrokerSpecs {
		if groupBrokerSpecs[i].name == name {
			c.GroupProtocolKeys[i] = v
			return
		}
	}
	panic("no group broker key " + name)
}
