package metadata

import (
	"cmp"
	"encoding/binary"
	"maps"
	"slices"
	"strings"
)

// SCRAM credentials, in KRaft's shapes: UserScramCredentialRecord (11)
// upserts one user's credential for one mechanism, and
// RemoveUserScramCredentialRecord (22) deletes it. The image keeps what a
// broker needs to verify a SCRAM proof (salt, stored key, server key,
// iterations), never a password or a salted password.
const (
	UserScramCredentialRecordType       RecordType = 11
	RemoveUserScramCredentialRecordType RecordType = 22
)

// Kafka's SCRAM mechanism codes.
const (
	ScramSHA256 int8 = 1
	ScramSHA512 int8 = 2
)

// Bounds on a credential's fields: Kafka's iteration range, and keys and
// salts no larger than a hash (SHA-512: 64 bytes) allows, with room.
const (
	MinScramIterations = 4096
	MaxScramIterations = 16384
	maxScramBytes      = 256
)

// UserScramCredentialRecord sets a user's credential for one mechanism.
type UserScramCredentialRecord struct {
	Name       string
	Mechanism  int8
	Salt       []byte
	StoredKey  []byte
	ServerKey  []byte
	Iterations int32
}

// RemoveUserScramCredentialRecord deletes a user's credential for one
// mechanism.
type RemoveUserScramCredentialRecord struct {
	Name      string
	Mechanism int8
}

func (UserScramCredentialRecord) Type() RecordType { return UserScramCredentialRecordType }
func (RemoveUserScramCredentialRecord) Type() RecordType {
	return RemoveUserScramCredentialRecordType
}

// ScramKey names one credential.
type ScramKey struct {
	User      string
	Mechanism int8
}

// ScramCredential is a user's credential for one mechanism.
type ScramCredential struct {
	Salt, StoredKey, ServerKey []byte
	Iterations                 int32
}

// Encoding (records.go has the primitives):
//
//	UserScramCredentialRecord        name, mechanism i8, salt, stored key, server key
//	                                 (each uvarint length ≤ 256, bytes), iterations i32
//	RemoveUserScramCredentialRecord  name, mechanism i8
func (r UserScramCredentialRecord) appendBody(dst []byte) []byte {
	dst = appendString(dst, r.Name)
	dst = append(dst, byte(r.Mechanism))
	for _, b := range [][]byte{r.Salt, r.StoredKey, r.ServerKey} {
		dst = binary.AppendUvarint(dst, uint64(len(b)))
		dst = append(dst, b...)
	}
	return binary.BigEndian.AppendUint32(dst, uint32(r.Iterations))
}

func (r RemoveUserScramCredentialRecord) appendBody(dst []byte) []byte {
	return append(appendString(dst, r.Name), byte(r.Mechanism))
}

func (d *decoder) scramBytes() []byte {
	return slices.Clone(d.take(d.length(maxScramBytes, 1)))
}

func (d *decoder) userScramCredential() UserScramCredentialRecord {
	r := UserScramCredentialRecord{Name: d.str(), Mechanism: int8(d.u8())}
	r.Salt, r.StoredKey, r.ServerKey = d.scramBytes(), d.scramBytes(), d.scramBytes()
	r.Iterations = d.i32()
	return r
}

func (d *decoder) removeUserScramCredential() RemoveUserScramCredentialRecord {
	return RemoveUserScramCredentialRecord{Name: d.str(), Mechanism: int8(d.u8())}
}

// ScramCredential returns a user's credential for a mechanism.
func (img Image) ScramCredential(user string, mechanism int8) (ScramCredential, bool) {
	c, ok := img.scram[ScramKey{user, mechanism}]
	return c, ok
}

// ScramUsers returns every credential's key, sorted by user and mechanism.
func (img Image) ScramUsers() []ScramKey {
	return slices.SortedFunc(maps.Keys(img.scram), func(a, b ScramKey) int {
		return cmp.Or(strings.Compare(a.User, b.User), cmp.Compare(a.Mechanism, b.Mechanism))
	})
}

func (img Image) scramRecords() []Record {
	var out []Record
	for _, k := range img.ScramUsers() {
		c := img.scram[k]
		out = append(out, UserScramCredentialRecord{Name: k.User, Mechanism: k.Mechanism,
			Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations})
	}
	return out
}

func validScramMechanism(m int8) bool { return m == ScramSHA256 || m == ScramSHA512 }

func (b *builder) userScramCredential(r UserScramCredentialRecord) error {
	switch {
	case r.Name == "" || len(r.Name) > MaxStringLen:
		return invalid("SCRAM credential with a bad user name")
	case !validScramMechanism(r.Mechanism):
		return invalid("SCRAM credential of unknown mechanism %d", r.Mechanism)
	case r.Iterations < MinScramIterations || r.Iterations > MaxScramIterations:
		return invalid("SCRAM iterations %d outside [%d, %d]", r.Iterations, MinScramIterations, MaxScramIterations)
	case len(r.Salt) == 0 || len(r.StoredKey) == 0 || len(r.ServerKey) == 0 ||
		len(r.Salt) > maxScramBytes || len(r.StoredKey) > maxScramBytes || len(r.ServerKey) > maxScramBytes:
		return invalid("SCRAM credential with an empty or oversized salt or key")
	}
	b.ownScram()
	b.img.scram[ScramKey{r.Name, r.Mechanism}] = ScramCredential{Salt: slices.Clone(r.Salt),
		StoredKey: slices.Clone(r.StoredKey), ServerKey: slices.Clone(r.ServerKey), Iterations: r.Iterations}
	return nil
}

func (b *builder) removeUserScramCredential(r RemoveUserScramCredentialRecord) error {
	k := ScramKey{r.Name, r.Mechanism}
	if _, ok := b.img.scram[k]; !ok {
		return invalid("no SCRAM credential of mechanism %d for %q", r.Mechanism, r.Name)
	}
	b.ownScram()
	delete(b.img.scram, k)
	return nil
}

// ownScram copies the credential map the first time a batch changes it.
func (b *builder) ownScram() {
	if !b.ownScramMap {
		b.img.scram = cloneOrMake(b.img.scram)
		b.ownScramMap = true
	}
}
