package engine

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// api is one Kafka API the broker serves, registered by its own file.
type api struct {
	key      int16
	name     string
	min, max int16 // versions advertised in ApiVersions and accepted
	serve    func(b *Broker, r *Request)
}

// apis is indexed by API key; nil entries are APIs the broker does not
// serve (their requests close the connection, as Kafka does).
var apis [maxAPIKey]*api

// maxAPIKey bounds the API key space (Kafka keys are well below it).
const maxAPIKey = 128

// register adds an API at package init; each API file registers itself so
// the list advertised in ApiVersions is exactly what is implemented.
func register(key kmsg.Key, min, max int16, serve func(b *Broker, r *Request)) {
	k := key.Int16()
	if apis[k] != nil {
		panic("engine: api registered twice: " + kmsg.NameForKey(k))
	}
	apis[k] = &api{key: k, name: kmsg.NameForKey(k), min: min, max: max, serve: serve}
}

func lookupAPI(key int16) *api {
	if key < 0 || int(key) >= len(apis) {
		return nil
	}
	return apis[key]
}

// servedAPIs lists the served APIs in key order.
func servedAPIs() []*api {
	var out []*api
	for _, a := range apis {
		if a != nil {
			out = append(out, a)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}
