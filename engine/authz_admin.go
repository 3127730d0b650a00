package engine

// Committing ACL and quota changes: the decision is the controller's pure
// function (controller/authz.go). On a single node the broker runs it
// against its own image under meta.mu and commits the records to its
// store; in a cluster it forwards the request to the active controller,
// which decides and commits, and answers once its own image shows the
// change (done), so the client's next request to this broker sees it.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/controller"
	"github.com/sluice-broker/sluice/metadata"
)

// adminChange runs decide locally or forwards req; failed marks every
// result of an answer with a code when the change did not happen.
func (b *Broker) adminChange(req kmsg.Request, decide func(metadata.Image) ([]metadata.Record, kmsg.Response),
	done func(kmsg.Response, metadata.Image) bool, failed func(kmsg.Response, int16)) kmsg.Response {
	if b.cluster == nil {
		b.meta.mu.Lock()
		defer b.meta.mu.Unlock()
		recs, resp := decide(b.image())
		if len(recs) > 0 {
			if err := b.commitLocked(recs...); err != nil {
				b.log.Error("metadata change not committed", "api", kmsg.NameForKey(req.Key()), "err", err)
				failed(resp, kerr.KafkaStorageError.Code)
			}
		}
		return resp
	}
	resp, err := b.cluster.call(controller.LineAdmin, req)
	if err != nil {
		_, resp = decide(metadata.Image{})
		failed(resp, kerr.RequestTimedOut.Code)
		return resp
	}
	if !b.cluster.waitImage(func(img metadata.Image) bool { return done(resp, img) }) {
		failed(resp, kerr.RequestTimedOut.Code)
	}
	return resp
}
