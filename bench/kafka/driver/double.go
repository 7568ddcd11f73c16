package main

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
)

// doubles reports whether a contender's output is its input with the
// field "amount" of every value doubled (its name holds "-double":
// flink-json-double, pipelines/sluice-json-double.yaml, …) rather than
// the input itself.
func doubles(name string) bool { return strings.Contains(name, "-double") }

// doubledValue returns record i's value with its amount doubled, written
// as the input is (canonical JSON: keys sorted, compact), which is what
// a contender that decodes the value, doubles the field and encodes it
// again writes.
func doubledValue(dst []byte, i, size int) []byte {
	v := value(nil, i, size)
	rest := v[bytes.IndexByte(v, ','):]
	dst = append(dst[:0], `{"amount":`...)
	dst = strconv.AppendInt(dst, 2*int64(i*37%1000), 10)
	return append(dst, rest...)
}

// expectedDoubledHashes returns the sorted hashes of the doubled values
// (JSON input only).
func expectedDoubledHashes(n, size int) []uint64 {
	hs := make([]uint64, n)
	var buf []byte
	for i := range n {
		buf = doubledValue(buf, i, size)
		hs[i] = hash(buf)
	}
	slices.Sort(hs)
	return hs
}
