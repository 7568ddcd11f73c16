package jsonrecord

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// Lookup checks data as [ValidateObject] does (the same errors, for the
// same input) and finds the top-level members named by keys without
// decoding anything: vals[i] is set to the bytes of the value of the
// member keys[i] (a sub-slice of data; nil when the object has no such
// member). Keys are compared after unescaping, so "\u0061" finds "a".
// vals must have len(keys) elements. Lookup allocates nothing for objects
// of up to 16 keys; pass a value it found to [DecodeValue] to decode it
// exactly.
func Lookup(data []byte, keys []string, vals [][]byte) error {
	if len(vals) != len(keys) {
		return fmt.Errorf("jsonrecord: Lookup of %d keys into %d values", len(keys), len(vals))
	}
	clear(vals)
	p := parser{data: data, want: keys, found: vals}
	return p.top(true, true)
}

// DecodeValue decodes one JSON value as [Decode] does (numbers exact),
// except that null is accepted and decodes to nil: for a member's value
// that [Lookup] found.
func DecodeValue(data []byte) (any, error) {
	p := parser{data: data, build: true}
	if err := p.top(false, false); err != nil {
		return nil, err
	}
	return p.val, nil
}

// wantKey records the value that starts at start and ends at p.i when the
// top-level key sp is one of p.want.
func (p *parser) wantKey(sp span, start int) {
	for i, k := range p.want {
		if p.keyIs(sp, k) {
			p.found[i] = p.data[start:p.i:p.i] // every i: keys may repeat
		}
	}
}

// keyIs reports whether the checked key sp holds the string s.
func (p *parser) keyIs(sp span, s string) bool {
	x := p.data[sp.start:sp.end]
	if !sp.escaped {
		return string(x) == s
	}
	for len(x) > 0 && len(s) > 0 {
		var rx rune
		rx, x = nextRune(x)
		ry, n := utf8.DecodeRuneInString(s)
		if rx != ry || ry == utf8.RuneError && n == 1 {
			return false
		}
		s = s[n:]
	}
	return len(x) == 0 && len(s) == 0
}

// AppendValue appends the JSON encoding of a decoded value to dst, the
// bytes encoding/json's Marshal writes for it: int64, bool, nil, a valid
// json.Number and finite float64s without a call into encoding/json,
// everything else with it.
func AppendValue(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, x), nil
	case int64:
		return strconv.AppendInt(dst, x, 10), nil
	case int:
		return strconv.AppendInt(dst, int64(x), 10), nil
	case float64:
		if !math.IsNaN(x) && !math.IsInf(x, 0) {
			return appendFloat(dst, x), nil
		}
	case json.Number:
		if validNumber(string(x)) {
			return append(dst, x...), nil
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}
