package server_test

import (
	"crypto/hmac"
	"crypto/sha512"
	"crypto/tls"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/internal/testbroker"
	"github.com/sluice-broker/sluice/netpoll"
	"github.com/sluice-broker/sluice/security/sasl"
)

// BenchmarkSCRAMConnect measures connection set-up over SASL_SSL with
// SCRAM-SHA-512 through the real listener: a TLS 1.3 handshake (ECDSA
// P-256, no resumption), SaslHandshake and the two SaslAuthenticate round
// trips. The client derives its proof from a salted password computed
// once, so the figure is the broker's side plus the client's TLS; client
// and broker share the machine.
//
//	go test -run XXX -bench SCRAMConnect ./internal/server/
func BenchmarkSCRAMConnect(b *testing.B) {
	pki := newPKI(b)
	tb := testbroker.StartNet(b, netpoll.BackendEpoll, set(
		"listeners", "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
		"sasl.enabled.mechanisms", "SCRAM-SHA-512",
		"ssl.keystore.location", pki.keyPEM,
	))
	salt := []byte("benchmark-salt-0123")
	salted, _ := sasl.SaltPassword(sasl.ScramSHA512, "pw", salt, 4096)
	adm := tb.Admin(b)
	if _, err := adm.AlterUserSCRAMs(ctxB(b), nil, []kadm.UpsertSCRAM{{User: "bench", Mechanism: kadm.ScramSha512, Iterations: 4096, Salt: salt, SaltedPassword: salted}}); err != nil {
		b.Fatal(err)
	}
	addr := tb.ListenerAddr("SASL_SSL")
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(sha512.New, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	clientKey := mac(salted, "Client Key")
	stored := sha512.Sum512(clientKey)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c, err := tls.Dial("tcp", addr, pki.clientTLS(false))
			if err != nil {
				b.Fatal(err)
			}
			rc := &rawClient{c: c}
			hs := kmsg.NewPtrSASLHandshakeRequest()
			hs.Version, hs.Mechanism = 1, "SCRAM-SHA-512"
			if _, err := rc.roundTrip(hs); err != nil {
				b.Fatal(err)
			}
			first := "n=bench,r=benchnonce"
			au := kmsg.NewPtrSASLAuthenticateRequest()
			au.Version, au.SASLAuthBytes = 2, []byte("n,,"+first)
			resp, err := rc.roundTrip(au)
			if err != nil {
				b.Fatal(err)
			}
			sf := string(resp.(*kmsg.SASLAuthenticateResponse).SASLAuthBytes)
			final := "c=biws," + strings.Split(sf, ",")[0]
			sig := mac(stored[:], first+","+sf+","+final)
			for i := range sig {
				sig[i] ^= clientKey[i]
			}
			au = kmsg.NewPtrSASLAuthenticateRequest()
			au.Version, au.SASLAuthBytes = 2, []byte(final+",p="+base64.StdEncoding.EncodeToString(sig))
			resp, err = rc.roundTrip(au)
			if err != nil || resp.(*kmsg.SASLAuthenticateResponse).ErrorCode != 0 {
				b.Fatalf("final: %v %+v", err, resp)
			}
			c.Close()
		}
	})
}
