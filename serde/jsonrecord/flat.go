package jsonrecord

import (
	"encoding/binary"
	"unicode/utf8"
)

// The flat scan is the fast path of the checks that a Kafka source runs
// on every value (ValidateObject, Lookup, LookupSpans): one pass over a
// flat object — members whose values are strings, numbers, true, false
// or null, keys without escapes or non-ASCII bytes, at most flatMaxKeys
// of them — that checks it and finds the wanted members, allocating
// nothing, with string bodies scanned eight bytes at a time. It accepts
// only what the general parser accepts, and gives up (ok false) on
// anything else — a nested value, an escape in a key, more keys, any
// error — so that the general parser decides, with its error; the
// caller's result never depends on which of the two ran
// (TestFlatAgreesWithParser, FuzzFlat).

// flatMaxKeys is how many members the flat scan takes (its duplicate
// check compares every key with every earlier one).
const flatMaxKeys = 16

// flatScan checks data as ValidateObject does and sets at[i] to the
// span of the value of want[i] ({0, 0} when absent), when data is a flat
// object; ok false: data is not one (or is malformed), at is then
// undefined. len(at) must be at least len(want).
func flatScan(data []byte, want []string, at [][2]int) (ok bool) {
	d := data
	i := skipWS(d, 0)
	if i >= len(d) || d[i] != '{' {
		return false
	}
	for j := range want {
		at[j] = [2]int{}
	}
	var keys [flatMaxKeys][2]int
	n := 0
	i = skipWS(d, i+1)
	if i < len(d) && d[i] == '}' {
		return skipWS(d, i+1) == len(d)
	}
	for {
		// A key: printable ASCII without escapes.
		if i >= len(d) || d[i] != '"' || n == flatMaxKeys {
			return false
		}
		ks := i + 1
		i = ks
		for i < len(d) && d[i] != '"' {
			if c := d[i]; c < 0x20 || c == '\\' || c >= utf8.RuneSelf {
				return false
			}
			i++
		}
		if i >= len(d) {
			return false
		}
		key := d[ks:i]
		for _, k := range keys[:n] {
			if string(d[k[0]:k[1]]) == string(key) {
				return false // a duplicate: the parser's error
			}
		}
		keys[n] = [2]int{ks, i}
		n++
		i = skipWS(d, i+1)
		if i >= len(d) || d[i] != ':' {
			return false
		}
		vs := skipWS(d, i+1)
		if vs >= len(d) {
			return false
		}
		switch c := d[vs]; {
		case c == '"':
			if i = flatString(d, vs+1); i < 0 {
				return false
			}
		case c == '-' || c >= '0' && c <= '9':
			end, _ := numberEnd(d[vs:])
			if end == 0 {
				return false
			}
			i = vs + end
		case c == 't':
			i = flatLiteral(d, vs, "true")
		case c == 'f':
			i = flatLiteral(d, vs, "false")
		case c == 'n':
			i = flatLiteral(d, vs, "null")
		default:
			return false // nested, or malformed
		}
		if i < 0 {
			return false
		}
		for j, w := range want {
			if string(key) == w {
				at[j] = [2]int{vs, i}
			}
		}
		i = skipWS(d, i)
		if i >= len(d) {
			return false
		}
		switch d[i] {
		case ',':
			i = skipWS(d, i+1)
		case '}':
			return skipWS(d, i+1) == len(d)
		default:
			return false
		}
	}
}

// flatLiteral returns the index after lit at i, or -1.
func flatLiteral(d []byte, i int, lit string) int {
	if len(d)-i < len(lit) || string(d[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

const (
	swarOnes  = 0x0101010101010101
	swarHighs = 0x8080808080808080
)

// flatString checks the body of a string that starts at i (after its
// opening quote) as the parser does and returns the index after its
// closing quote, or -1 where the flat scan gives up (an escape other
// than a simple one, or anything the parser rejects).
func flatString(d []byte, i int) int {
	for {
		// Eight bytes at a time while none is a quote, a backslash, a
		// control character or non-ASCII.
		for i+8 <= len(d) {
			v := binary.LittleEndian.Uint64(d[i:])
			q := v ^ ('"' * swarOnes)
			b := v ^ ('\\' * swarOnes)
			special := (q-swarOnes)&^q | (b-swarOnes)&^b | (v - 0x20*swarOnes) | v
			if special&swarHighs != 0 {
				break
			}
			i += 8
		}
		if i >= len(d) {
			return -1
		}
		switch c := d[i]; {
		case c == '"':
			return i + 1
		case c == '\\':
			if i+1 >= len(d) {
				return -1
			}
			switch d[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			default:
				return -1 // \u, or an invalid escape: the parser decides
			}
		case c < 0x20:
			return -1
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size == 1 {
				return -1
			}
			i += size
		}
	}
}
