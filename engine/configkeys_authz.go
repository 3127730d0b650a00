package engine

// The rows of the config table for authorization, client quotas and
// connection limits, with Kafka's names and defaults.

func authzKeys() []configKey {
	return []configKey{
		{name: "authorizer.class.name", typ: typeString, oneOf: []string{StandardAuthorizerClass},
			doc:   "turns ACLs on: Kafka's StandardAuthorizer (empty: everyone may do everything)",
			field: func(c *Config) any { return &c.Authz.AuthorizerClass }},
		{name: "super.users", typ: typeString, doc: "principals allowed everything, separated by ';' (User:admin;User:broker)",
			field: func(c *Config) any { return &c.Authz.SuperUsers }},
		{name: "allow.everyone.if.no.acl.found", typ: typeBool, def: "false", doc: "allow any operation on a resource that has no ACL",
			field: func(c *Config) any { return &c.Authz.AllowIfNoACL }},
		{name: "max.connections", typ: typeInt, def: "2147483647", min: 0, max: maxInt32, scope: clusterWide, restartOnly: true,
			doc: "most connections the broker keeps open; more wait in the accept queue", field: func(c *Config) any { return &c.Authz.MaxConnections }},
		{name: "max.connections.per.ip", typ: typeInt, def: "2147483647", min: 0, max: maxInt32, scope: clusterWide, restartOnly: true,
			doc: "most connections from one address; more are closed at once", field: func(c *Config) any { return &c.Authz.MaxConnectionsPerIP }},
		{name: "max.connections.per.ip.overrides", typ: typeString, scope: clusterWide, restartOnly: true,
			doc: "per-address limits, host:count,host:count", field: func(c *Config) any { return &c.Authz.MaxConnectionsPerIPOver }},
		{name: "max.connection.creation.rate", typ: typeInt, def: "2147483647", min: 0, max: maxInt32, scope: clusterWide, restartOnly: true,
			doc: "new connections accepted per second; more are delayed", field: func(c *Config) any { return &c.Authz.MaxConnectionCreateRate }},
		{name: "quota.window.num", typ: typeInt, def: "11", min: 1, max: maxInt32, doc: "samples a client quota's rate is measured over",
			field: func(c *Config) any { return &c.Authz.QuotaWindowNum }},
		{name: "quota.window.size.seconds", typ: typeInt, def: "1", min: 1, max: maxInt32, doc: "length of one quota sample",
			field: func(c *Config) any { return &c.Authz.QuotaWindowSeconds }},
	}
}
