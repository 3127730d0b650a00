package bench

import (
	"encoding/binary"
	"math/rand/v2"
	"time"
)

// poolSize is the random (or text) source values are cut from; values start
// at random offsets in it, so consecutive values differ and a compressor
// finds nothing to share between them.
const poolSize = 4 << 20

// payloads cuts record values from a pool. Not safe for concurrent use: one
// per producer.
type payloads struct {
	pool  []byte
	size  int
	runID uint64
	rng   *rand.Rand
}

func newPayloads(size int, runID uint64, compressible bool, seed uint64) *payloads {
	p := &payloads{pool: make([]byte, poolSize+size), size: size, runID: runID,
		rng: rand.New(rand.NewPCG(seed, runID))}
	if compressible {
		const text = "sluice bench compressible payload: the quick brown fox jumps over the lazy dog. "
		for i := 0; i < len(p.pool); i += copy(p.pool[i:], text) {
		}
		return p
	}
	src := rand.NewChaCha8([32]byte{byte(seed), byte(runID), 's', 'l', 'u', 'i', 'c', 'e'})
	_, _ = src.Read(p.pool) // ChaCha8.Read never fails
	return p
}

// next returns a fresh value stamped with the run id and send time.
func (p *payloads) next(sent time.Time) []byte {
	off := p.rng.IntN(poolSize)
	v := make([]byte, p.size)
	copy(v, p.pool[off:off+p.size])
	stamp(v, p.runID, sent)
	return v
}

func stamp(v []byte, runID uint64, sent time.Time) {
	binary.BigEndian.PutUint64(v[0:8], runID)
	binary.BigEndian.PutUint64(v[8:16], uint64(sent.UnixNano()))
}

// sentAt reads the send time back from a value of this run; ok is false for
// values from elsewhere (another run on the same topic, a foreign producer).
func sentAt(v []byte, runID uint64) (t time.Time, ok bool) {
	if len(v) < headerSize || binary.BigEndian.Uint64(v[0:8]) != runID {
		return time.Time{}, false
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(v[8:16]))), true
}
