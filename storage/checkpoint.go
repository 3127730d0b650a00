package storage

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sluice-broker/sluice/internal/fsutil"
)

// Per-partition checkpoint files. Kafka keeps recovery points, log start
// offsets and high watermarks in per-directory files; one file per partition
// is simpler and avoids a shared writer across thousands of partitions.
const (
	recoveryPointFile = "recovery-point-offset-checkpoint"
	logStartFile      = "log-start-offset-checkpoint"
	highWatermarkFile = "replication-offset-checkpoint"
	epochFile         = "leader-epoch-checkpoint"
	cleanShutdownFile = ".clean-shutdown"
	tmpSuffix         = ".tmp"
)

// writeFileAtomic replaces dir/name with data durably (fsutil).
func writeFileAtomic(dir, name string, data []byte) error {
	return fsutil.WriteFileAtomic(filepath.Join(dir, name), data)
}

// readCheckpoint reads a Kafka-style text checkpoint: a version line "0", a
// count line, then count lines of space-separated integers, each with
// fields values. A missing file is (nil, nil).
func readCheckpoint(path string, fields int) ([][]int64, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) < 2 || lines[0] != "0" {
		return nil, fmt.Errorf("storage: %s: bad checkpoint header", path)
	}
	count, err := strconv.Atoi(lines[1])
	if err != nil || count < 0 || count != len(lines)-2 {
		return nil, fmt.Errorf("storage: %s: bad checkpoint count", path)
	}
	out := make([][]int64, 0, count)
	for _, line := range lines[2:] {
		vals, err := parseInts(line, fields)
		if err != nil {
			return nil, fmt.Errorf("storage: %s: %w", path, err)
		}
		out = append(out, vals)
	}
	return out, nil
}

func parseInts(line string, fields int) ([]int64, error) {
	parts := strings.Fields(line)
	if len(parts) != fields {
		return nil, fmt.Errorf("bad checkpoint line %q", line)
	}
	vals := make([]int64, fields)
	for i, p := range parts {
		v, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad checkpoint line %q", line)
		}
		vals[i] = v
	}
	return vals, nil
}

// formatCheckpoint renders rows in the format readCheckpoint reads.
func formatCheckpoint(rows [][]int64) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "0\n%d\n", len(rows))
	for _, row := range rows {
		for i, v := range row {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(strconv.FormatInt(v, 10))
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// readOffsetFile reads a single-offset checkpoint, or def if it is missing.
func readOffsetFile(dir, name string, def int64) (int64, error) {
	rows, err := readCheckpoint(filepath.Join(dir, name), 1)
	if err != nil || len(rows) != 1 {
		return def, err
	}
	return rows[0][0], nil
}

func writeOffsetFile(dir, name string, off int64) error {
	return writeFileAtomic(dir, name, formatCheckpoint([][]int64{{off}}))
}

// recoveryPoint is the durable prefix of the log: everything before offset
// (at byte pos of segment base) was fsynced, and recovery need not look at it.
// Unlike Kafka's offset-only recovery point it carries the position and the
// active segment's timestamp state, so recovery can resume scanning in the
// middle of a segment instead of re-reading it from the start.
type recoveryPoint struct {
	offset, base, pos int64
	maxTs, maxTsOff   int64 // segment base's maxTs state at pos
	bytesSinceIndex   int64
}

func readRecoveryPoint(dir string) (recoveryPoint, bool, error) {
	rows, err := readCheckpoint(filepath.Join(dir, recoveryPointFile), 6)
	if err != nil || len(rows) != 1 {
		return recoveryPoint{}, false, err
	}
	r := rows[0]
	return recoveryPoint{r[0], r[1], r[2], r[3], r[4], r[5]}, true, nil
}

func writeRecoveryPoint(dir string, rp recoveryPoint) error {
	row := []int64{rp.offset, rp.base, rp.pos, rp.maxTs, rp.maxTsOff, rp.bytesSinceIndex}
	return writeFileAtomic(dir, recoveryPointFile, formatCheckpoint([][]int64{row}))
}
