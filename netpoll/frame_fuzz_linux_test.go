package netpoll

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// The read paths of the three backends, fuzzed against one another: std
// reads exactly one frame at a time (readFrame); epoll and uring read
// whatever the socket holds, in chunks the kernel chooses, through
// frameReader, a stash for bytes past a frame, and reads straight into a
// large frame's body. Given the same bytes, all must yield the same frames
// and reject the same bad size prefix.

// referenceFrames is what readFrame (the std backend) makes of data.
func referenceFrames(data []byte, max int32) (frames [][]byte, bad bool) {
	var hdr [4]byte
	r := bytes.NewReader(data)
	for {
		f, err := readFrame(r, hdr[:], max)
		if err != nil {
			return frames, errors.Is(err, ErrFrameSize)
		}
		frames = append(frames, append([]byte(nil), *f...))
		putFrame(f)
	}
}

// chunker delivers data in the sizes the fuzzer chose, like a socket.
type chunker struct {
	data  []byte
	sizes []byte
	i     int
}

func (c *chunker) next(max int) []byte {
	n := 1
	if len(c.sizes) > 0 {
		n = int(c.sizes[c.i%len(c.sizes)])*97 + 1
		c.i++
	}
	n = min(n, max, len(c.data))
	b := c.data[:n]
	c.data = c.data[n:]
	return b
}

// epollFrames runs the epoll backend's nextFrame over data.
func epollFrames(data, sizes []byte, max int32) (frames [][]byte, bad bool) {
	src := &chunker{data: data, sizes: sizes}
	l := &epollLoop{scratch: make([]byte, scratchSize)}
	l.read = func(_ int, b []byte) (int, error) {
		if len(src.data) == 0 {
			return 0, unix.EAGAIN
		}
		return copy(b, src.next(len(b))), nil
	}
	c := &conn{}
	c.in.max = max
	for {
		c.readable = true
		f, err := l.nextFrame(c)
		if err != nil {
			return frames, errors.Is(err, ErrFrameSize)
		}
		if f == nil {
			if len(src.data) > 0 {
				continue // more bytes arrive: a new edge
			}
			c.in.reset()
			return frames, false
		}
		frames = append(frames, append([]byte(nil), *f...))
		putFrame(f)
	}
}

// uringFrames follows the uring backend's choices: stash first, then a
// recv straight into a large body, else into a provided buffer.
func uringFrames(data, sizes []byte, max int32) (frames [][]byte, bad bool) {
	src := &chunker{data: data, sizes: sizes}
	c := &conn{}
	c.in.max = max
	for {
		var f *[]byte
		var err error
		switch {
		case c.hasQueuedInput():
			f, err = c.takeQueuedFrame()
		case len(src.data) == 0:
			c.in.reset()
			return frames, false
		case len(c.in.bodySpace()) >= pbufSize:
			space := c.in.bodySpace()
			f = c.in.filled(copy(space, src.next(len(space))))
		default:
			f, err = c.consume(src.next(pbufSize))
		}
		if err != nil {
			return frames, errors.Is(err, ErrFrameSize)
		}
		if f != nil {
			frames = append(frames, append([]byte(nil), *f...))
			putFrame(f)
		}
	}
}

func FuzzReadPaths(f *testing.F) {
	frame := func(body string) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
	}
	f.Add(frame("abc"), []byte{0})
	f.Add(append(frame("x"), frame("yz")...), []byte{0, 1})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, []byte{3})
	f.Add([]byte{0, 0, 0, 0, 1}, []byte{})
	f.Add(append(frame(string(bytes.Repeat([]byte("L"), 40000))), frame("tail")...), []byte{200, 7, 255})
	f.Add(append(frame("ok"), 0, 1, 0), []byte{1})
	f.Fuzz(func(t *testing.T, data, sizes []byte) {
		const max = 64 << 10
		want, wantBad := referenceFrames(data, max)
		for name, run := range map[string]func([]byte, []byte, int32) ([][]byte, bool){
			"epoll": epollFrames, "uring": uringFrames,
		} {
			got, bad := run(data, sizes, max)
			if bad != wantBad || len(got) != len(want) {
				t.Fatalf("%s: %d frames (bad size %v), std: %d frames (bad size %v)", name, len(got), bad, len(want), wantBad)
			}
			for i := range got {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("%s: frame %d differs", name, i)
				}
			}
		}
	})
}
