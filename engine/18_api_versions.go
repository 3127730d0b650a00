package engine

// ApiVersions (key 18), versions 0-4.
//
// Lists every API registered in this package with its version range. A
// client that asks with a newer ApiVersions than we serve gets, as from
// Kafka, UNSUPPORTED_VERSION in the v0 body layout together with the list,
// so it can retry with a version we speak. v3+ also carries
// SupportedFeatures / FinalizedFeatures: only transaction.version (txns.go),
// which clients read to choose transactions version 2 (Kafka 4's
// metadata.version is not something Sluice negotiates).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(kmsg.ApiVersions, 0, 4, (*Broker).handleApiVersions) }

func (b *Broker) handleApiVersions(r *Request) {
	req := r.Msg.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	if r.Version >= 3 && !validSoftwareName(req.ClientSoftwareName, req.ClientSoftwareVersion) {
		resp.ErrorCode = kerr.InvalidRequest.Code
		r.Respond(resp)
		return
	}
	resp.ApiKeys = apiKeyList()
	b.txnFeatures(resp) // txns.go
	r.Respond(resp)
}

// apiVersionsUnsupported answers an ApiVersions request of a version newer
// than we serve: v0 body, UNSUPPORTED_VERSION, and the full list.
func (b *Broker) apiVersionsUnsupported(r *Request) {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.ErrorCode = kerr.UnsupportedVersion.Code
	resp.ApiKeys = apiKeyList()
	r.Version = 0
	r.Respond(resp)
}

func apiKeyList() []kmsg.ApiVersionsResponseApiKey {
	served := servedAPIs()
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(served))
	for _, a := range served {
		keys = append(keys, kmsg.ApiVersionsResponseApiKey{ApiKey: a.key, MinVersion: a.min, MaxVersion: a.max})
	}
	return keys
}

// validSoftwareName applies Kafka's rule for ClientSoftwareName/Version
// (KIP-511): letters, digits, '.', '-', starting and ending alphanumeric.
// An empty name is accepted as Kafka's own clients sometimes send one.
func validSoftwareName(name, version string) bool {
	return validSoftwareField(name) && validSoftwareField(version)
}

func validSoftwareField(s string) bool {
	if s == "" {
		return true
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && c != '.' && c != '-' {
			return false
		}
		if !alnum && (i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}
