package connectortest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Record is one test record. The suite generates records from a seed; a
// record is identified by its split and its position (Seq) in that split,
// and its Payload is a pure function of (seed, split, position), so the
// suite can tell a corrupted record from a missing one.
//
// A connector's context converts records to its own type and back; the
// text form of [Record.String] and [ParseRecord] is a ready-made encoding
// for connectors that carry strings or bytes.
type Record struct {
	// Split is the split the record was written to, 0-based.
	Split int
	// Seq is the record's position in its split, 0-based.
	Seq int64
	// Payload is derived from the seed, the split and the position.
	Payload string
}

// String returns "split/seq/payload", the form ParseRecord reads.
func (r Record) String() string {
	return strconv.Itoa(r.Split) + "/" + strconv.FormatInt(r.Seq, 10) + "/" + r.Payload
}

// ParseRecord parses the form written by Record.String.
func ParseRecord(s string) (Record, error) {
	sp, rest, ok1 := strings.Cut(s, "/")
	seq, payload, ok2 := strings.Cut(rest, "/")
	if !ok1 || !ok2 {
		return Record{}, fmt.Errorf("connectortest: malformed record %q: want split/seq/payload", s)
	}
	split, err1 := strconv.Atoi(sp)
	n, err2 := strconv.ParseInt(seq, 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return Record{}, fmt.Errorf("connectortest: malformed record %q: %w", s, err)
	}
	return Record{Split: split, Seq: n, Payload: payload}, nil
}

// key identifies a record.
type key struct {
	split int
	seq   int64
}

func (r Record) key() key { return key{r.Split, r.Seq} }

// payload derives a record's payload with SplitMix64.
func payload(seed int64, split int, seq int64) string {
	x := uint64(seed)*0x9e3779b97f4a7c15 ^ uint64(split)<<40 ^ uint64(seq)
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	x ^= x >> 31
	return strconv.FormatUint(x, 36)
}

// generate returns records [from, from+n) of a split.
func generate(seed int64, split int, from, n int64) []Record {
	out := make([]Record, n)
	for i := range out {
		seq := from + int64(i)
		out[i] = Record{Split: split, Seq: seq, Payload: payload(seed, split, seq)}
	}
	return out
}

// Guarantee is a delivery guarantee.
type Guarantee int

const (
	// ExactlyOnce: after any failure, the output equals the input: every
	// record once, each split's records in order.
	ExactlyOnce Guarantee = iota
	// AtLeastOnce: after any failure, the output contains the input;
	// duplicates are allowed.
	AtLeastOnce
)

func (g Guarantee) String() string {
	if g == ExactlyOnce {
		return "exactly-once"
	}
	return "at-least-once"
}
