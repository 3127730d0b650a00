package engine

import (
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-broker/sluice/metadata"
)

// metadataCache keeps the encoded bodies of full Metadata responses (every
// topic), which clients ask for on every metadata refresh and which at tens
// of thousands of partitions take milliseconds to build. An answer depends
// on the image, on the partitions hosted here (their leader epochs on a
// single node) and on what the request asks: the version, the two
// authorized-operations flags and the listener it came in on (whose
// endpoints the broker list advertises). A cached body is valid while the
// image pointer and the generation it was built under are still current.
//
// A hit answers with the cached bytes themselves as a part of the response
// (they are never written to again), so it copies and allocates nothing.
type metadataCache struct {
	// gen moves after every syncPartitions, the only place the hosted
	// topics, their partitions and their roles change. A body is built
	// after its generation and image are read, so a change that lands
	// while it is built leaves it under a generation no longer current.
	gen atomic.Uint64

	mu struct {
		sync.Mutex
		// ents holds at most maxMetadataCacheEntries bodies, oldest
		// first. Invariant: no two have the same key, gen and img.
		ents []metadataCacheEntry
	}
}

// maxMetadataCacheEntries bounds the cache: one body per version, flag
// combination and listener in use; clients use one or two of them.
const maxMetadataCacheEntries = 8

// metadataKey is what a full Metadata response depends on besides the
// broker's state.
type metadataKey struct {
	version              int16
	clusterOps, topicOps bool
	listener             string
}

type metadataCacheEntry struct {
	key  metadataKey
	gen  uint64
	img  *metadata.Image
	body []byte // the response body, after the header; read-only
}

// invalidate marks every cached body stale.
func (c *metadataCache) invalidate() { c.gen.Add(1) }

// metadataState returns the generation and image a body built now describes.
func (b *Broker) metadataState() (uint64, *metadata.Image) {
	gen := b.mdCache.gen.Load()
	return gen, b.meta.image.Load()
}

// lookup returns the cached body for k built under gen and img, or nil.
func (c *metadataCache) lookup(k metadataKey, gen uint64, img *metadata.Image) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.mu.ents {
		e := &c.mu.ents[i]
		if e.key == k && e.gen == gen && e.img == img {
			return e.body
		}
	}
	return nil
}

// store keeps body for k, dropping entries of older generations or images
// and, past the bound, the oldest one.
func (c *metadataCache) store(k metadataKey, gen uint64, img *metadata.Image, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ents := c.mu.ents[:0]
	for _, e := range c.mu.ents {
		if e.gen == gen && e.img == img && e.key != k {
			ents = append(ents, e)
		}
	}
	if len(ents) == maxMetadataCacheEntries {
		ents = append(ents[:0], ents[1:]...)
	}
	clear(c.mu.ents[len(ents):])
	c.mu.ents = append(ents, metadataCacheEntry{key: k, gen: gen, img: img, body: body})
}

// fullMetadataKey is the cache key of a request for every topic.
func fullMetadataKey(r *Request, req *kmsg.MetadataRequest) metadataKey {
	return metadataKey{version: r.Version, clusterOps: req.IncludeClusterAuthorizedOperations,
		topicOps: req.IncludeTopicAuthorizedOperations, listener: r.listener()}
}

// respondFullMetadata answers a request for every topic from the cache,
// building and caching the body on a miss.
func (b *Broker) respondFullMetadata(r *Request, req *kmsg.MetadataRequest) {
	k := fullMetadataKey(r, req)
	gen, img := b.metadataState()
	body := b.mdCache.lookup(k, gen, img)
	if body == nil {
		resp := b.fullMetadata(req, r.Version, k.listener)
		body = resp.AppendTo(nil)
		b.mdCache.store(k, gen, img, body)
	}
	w := r.beginResponse(req.IsFlexible())
	w.bytes(body)
	r.finish(w.finish())
}
