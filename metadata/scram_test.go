package metadata

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func sampleScram(user string, mech int8) UserScramCredentialRecord {
	return UserScramCredentialRecord{Name: user, Mechanism: mech, Salt: []byte("salt"),
		StoredKey: bytes.Repeat([]byte{1}, 32), ServerKey: bytes.Repeat([]byte{2}, 32), Iterations: 8192}
}

func TestScramRecordsRoundTrip(t *testing.T) {
	for _, r := range []Record{sampleScram("alice", ScramSHA512), RemoveUserScramCredentialRecord{Name: "alice", Mechanism: ScramSHA256}} {
		got, err := DecodeRecord(AppendRecord(nil, r))
		if err != nil || !reflect.DeepEqual(got, r) {
			t.Fatalf("%v: got %#v, %v", r.Type(), got, err)
		}
	}
}

func TestScramCredentialsApply(t *testing.T) {
	img, err := ApplyAll(Image{}, []Record{sampleScram("alice", ScramSHA512), sampleScram("alice", ScramSHA256), sampleScram("bob", ScramSHA256)})
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := img.ScramCredential("alice", ScramSHA512); !ok || c.Iterations != 8192 || string(c.Salt) != "salt" {
		t.Fatalf("alice/512: %+v %v", c, ok)
	}
	checkSnapshotRoundTrip(t, img)
	img2, err := Apply(img, RemoveUserScramCredentialRecord{Name: "alice", Mechanism: ScramSHA512})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := img2.ScramCredential("alice", ScramSHA512); ok {
		t.Fatal("removed credential still there")
	}
	if _, ok := img.ScramCredential("alice", ScramSHA512); !ok {
		t.Fatal("Apply changed the image it was given")
	}
	if got := img2.ScramUsers(); !reflect.DeepEqual(got, []ScramKey{{"alice", ScramSHA256}, {"bob", ScramSHA256}}) {
		t.Fatalf("users: %v", got)
	}
	if (Image{}).IsEmpty() != true || img2.IsEmpty() {
		t.Fatal("IsEmpty ignores SCRAM credentials")
	}
}

func TestScramCredentialsRejected(t *testing.T) {
	bad := func(f func(*UserScramCredentialRecord)) Record {
		r := sampleScram("u", ScramSHA256)
		f(&r)
		return r
	}
	for name, r := range map[string]Record{
		"no user":         bad(func(r *UserScramCredentialRecord) { r.Name = "" }),
		"mechanism":       bad(func(r *UserScramCredentialRecord) { r.Mechanism = 3 }),
		"few iterations":  bad(func(r *UserScramCredentialRecord) { r.Iterations = 4095 }),
		"many iterations": bad(func(r *UserScramCredentialRecord) { r.Iterations = 16385 }),
		"empty salt":      bad(func(r *UserScramCredentialRecord) { r.Salt = nil }),
		"huge key":        bad(func(r *UserScramCredentialRecord) { r.StoredKey = make([]byte, 257) }),
		"remove unknown":  RemoveUserScramCredentialRecord{Name: "u", Mechanism: ScramSHA256},
	} {
		if _, err := Apply(Image{}, r); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzDecodeScramRecord(f *testing.F) {
	f.Add(AppendRecord(nil, sampleScram("alice", ScramSHA512)))
	f.Add(AppendRecord(nil, RemoveUserScramCredentialRecord{Name: "alice", Mechanism: 1}))
	f.Add([]byte{byte(UserScramCredentialRecordType), 0, 1, 'a', 1, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeRecord(b)
		if err != nil {
			return
		}
		if again := AppendRecord(nil, r); !bytes.Equal(again, b) {
			t.Fatalf("%v re-encodes as %x, was %x", r.Type(), again, b)
		}
		Apply(Image{}, r)
	})
}
