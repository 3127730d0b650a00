package engine

// The rows of the config table for authorization, client quotas,
// connection limits and the security of the links between nodes, with
// Kafka's names and defaults.

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
		{name: "security.inter.broker.protocol", typ: typeString, oneOf: []string{ProtocolPlaintext, ProtocolSSL, ProtocolSASLPlaintext, ProtocolSASLSSL},
			doc: "the inter-broker listener by its security protocol (the listener of that name); set this or inter.broker.listener.name, not both",
			get: func(c *Config) string { return c.InterBroker.Protocol }, set: setInterBrokerProtocol},
		{name: "sasl.mechanism.inter.broker.protocol", typ: typeString, def: "GSSAPI", scope: perBroker, restartOnly: true,
			doc:   "mechanism brokers log in to each other's SASL inter-broker listener with (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512; GSSAPI is Kafka's default and not supported), as the username and password of that listener's <mechanism>.sasl.jaas.config",
			field: func(c *Config) any { return &c.InterBroker.SASLMechanism }},
		{name: "sasl.mechanism.controller.protocol", typ: typeString, def: "GSSAPI",
			doc:   "mechanism brokers and controllers log in to a SASL controller listener with (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512), as the username and password of that listener's <mechanism>.sasl.jaas.config",
			field: func(c *Config) any { return &c.InterBroker.ControllerSASLMechanism }},
		{name: "quota.window.num", typ: typeInt, def: "11", min: 1, max: maxInt32, doc: "samples a client quota's rate is measured over",
			field: func(c *Config) any { return &c.Authz.QuotaWindowNum }},
		{name: "quota.window.size.seconds", typ: typeInt, def: "1", min: 1, max: maxInt32, doc: "length of one quota sample",
			field: func(c *Config) any { return &c.Authz.QuotaWindowSeconds }},
	}
}
