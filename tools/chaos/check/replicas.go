package check

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// Replicas compares one partition's replicas, given as node → partition
// directory, byte for byte below hw: followers keep the leader's offsets
// and leader epochs, so every batch below the HW must be identical. It
// describes each replica that differs from the first (by node id), or
// whose log stops short of hw.
func Replicas(p int32, hw int64, dirs map[int32]string) []string {
	var out []string
	var ref []byte
	refNode := int32(-1)
	for _, id := range sortedParts(dirs) {
		b, err := BatchesBelow(dirs[id], hw)
		if err != nil {
			out = append(out, fmt.Sprintf("partition %d node %d: %v", p, id, err))
			continue
		}
		if refNode < 0 {
			ref, refNode = b, id
			continue
		}
		if !bytes.Equal(ref, b) {
			i := 0
			for i < len(ref) && i < len(b) && ref[i] == b[i] {
				i++
			}
			out = append(out, fmt.Sprintf("partition %d: node %d (%d bytes) and node %d (%d bytes) differ from byte %d below hw %d",
				p, refNode, len(ref), id, len(b), i, hw))
		}
	}
	return out
}

// BatchesBelow concatenates the record batches of a partition directory's
// segments whose base offset is below hw, and checks they reach hw.
func BatchesBelow(dir string, hw int64) ([]byte, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var out []byte
	next := int64(-1)
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		for pos := 0; pos+61 <= len(data); {
			base := int64(binary.BigEndian.Uint64(data[pos:]))
			length := int(binary.BigEndian.Uint32(data[pos+8:]))
			if length == 0 || pos+12+length > len(data) {
				break // a preallocated or torn tail
			}
			if base >= hw {
				break
			}
			out = append(out, data[pos:pos+12+length]...)
			next = base + int64(binary.BigEndian.Uint32(data[pos+23:])) + 1
			pos += 12 + length
		}
	}
	if hw > 0 && next < hw {
		return out, fmt.Errorf("log ends at %d, below hw %d", next, hw)
	}
	return out, nil
}
