package datagen

import (
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

// splitSerde and enumSerde are JSON, version 1.
var (
	splitSerde = serde.JSON[Split](1)
	enumSerde  = serde.JSON[EnumState](1)
)

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
