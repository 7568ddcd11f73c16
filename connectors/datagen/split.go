package datagen

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/sluice-io/sluice/serde"
)

// Split is one split of a data generator: the indexes Next, Next+Stride,
// Next+2·Stride, … below End. It carries its own progress in Next.
//
// A bounded source of Count records with n splits has contiguous splits:
// split i covers [i·q + min(i, r), (i+1)·q + min(i+1, r)) with q = Count/n
// and r = Count%n (the first r splits have one record more), Stride 1. An
// unbounded source with n splits interleaves them instead: split i emits
// the indexes i, i+n, i+2n, … (Stride n, End math.MaxInt64), so every split is
// endless and index k belongs to split k%n. [Source.SplitOf] computes the
// split of an index in both cases.
type Split struct {
	// Num is the split's number, 0 ≤ Num < number of splits.
	Num int `json:"num"`
	// Next is the index the split emits next.
	Next int64 `json:"next"`
	// End bounds the indexes: the split emits indexes < End.
	End int64 `json:"end"`
	// Stride is the distance between consecutive indexes.
	Stride int64 `json:"stride"`
}

// SplitID returns "split-<Num>".
func (s Split) SplitID() string { return "split-" + strconv.Itoa(s.Num) }

// Remaining returns how many indexes the split has left to emit
// (math.MaxInt64/Stride or so for an unbounded split).
func (s Split) Remaining() int64 {
	if s.Next >= s.End || s.Stride <= 0 {
		return 0
	}
	return 1 + (s.End-1-s.Next)/s.Stride
}

// Unbounded reports whether the split never ends.
func (s Split) Unbounded() bool { return s.End == math.MaxInt64 }

// EnumState is the enumerator's checkpoint: the splits not yet assigned to
// any reader, with their positions.
type EnumState struct {
	Unassigned []Split `json:"unassigned"`
}

// splitSerde and enumSerde write version 2, a compact binary encoding
// (varints: num, next, end, stride; the enumerator state is a count and
// that many splits). They still read version 1, the JSON encoding of
// sluice's first release; testdata/checkpoint-v1 is a checkpoint written
// with it, restored by TestRestoreVersion1Checkpoint.
var (
	splitSerde = splitSerializer{}
	enumSerde  = enumSerializer{}

	splitJSONv1 = serde.JSON[Split](1)
	enumJSONv1  = serde.JSON[EnumState](1)
)

type splitSerializer struct{}

func (splitSerializer) Version() int { return 2 }

func (splitSerializer) Serialize(s Split) ([]byte, error) { return appendSplit(nil, s), nil }

func (splitSerializer) Deserialize(version int, data []byte) (Split, error) {
	switch version {
	case 1:
		return splitJSONv1.Deserialize(1, data)
	case 2:
		s, rest, err := readSplit(data)
		if err == nil && len(rest) > 0 {
			err = fmt.Errorf("datagen: split: %d trailing bytes", len(rest))
		}
		return s, err
	}
	return Split{}, fmt.Errorf("datagen: split version %d: %w", version, serde.ErrUnknownVersion)
}

type enumSerializer struct{}

func (enumSerializer) Version() int { return 2 }

func (enumSerializer) Serialize(st EnumState) ([]byte, error) {
	b := binary.AppendUvarint(nil, uint64(len(st.Unassigned)))
	for _, s := range st.Unassigned {
		b = appendSplit(b, s)
	}
	return b, nil
}

func (enumSerializer) Deserialize(version int, data []byte) (EnumState, error) {
	switch version {
	case 1:
		return enumJSONv1.Deserialize(1, data)
	case 2:
		n, k := binary.Uvarint(data)
		if k <= 0 || n > uint64(len(data)) {
			return EnumState{}, errors.New("datagen: enumerator state: bad split count")
		}
		data = data[k:]
		st := EnumState{Unassigned: make([]Split, 0, n)}
		for range n {
			s, rest, err := readSplit(data)
			if err != nil {
				return EnumState{}, fmt.Errorf("datagen: enumerator state: %w", err)
			}
			st.Unassigned, data = append(st.Unassigned, s), rest
		}
		if len(data) > 0 {
			return EnumState{}, fmt.Errorf("datagen: enumerator state: %d trailing bytes", len(data))
		}
		return st, nil
	}
	return EnumState{}, fmt.Errorf("datagen: enumerator state version %d: %w", version, serde.ErrUnknownVersion)
}

func appendSplit(b []byte, s Split) []byte {
	b = binary.AppendVarint(b, int64(s.Num))
	b = binary.AppendVarint(b, s.Next)
	b = binary.AppendVarint(b, s.End)
	return binary.AppendVarint(b, s.Stride)
}

func readSplit(b []byte) (Split, []byte, error) {
	var f [4]int64
	for i := range f {
		v, k := binary.Varint(b)
		if k <= 0 {
			return Split{}, nil, errors.New("datagen: split: truncated or malformed varint")
		}
		f[i], b = v, b[k:]
	}
	return Split{Num: int(f[0]), Next: f[1], End: f[2], Stride: f[3]}, b, nil
}

// boundedRange returns the index range [start, end) of split i of n over
// count records.
func boundedRange(count int64, i, n int) (start, end int64) {
	q, r := count/int64(n), count%int64(n)
	start = int64(i)*q + min(int64(i), r)
	end = start + q
	if int64(i) < r {
		end++
	}
	return start, end
}

// makeSplits returns the initial splits of a source.
func makeSplits(count int64, n int) []Split {
	out := make([]Split, n)
	for i := range out {
		if count == 0 {
			out[i] = Split{Num: i, Next: int64(i), End: math.MaxInt64, Stride: int64(n)}
			continue
		}
		start, end := boundedRange(count, i, n)
		out[i] = Split{Num: i, Next: start, End: end, Stride: 1}
	}
	return out
}

// splitOf returns the split that emits index k, or -1 if none does.
func splitOf(count int64, n int, k int64) int {
	switch {
	case k < 0 || (count > 0 && k >= count):
		return -1
	case count == 0:
		return int(k % int64(n))
	}
	q, r := count/int64(n), count%int64(n)
	big := r * (q + 1) // the first r splits have q+1 indexes
	if k < big {
		return int(k / (q + 1))
	}
	return int(r + (k-big)/q)
}
