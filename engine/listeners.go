package engine

// Listeners and the security keys, in Kafka's configuration names.
//
// listeners names each listening socket (NAME://host:port); a name is its
// security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL) unless
// listener.security.protocol.map maps it to one. The controller listener
// (controller.listener.names) is the cluster's and not a broker listener.
// advertised.listeners gives, per name, the address clients are told; a
// listener without one advertises its own. Config.Listen and
// Config.Advertise are the primary listener's (inter.broker.listener.name,
// or the listener security.inter.broker.protocol names, else the first):
// the address the broker registers under and other brokers reach it on,
// which flags may override.
//
// Nodes reach each other over the inter-broker listener (replica
// fetchers, transaction markers) and the controller listener (raft, the
// brokers' registration, heartbeats and metadata), each with whatever
// security protocol it has: Config.InterBroker.Dial and ControllerDial,
// which internal/server builds from that listener's ssl.* keys and
// sasl.mechanism.inter.broker.protocol / sasl.mechanism.controller.protocol
// with the username and password of the listener's JAAS config, as
// Kafka's brokers log in to each other.
//
// The ssl.*, sasl.* and listener.name.<listener>.* keys (and
// connections.max.reauth.ms) are kept as given in Config.Security for
// internal/server, which builds each listener's TLS and SASL from them; the
// engine only passes them on.

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metadata"
)

// Security protocols of listeners.
const (
	ProtocolPlaintext     = "PLAINTEXT"
	ProtocolSSL           = "SSL"
	ProtocolSASLPlaintext = "SASL_PLAINTEXT"
	ProtocolSASLSSL       = "SASL_SSL"
)

// protocolCodes are Kafka's SecurityProtocol ids, as broker registrations
// carry them.
var protocolCodes = map[string]int16{ProtocolPlaintext: 0, ProtocolSSL: 1, ProtocolSASLPlaintext: 2, ProtocolSASLSSL: 3}

// ProtocolCode is the Kafka id of a security protocol (-1 if unknown).
func ProtocolCode(p string) int16 {
	if c, ok := protocolCodes[p]; ok {
		return c
	}
	return -1
}

// InterBrokerSecurity is how nodes log in to each other.
type InterBrokerSecurity struct {
	Protocol                string // security.inter.broker.protocol; "" when unset
	SASLMechanism           string // sasl.mechanism.inter.broker.protocol
	ControllerSASLMechanism string // sasl.mechanism.controller.protocol
	// Dial opens a connection to another broker's inter-broker listener,
	// TLS and SASL done as that listener asks; internal/server sets it
	// (nil dials plain TCP). The replica fetchers and the transaction
	// coordinator's peers dial through it.
	Dial DialFunc
	// ClientOpts give the franz-go clients the broker makes of other
	// brokers (the share persister) the same TLS and SASL as Dial.
	ClientOpts []kgo.Opt
}

// DialFunc opens an authenticated connection to addr.
type DialFunc func(ctx context.Context, addr string) (net.Conn, error)

// dialPeer opens a connection to another broker within timeout, through
// dial (the one inter-broker dialer) or, without one, plain TCP.
func dialPeer(dial DialFunc, addr string, timeout time.Duration) (net.Conn, error) {
	if dial == nil {
		return net.DialTimeout("tcp", addr, timeout)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return dial(ctx, addr)
}

// Listener is one broker listener.
type Listener struct {
	Name       string // as in listeners, upper case
	Protocol   string // resolved by BrokerListeners
	Addr       string // host:port to bind
	Advertised string // host:port clients are told; "" for Addr
}

// maxListeners bounds listeners (a broker registration carries at most 16).
const maxListeners = 16

// listenerEntries parses a listener list; a bare host:port is PLAINTEXT.
func listenerEntries(v string) ([]Listener, error) {
	var out []Listener
	for _, l := range strings.Split(v, ",") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		name, addr, found := strings.Cut(l, "://")
		if !found {
			name, addr = ProtocolPlaintext, l
		}
		name = strings.ToUpper(strings.TrimSpace(name))
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("bad %s listener address: %w", name, err)
		}
		for _, o := range out {
			if o.Name == name {
				return nil, fmt.Errorf("listener %s is listed twice", name)
			}
		}
		out = append(out, Listener{Name: name, Addr: addr})
	}
	if len(out) > maxListeners {
		return nil, fmt.Errorf("more than %d listeners", maxListeners)
	}
	return out, nil
}

// setListeners reads listeners: the broker listeners and, when there is
// one, the controller listener. A list with only the controller listener
// is a controller-only node (a broker is refused at start).
func setListeners(c *Config, v string) error {
	entries, err := listenerEntries(v)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return fmt.Errorf("no listener")
	}
	c.listenersRaw = v
	return c.splitListeners()
}

func setAdvertisedListeners(c *Config, v string) error {
	if _, err := listenerEntries(v); err != nil {
		return err
	}
	c.advertisedRaw = v
	return c.splitListeners()
}

// listenersString and advertisedString describe the listeners as they
// are, the primary one at Listen and Advertise (which flags may set).
func listenersString(c *Config) string {
	var parts []string
	p := c.primaryIndex()
	for i, l := range c.Listeners {
		if i == p && c.Listen != "" {
			l.Addr = c.Listen
		}
		parts = append(parts, l.Name+"://"+l.Addr)
	}
	if len(c.Listeners) == 0 && c.Listen != "" {
		parts = append(parts, listenerOrEmpty(c.Listen))
	}
	if c.ControllerListen != "" {
		parts = append(parts, c.ControllerListenerName+"://"+c.ControllerListen)
	}
	return strings.Join(parts, ",")
}

func advertisedString(c *Config) string {
	var parts []string
	p := c.primaryIndex()
	for i, l := range c.Listeners {
		if i == p {
			l.Advertised = c.Advertise
		}
		if l.Advertised != "" {
			parts = append(parts, l.Name+"://"+l.Advertised)
		}
	}
	if len(c.Listeners) == 0 && c.Advertise != "" {
		parts = append(parts, listenerOrEmpty(c.Advertise))
	}
	return strings.Join(parts, ",")
}

func listenerOrEmpty(addr string) string {
	if addr == "" {
		return ""
	}
	return "PLAINTEXT://" + addr
}

// splitListeners derives Listeners, ControllerListen, Listen and Advertise
// from the raw lists; it runs whenever a key they depend on is set, since
// the table applies keys in its own order.
func (c *Config) splitListeners() error {
	entries, err := listenerEntries(c.listenersRaw)
	if err != nil || c.listenersRaw == "" {
		return err
	}
	adv, err := listenerEntries(c.advertisedRaw)
	if err != nil {
		return err
	}
	ctl := strings.ToUpper(strings.TrimSpace(c.ControllerListenerName))
	if ctl == "" {
		ctl = "CONTROLLER"
	}
	c.Listeners, c.ControllerListen = nil, ""
	for _, e := range entries {
		if e.Name == ctl {
			c.ControllerListen = e.Addr
			continue
		}
		for _, a := range adv {
			if a.Name == e.Name {
				e.Advertised = a.Addr
			}
		}
		c.Listeners = append(c.Listeners, e)
	}
	c.Listen, c.Advertise = "", ""
	if p := c.primaryIndex(); p >= 0 {
		c.Listen, c.Advertise = c.Listeners[p].Addr, c.Listeners[p].Advertised
	}
	return nil
}

// primaryIndex is the inter-broker listener's index in Listeners, else
// the first's (-1 when there is none).
func (c *Config) primaryIndex() int {
	for i, l := range c.Listeners {
		if l.Name == c.InterBrokerName() {
			return i
		}
	}
	if len(c.Listeners) == 0 {
		return -1
	}
	return 0
}

func setProtocolMap(c *Config, v string) error {
	m := map[string]string{}
	for _, kv := range strings.Split(v, ",") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		name, proto, ok := strings.Cut(kv, ":")
		proto = strings.ToUpper(strings.TrimSpace(proto))
		if !ok || ProtocolCode(proto) < 0 {
			return fmt.Errorf("want NAME:PROTOCOL with a protocol of PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL, got %q", kv)
		}
		m[strings.ToUpper(strings.TrimSpace(name))] = proto
	}
	c.ProtocolMap, c.protocolMapRaw = m, v
	return nil
}

// InterBrokerName is the inter-broker listener's name:
// security.inter.broker.protocol when set, else inter.broker.listener.name.
func (c *Config) InterBrokerName() string {
	if c.InterBroker.Protocol != "" {
		return c.InterBroker.Protocol
	}
	return strings.ToUpper(c.InterBrokerListenerName)
}

func setInterBrokerProtocol(c *Config, v string) error {
	c.InterBroker.Protocol = strings.ToUpper(strings.TrimSpace(v))
	return c.splitListeners()
}

func setInterBrokerListener(c *Config, v string) error {
	c.InterBrokerListenerName = strings.ToUpper(strings.TrimSpace(v))
	return c.splitListeners()
}

func setControllerListenerNames(c *Config, v string) error {
	c.ControllerListenerName = strings.TrimSpace(v)
	return c.splitListeners()
}

// BrokerListeners returns the broker listeners with their protocols, the
// primary one at the address Listen and Advertise say (flags may have set
// them). A Config made by hand with only Listen has one PLAINTEXT
// listener.
func (c *Config) BrokerListeners() ([]Listener, error) {
	ls := append([]Listener(nil), c.Listeners...)
	if len(ls) == 0 {
		if c.Listen == "" {
			return nil, nil
		}
		ls = []Listener{{Name: ProtocolPlaintext, Addr: c.Listen}}
	}
	p := c.primaryIndex()
	if p < 0 {
		p = 0
	}
	if c.Listen != "" {
		ls[p].Addr, ls[p].Advertised = c.Listen, c.Advertise
	}
	for i := range ls {
		proto, ok := c.ProtocolMap[ls[i].Name]
		if !ok && ProtocolCode(ls[i].Name) >= 0 {
			proto, ok = ls[i].Name, true
		}
		if !ok {
			return nil, fmt.Errorf("listener %s has no security protocol: map it in listener.security.protocol.map", ls[i].Name)
		}
		ls[i].Protocol = proto
	}
	if ib := strings.ToUpper(c.InterBrokerListenerName); c.InterBroker.Protocol != "" && ib != ProtocolPlaintext && ib != c.InterBroker.Protocol {
		return nil, fmt.Errorf("set only one of inter.broker.listener.name (%s) and security.inter.broker.protocol (%s)", ib, c.InterBroker.Protocol)
	}
	if c.ClusterMode() && ls[p].Name != c.InterBrokerName() && (len(ls) > 1 || c.InterBroker.Protocol != "") {
		return nil, fmt.Errorf("the inter-broker listener %s is not in listeners", c.InterBrokerName())
	}
	return ls, nil
}

// ControllerProtocol is the security protocol of the controller listener
// (controller.listener.names) as listener.security.protocol.map gives it;
// a name the map does not list is its protocol if it is one, else
// PLAINTEXT, as before the map was read for it.
func (c *Config) ControllerProtocol() string {
	name := strings.ToUpper(strings.TrimSpace(c.ControllerListenerName))
	if name == "" {
		name = "CONTROLLER"
	}
	if p, ok := c.ProtocolMap[name]; ok {
		return p
	}
	if ProtocolCode(name) >= 0 {
		return name
	}
	return ProtocolPlaintext
}

// ControllerListenerKey is the name security keys of the controller
// listener go under (listener.name.<name>.…).
func (c *Config) ControllerListenerKey() string {
	if n := strings.TrimSpace(c.ControllerListenerName); n != "" {
		return n
	}
	return "CONTROLLER"
}

// IsSecurityKey reports whether a server.properties key is one of the
// security keys kept in Config.Security.
func IsSecurityKey(k string) bool {
	if rest, ok := strings.CutPrefix(k, "listener.name."); ok {
		_, k, _ = strings.Cut(rest, ".")
		for _, mech := range []string{"plain.", "scram-sha-256.", "scram-sha-512.", "oauthbearer."} {
			if strings.HasPrefix(k, mech) {
				return true
			}
		}
	}
	if _, inTable := brokerKeys[k]; inTable {
		return false // sasl.mechanism.inter.broker.protocol, sasl.mechanism.controller.protocol
	}
	return strings.HasPrefix(k, "ssl.") || strings.HasPrefix(k, "sasl.") ||
		k == "connections.max.reauth.ms" || strings.HasPrefix(k, "sluice.sasl.")
}

// setSecurity keeps a security key's value.
func (c *Config) setSecurity(k, v string) {
	if c.Security == nil {
		c.Security = map[string]string{}
	} else if _, ok := c.Security[k]; !ok && len(c.Security) >= maxSecurityKeys {
		return
	}
	c.Security[k] = v
}

// maxSecurityKeys bounds Config.Security.
const maxSecurityKeys = 4096

// SecurityValue is a listener's value of a security key: the
// listener.name.<listener>.<key> override, else the key ("" when unset).
func (c *Config) SecurityValue(listener, key string) string {
	if v, ok := c.Security["listener.name."+strings.ToLower(listener)+"."+key]; ok {
		return v
	}
	return c.Security[key]
}

// endpoint is one advertised listener of this broker.
type endpoint struct {
	name, protocol string
	host           string
	port           int32
}

// advertisedEndpoints lists the broker's listeners as clients are told
// them, the primary (inter-broker) listener first.
func advertisedEndpoints(cfg *Config) ([]endpoint, error) {
	ls, err := cfg.BrokerListeners()
	if err != nil {
		return nil, err
	}
	p := max(cfg.primaryIndex(), 0)
	var out []endpoint
	for i := range ls {
		l := ls[(i+p)%len(ls)]
		addr := l.Advertised
		if addr == "" {
			addr = l.Addr
		}
		host, port, err := (&Config{Advertise: addr}).AdvertisedHostPort()
		if err != nil {
			return nil, fmt.Errorf("listener %s: %w", l.Name, err)
		}
		out = append(out, endpoint{name: l.Name, protocol: l.Protocol, host: host, port: port})
	}
	return out, nil
}

// advertised is this broker's endpoint of a listener (the primary's when
// the name is empty or unknown).
func (b *Broker) advertised(listener string) (string, int32) {
	for _, e := range b.endpoints {
		if e.name == listener {
			return e.host, e.port
		}
	}
	return b.host, b.port
}

// registrationListeners are the endpoints a broker registers, primary
// first.
func (b *Broker) registrationListeners() []kmsg.BrokerRegistrationRequestListener {
	var out []kmsg.BrokerRegistrationRequestListener
	for i, e := range b.endpoints {
		ls := kmsg.NewBrokerRegistrationRequestListener()
		ls.Name, ls.Host, ls.Port, ls.SecurityProtocol = e.name, e.host, uint16(e.port), ProtocolCode(e.protocol)
		if i == 0 {
			ls.Host, ls.Port = b.host, uint16(b.port) // what AdvertisedHostPort says, flags included
		}
		out = append(out, ls)
	}
	if len(out) == 0 {
		ls := kmsg.NewBrokerRegistrationRequestListener()
		ls.Name, ls.Host, ls.Port = ProtocolPlaintext, b.host, uint16(b.port)
		out = append(out, ls)
	}
	return out
}

// brokerEndpointFor is where broker id serves a listener, from the image;
// "" is its first (inter-broker) endpoint. A broker without that listener
// is left out of the answer, as Kafka does.
func brokerEndpointFor(img metadata.Image, id int32, listener string) (host string, port int32, ok bool) {
	br, found := img.Broker(id)
	if !found || len(br.Endpoints) == 0 {
		return "", 0, false
	}
	if listener == "" {
		return br.Endpoints[0].Host, int32(br.Endpoints[0].Port), true
	}
	for _, e := range br.Endpoints {
		if e.Name == listener {
			return e.Host, int32(e.Port), true
		}
	}
	return "", 0, false
}
