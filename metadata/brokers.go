package metadata

import (
	"cmp"
	"encoding/binary"
	"maps"
	"slices"
)

// The broker records, in KRaft's shapes (RegisterBrokerRecord 0,
// UnregisterBrokerRecord 1, FenceBrokerRecord 7, UnfenceBrokerRecord 8,
// BrokerRegistrationChangeRecord 17). A broker's epoch names one
// registration: every record about a registered broker carries the epoch
// it applies to, and Apply refuses one whose epoch is not the current one,
// so a record decided about an earlier incarnation never touches a later.

// RegisterBrokerRecord registers a broker, replacing any earlier
// registration of the same id (a restarted process, a new incarnation).
type RegisterBrokerRecord struct {
	BrokerID      int32
	IncarnationID [16]byte // a random id per process start
	// BrokerEpoch is the offset of this record in the metadata log, as in
	// KRaft. It is larger than the epoch of the registration it replaces.
	BrokerEpoch int64
	Endpoints   []Endpoint
	Rack        *string // broker.rack; nil when unset
	// A new registration is fenced: the broker leads and joins nothing
	// until the controller unfences it. A snapshot (Image.Records) carries
	// the current state in these two fields.
	Fenced               bool
	InControlledShutdown bool
}

// Endpoint is one listener a broker serves.
type Endpoint struct {
	Name             string // listener name, e.g. PLAINTEXT
	Host             string
	Port             uint16
	SecurityProtocol int16 // Kafka's codes: 0 PLAINTEXT, 1 SSL, 2 SASL_PLAINTEXT, 3 SASL_SSL
}

// UnregisterBrokerRecord removes a broker's registration. Its replicas stay
// in partitions' replica lists (reassignment moves them).
type UnregisterBrokerRecord struct {
	BrokerID    int32
	BrokerEpoch int64
}

// FenceBrokerRecord fences a broker: it may no longer lead or join ISRs.
type FenceBrokerRecord struct {
	BrokerID    int32
	BrokerEpoch int64
}

// UnfenceBrokerRecord unfences a broker that has caught up with the log.
type UnfenceBrokerRecord struct {
	BrokerID    int32
	BrokerEpoch int64
}

// BrokerRegistrationChangeRecord changes a registration's fenced and
// controlled-shutdown state, with KRaft's values.
type BrokerRegistrationChangeRecord struct {
	BrokerID    int32
	BrokerEpoch int64
	// Fenced: FenceChangeUnfence, FenceChangeNone or FenceChangeFence.
	Fenced int8
	// InControlledShutdown: ShutdownChangeNone or ShutdownChangeEnter.
	// Only a new registration leaves controlled shutdown.
	InControlledShutdown int8
}

// The values of BrokerRegistrationChangeRecord's fields.
const (
	FenceChangeUnfence  int8 = -1
	FenceChangeNone     int8 = 0
	FenceChangeFence    int8 = 1
	ShutdownChangeNone  int8 = 0
	ShutdownChangeEnter int8 = 1
)

const (
	RegisterBrokerRecordType           RecordType = 0
	UnregisterBrokerRecordType         RecordType = 1
	FenceBrokerRecordType              RecordType = 7
	UnfenceBrokerRecordType            RecordType = 8
	BrokerRegistrationChangeRecordType RecordType = 17
)

func (RegisterBrokerRecord) Type() RecordType           { return RegisterBrokerRecordType }
func (UnregisterBrokerRecord) Type() RecordType         { return UnregisterBrokerRecordType }
func (FenceBrokerRecord) Type() RecordType              { return FenceBrokerRecordType }
func (UnfenceBrokerRecord) Type() RecordType            { return UnfenceBrokerRecordType }
func (BrokerRegistrationChangeRecord) Type() RecordType { return BrokerRegistrationChangeRecordType }

// Encoding (see records.go for the primitives):
//
//	RegisterBrokerRecord   id i32, incarnation 16B, epoch i64,
//	                       endpoints (uvarint count, each: name, host, port u16, protocol i16),
//	                       rack nullable string, fenced u8 (0|1), in controlled shutdown u8 (0|1)
//	Unregister/Fence/Unfence  id i32, epoch i64
//	BrokerRegistrationChangeRecord  id i32, epoch i64, fenced i8, in controlled shutdown i8
const maxEndpoints = 16 // listeners per broker

func (r RegisterBrokerRecord) appendBody(dst []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(r.BrokerID))
	dst = append(dst, r.IncarnationID[:]...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.BrokerEpoch))
	dst = binary.AppendUvarint(dst, uint64(len(r.Endpoints)))
	for _, e := range r.Endpoints {
		dst = appendString(dst, e.Name)
		dst = appendString(dst, e.Host)
		dst = binary.BigEndian.AppendUint16(dst, e.Port)
		dst = binary.BigEndian.AppendUint16(dst, uint16(e.SecurityProtocol))
	}
	dst = appendNullableString(dst, r.Rack)
	return append(dst, boolByte(r.Fenced), boolByte(r.InControlledShutdown))
}

func (r UnregisterBrokerRecord) appendBody(dst []byte) []byte {
	return appendBrokerEpoch(dst, r.BrokerID, r.BrokerEpoch)
}

func (r FenceBrokerRecord) appendBody(dst []byte) []byte {
	return appendBrokerEpoch(dst, r.BrokerID, r.BrokerEpoch)
}

func (r UnfenceBrokerRecord) appendBody(dst []byte) []byte {
	return appendBrokerEpoch(dst, r.BrokerID, r.BrokerEpoch)
}

func (r BrokerRegistrationChangeRecord) appendBody(dst []byte) []byte {
	dst = appendBrokerEpoch(dst, r.BrokerID, r.BrokerEpoch)
	return append(dst, byte(r.Fenced), byte(r.InControlledShutdown))
}

func appendBrokerEpoch(dst []byte, id int32, epoch int64) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(id))
	return binary.BigEndian.AppendUint64(dst, uint64(epoch))
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

func (d *decoder) registerBroker() RegisterBrokerRecord {
	r := RegisterBrokerRecord{BrokerID: d.i32(), IncarnationID: d.uuid(), BrokerEpoch: d.i64()}
	// An endpoint takes at least 6 bytes (two empty strings, port, protocol).
	n := d.length(maxEndpoints, 6)
	if n > 0 {
		r.Endpoints = make([]Endpoint, n)
	}
	for i := range r.Endpoints {
		r.Endpoints[i] = Endpoint{Name: d.str(), Host: d.str(), Port: d.u16(), SecurityProtocol: int16(d.u16())}
	}
	r.Rack = d.nullableStr()
	r.Fenced, r.InControlledShutdown = d.boolean(), d.boolean()
	return r
}

// boolean reads 0 or 1; any other byte is malformed (one encoding per
// record).
func (d *decoder) boolean() bool {
	switch d.u8() {
	case 0:
		return false
	case 1:
		return true
	}
	d.bad = true
	return false
}

// BrokerImage is one registered broker.
type BrokerImage struct {
	ID            int32
	IncarnationID [16]byte
	Epoch         int64
	Endpoints     []Endpoint
	Rack          *string
	// Fenced brokers neither lead nor join ISRs (the controller keeps it
	// so; Apply does not check partitions against brokers, since a single
	// node's partitions name a node that never registers).
	Fenced               bool
	InControlledShutdown bool
}

// Eligible reports whether the broker may lead or join an ISR: unfenced
// and not shutting down.
func (b BrokerImage) Eligible() bool { return !b.Fenced && !b.InControlledShutdown }

// RackOrEmpty returns the broker's rack, "" when unset.
func (b BrokerImage) RackOrEmpty() string {
	if b.Rack == nil {
		return ""
	}
	return *b.Rack
}

func (b BrokerImage) record() RegisterBrokerRecord {
	return RegisterBrokerRecord{BrokerID: b.ID, IncarnationID: b.IncarnationID, BrokerEpoch: b.Epoch,
		Endpoints: b.Endpoints, Rack: b.Rack, Fenced: b.Fenced, InControlledShutdown: b.InControlledShutdown}
}

// Broker returns the registration of broker id.
func (img Image) Broker(id int32) (BrokerImage, bool) {
	b, ok := img.brokers[id]
	return b, ok
}

// Brokers returns every registered broker, by id.
func (img Image) Brokers() []BrokerImage {
	return slices.SortedFunc(maps.Values(img.brokers), func(a, b BrokerImage) int { return cmp.Compare(a.ID, b.ID) })
}

// BrokerEligible reports whether id is a registered broker that may lead
// or join an ISR.
func (img Image) BrokerEligible(id int32) bool {
	b, ok := img.brokers[id]
	return ok && b.Eligible()
}

func (b *builder) registerBroker(r RegisterBrokerRecord) error {
	if r.BrokerID < 0 || r.BrokerEpoch < 0 {
		return invalid("registration of broker %d epoch %d", r.BrokerID, r.BrokerEpoch)
	}
	if old, ok := b.img.brokers[r.BrokerID]; ok && r.BrokerEpoch <= old.Epoch {
		return invalid("registration of broker %d at epoch %d does not follow epoch %d", r.BrokerID, r.BrokerEpoch, old.Epoch)
	}
	b.ownBrokerMap()
	b.img.brokers[r.BrokerID] = BrokerImage{ID: r.BrokerID, IncarnationID: r.IncarnationID, Epoch: r.BrokerEpoch,
		Endpoints: r.Endpoints, Rack: r.Rack, Fenced: r.Fenced, InControlledShutdown: r.InControlledShutdown}
	return nil
}

// currentBroker returns the registration a record names by id and epoch.
func (b *builder) currentBroker(id int32, epoch int64) (BrokerImage, error) {
	br, ok := b.img.brokers[id]
	switch {
	case !ok:
		return br, invalid("broker %d is not registered", id)
	case br.Epoch != epoch:
		return br, invalid("broker %d is at epoch %d, not %d", id, br.Epoch, epoch)
	}
	return br, nil
}

func (b *builder) unregisterBroker(r UnregisterBrokerRecord) error {
	if _, err := b.currentBroker(r.BrokerID, r.BrokerEpoch); err != nil {
		return err
	}
	b.ownBrokerMap()
	delete(b.img.brokers, r.BrokerID)
	return nil
}

func (b *builder) changeBroker(id int32, epoch int64, fenced, shutdown int8) error {
	br, err := b.currentBroker(id, epoch)
	if err != nil {
		return err
	}
	switch fenced {
	case FenceChangeUnfence:
		br.Fenced = false
	case FenceChangeFence:
		br.Fenced = true
	case FenceChangeNone:
	default:
		return invalid("broker %d: fenced change %d", id, fenced)
	}
	switch shutdown {
	case ShutdownChangeEnter:
		br.InControlledShutdown = true
	case ShutdownChangeNone:
	default:
		return invalid("broker %d: controlled shutdown change %d", id, shutdown)
	}
	b.ownBrokerMap()
	b.img.brokers[id] = br
	return nil
}

func (b *builder) ownBrokerMap() {
	if !b.ownBrokers {
		b.img.brokers = cloneOrMake(b.img.brokers)
		b.ownBrokers = true
	}
}

func (img Image) brokerRecords() []Record {
	var out []Record
	for _, br := range img.Brokers() {
		out = append(out, br.record())
	}
	return out
}
