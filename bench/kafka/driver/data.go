package main

import (
	"slices"
	"strconv"
)

// value returns record i's value: a canonical JSON object (keys sorted,
// compact, integers, no characters that encoding/json escapes) of exactly
// size bytes, so that decoding and encoding it again gives the same bytes.
func value(dst []byte, i, size int) []byte {
	dst = append(dst[:0], `{"amount":`...)
	dst = strconv.AppendInt(dst, int64(i*37%1000), 10)
	dst = append(dst, `,"id":`...)
	dst = strconv.AppendInt(dst, int64(i), 10)
	dst = append(dst, `,"pad":"`...)
	tail := `","user":"user-` + strconv.Itoa(i%10) + `"}`
	// The padding is pseudo-random letters and digits, so that batches
	// compress about as real text does (lz4 would shrink a run of one
	// letter to nothing, and the fetched batches would swell in memory).
	x := uint64(i)*0x9E3779B97F4A7C15 + 1
	for len(dst)+len(tail) < size {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		dst = append(dst, padChars[x%uint64(len(padChars))])
	}
	return append(dst, tail...)
}

const padChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// inputVersion names the input's values in its topic name; change it when
// value changes, so that a topic with older values is not reused.
const inputVersion = "v2"

// hash is 64-bit FNV-1a: the output is checked as a multiset of value
// hashes, not as a copy of the values.
func hash(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// expectedHashes returns the sorted hashes of the input's values (of
// their Avro payload, without the header, for Avro: a sink may register
// the schema under another id).
func expectedHashes(n, size int, format string) []uint64 {
	hs := make([]uint64, n)
	var buf []byte
	for i := range n {
		if format == "avro" {
			buf = avroValue(buf, i, size, 0)
			hs[i] = hash(buf[avroHeader:])
		} else {
			buf = value(buf, i, size)
			hs[i] = hash(buf)
		}
	}
	slices.Sort(hs)
	return hs
}

// diff compares two sorted multisets and returns how many of want are
// missing from got and how many of got are extra (duplicates or foreign).
func diff(want, got []uint64) (missing, extra int) {
	i, j := 0, 0
	for i < len(want) && j < len(got) {
		switch {
		case want[i] == got[j]:
			i++
			j++
		case want[i] < got[j]:
			missing++
			i++
		default:
			extra++
			j++
		}
	}
	return missing + len(want) - i, extra + len(got) - j
}
