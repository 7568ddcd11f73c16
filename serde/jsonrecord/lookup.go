package jsonrecord

import (
	"bytes"
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
// of up to 16 keys, and does not keep vals (they may be on the stack); it
// scans data once per 8 keys. Pass a value it found to [DecodeValue] to
// decode it exactly.
func Lookup(data []byte, keys []string, vals [][]byte) error {
	if len(vals) != len(keys) {
		return fmt.Errorf("jsonrecord: Lookup of %d keys into %d values", len(keys), len(vals))
	}
	if len(keys) <= lookupChunk {
		var at [lookupChunk][2]int
		if flatScan(data, keys, at[:]) {
			for i := range keys {
				vals[i] = nil
				if e := at[i][1]; e > 0 {
					vals[i] = data[at[i][0]:e:e]
				}
			}
			return nil
		}
	}
	clear(vals)
	for { // one pass (which checks data) per lookupChunk keys
		n := min(len(keys), lookupChunk)
		p := parser{data: data, want: keys[:n]}
		if err := p.top(true, true); err != nil {
			return err
		}
		for i := range n {
			if at := p.at[i]; at[1] > 0 {
				vals[i] = data[at[0]:at[1]:at[1]]
			}
		}
		if keys, vals = keys[n:], vals[n:]; len(keys) == 0 {
			return nil
		}
	}
}

// LookupSpans is [Lookup] giving positions: spans[i] = {start, end} of
// the value of keys[i] in data (data[start:end] is what Lookup finds),
// {0, 0} when the object has no such member.
func LookupSpans(data []byte, keys []string, spans [][2]int) error {
	if len(spans) != len(keys) {
		return fmt.Errorf("jsonrecord: LookupSpans of %d keys into %d spans", len(keys), len(spans))
	}
	if len(keys) <= lookupChunk && flatScan(data, keys, spans) {
		return nil
	}
	clear(spans)
	for { // one pass (which checks data) per lookupChunk keys
		n := min(len(keys), lookupChunk)
		p := parser{data: data, want: keys[:n]}
		if err := p.top(true, true); err != nil {
			return err
		}
		copy(spans, p.at[:n])
		if keys, spans = keys[n:], spans[n:]; len(keys) == 0 {
			return nil
		}
	}
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
			p.at[i] = [2]int{start, p.i} // every i: keys may repeat
		}
	}
}

// keyIs reports whether the checked key sp holds the string s.
func (p *parser) keyIs(sp span, s string) bool {
	x := p.data[sp.start:sp.end]
	if !sp.escaped {
		return string(x) == s
	}
	return escapedKeyIs(x, s)
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

// LookupValid is [Lookup] for data that [ValidateObject] accepts (a
// source checked it already): it finds the same members without checking
// anything again, skipping strings and nested values by their delimiters,
// and stops once every key is found (a checked object holds each key
// once). On other input its result is undefined (it does not panic, and
// returns an error where it cannot go on).
func LookupValid(data []byte, keys []string, vals [][]byte) error {
	if len(vals) != len(keys) {
		return fmt.Errorf("jsonrecord: LookupValid of %d keys into %d values", len(keys), len(vals))
	}
	clear(vals)
	i := skipWS(data, 0)
	if i >= len(data) || data[i] != '{' {
		return &SyntaxError{Offset: i, Msg: "not an object", Err: ErrNotObject}
	}
	i++
	missing := len(keys)
	for missing > 0 {
		i = skipWS(data, i)
		if i >= len(data) {
			return &SyntaxError{Offset: i, Msg: "unexpected end of input", Err: ErrSyntax}
		}
		switch data[i] {
		case '}':
			return nil
		case ',':
			i = skipWS(data, i+1)
		}
		if i >= len(data) || data[i] != '"' {
			return &SyntaxError{Offset: i, Msg: "want a key", Err: ErrSyntax}
		}
		// A key: short, scanned byte by byte.
		keyAt := i
		esc := false
		for i++; i < len(data) && data[i] != '"'; i++ {
			if data[i] == '\\' {
				esc = true
				i++
			}
		}
		if i >= len(data) {
			return &SyntaxError{Offset: keyAt, Msg: "unterminated string", Err: ErrSyntax}
		}
		key := data[keyAt+1 : i]
		i = skipWS(data, i+1)
		if i >= len(data) || data[i] != ':' {
			return &SyntaxError{Offset: i, Msg: "want ':'", Err: ErrSyntax}
		}
		valAt := skipWS(data, i+1)
		if i = skipValid(data, valAt); i < 0 {
			return &SyntaxError{Offset: valAt, Msg: "want a value", Err: ErrSyntax}
		}
		for j, k := range keys {
			if vals[j] == nil && (esc && escapedKeyIs(key, k) || !esc && string(key) == k) {
				vals[j] = data[valAt:i:i]
				missing--
			}
		}
	}
	return nil
}

// escapedKeyIs reports whether the checked bytes between a key's quotes
// hold the string s.
func escapedKeyIs(x []byte, s string) bool {
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

// skipWS returns the index of the first byte at or after i that is not
// JSON whitespace.
func skipWS(d []byte, i int) int {
	for i < len(d) && (d[i] == ' ' || d[i] == '\t' || d[i] == '\n' || d[i] == '\r') {
		i++
	}
	return i
}

// skipValidString returns the index after the closing quote of the
// checked string that opens at i; len(d)+1 when it is not closed.
func skipValidString(d []byte, i int) int {
	i++
	for {
		j := bytes.IndexByte(d[i:], '"')
		if j < 0 {
			return len(d) + 1
		}
		end := i + j
		// The quote is escaped when an odd number of backslashes
		// precede it.
		n := 0
		for k := end - 1; k >= i && d[k] == '\\'; k-- {
			n++
		}
		i = end + 1
		if n%2 == 0 {
			return i
		}
	}
}

// skipValid returns the index after the checked value that starts at i;
// -1 at the end of the input or at a byte no value starts with.
func skipValid(d []byte, i int) int {
	if i >= len(d) {
		return -1
	}
	switch d[i] {
	case '"':
		if i = skipValidString(d, i); i > len(d) {
			return -1
		}
		return i
	case '{', '[':
		depth := 0
		for i < len(d) {
			switch d[i] {
			case '"':
				if i = skipValidString(d, i); i > len(d) {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
			}
			i++
			if depth == 0 {
				return i
			}
		}
		return -1
	case ',', '}', ']', ':':
		return -1
	}
	// A number or a literal.
	for i < len(d) {
		switch d[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// DecodeNumber decodes the JSON number data as [DecodeValue] does when
// the result is an int64 (isInt) or a float64 (f), without allocating;
// ok is false when DecodeValue would return a json.Number for it (an
// integer beyond int64, -0, a number a float64 would write differently)
// or data is not exactly one JSON number.
func DecodeNumber(data []byte) (i int64, f float64, isInt, ok bool) {
	end, integer := numberEnd(data)
	if end != len(data) || end == 0 {
		return 0, 0, false, false
	}
	if integer {
		neg := data[0] == '-'
		digits := data
		if neg {
			digits = data[1:]
		}
		if len(digits) > 19 || neg && len(digits) == 1 && digits[0] == '0' {
			return 0, 0, false, false // beyond int64 (checked below for 19 digits), or -0
		}
		var u uint64
		for _, c := range digits {
			u = u*10 + uint64(c-'0') // 19 digits fit a uint64
		}
		switch {
		case !neg && u <= math.MaxInt64:
			return int64(u), 0, true, true
		case neg && u <= math.MaxInt64+1:
			return -int64(u), 0, true, true // wraps to MinInt64 for 2^63
		}
		return 0, 0, false, false
	}
	f, err := strconv.ParseFloat(string(data), 64)
	if err != nil {
		return 0, 0, false, false
	}
	var buf [32]byte
	if string(appendFloat(buf[:0], f)) != string(data) {
		return 0, 0, false, false
	}
	return 0, f, false, true
}

// numberEnd returns where the JSON number at the start of data ends (0:
// none) and whether it is an integer (no fraction, no exponent).
func numberEnd(d []byte) (end int, integer bool) {
	i := 0
	if i < len(d) && d[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
			n++
		}
		return n
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case digits() == 0:
		return 0, false
	}
	integer = true
	if i < len(d) && d[i] == '.' {
		integer = false
		i++
		if digits() == 0 {
			return 0, false
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		integer = false
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if digits() == 0 {
			return 0, false
		}
	}
	return i, integer
}

// AppendFloat appends a finite float64 as encoding/json writes it (as
// [AppendValue] does), without allocating.
func AppendFloat(dst []byte, f float64) []byte { return appendFloat(dst, f) }
