// Package jsonrecord decodes JSON records strictly and exactly. It is the
// one JSON decoder of the JSON-lines file format (connectors/file) and the
// Kafka JSON deserializer (connectors/kafka), so that both accept and
// reject the same input.
//
// Compared with encoding/json's Unmarshal it
//
//   - keeps numbers exact when decoding into an interface (any,
//     map[string]any, []any): an integer that fits int64 becomes an int64;
//     a number that encoding/json writes back byte for byte from a float64
//     becomes a float64; every other number (integers beyond int64,
//     12345678901234567891, and numbers such as 1.0, 1e3 or 0.10 that a
//     float64 would rewrite or round) becomes a [json.Number] holding the
//     literal, which encoding/json writes back verbatim. Re-encoding a
//     decoded record with encoding/json therefore reproduces every number
//     byte for byte;
//   - rejects invalid UTF-8 (encoding/json replaces it with U+FFFD) and
//     \u escapes of lone surrogates, which UTF-8 cannot hold
//     ([ErrInvalidUTF8]);
//   - rejects an object with the same key twice, at any depth
//     (encoding/json keeps the last one) ([ErrDuplicateKey]);
//   - rejects a top-level null, and any top-level value other than an
//     object when the target is a map or a struct ([ErrNotObject]):
//     encoding/json decodes null into an empty record without error.
//
// Targets other than interfaces (structs, typed maps and slices) are
// checked as above and then decoded by encoding/json, so their numbers
// follow encoding/json's rules for the field types.
//
// Every error is a [*SyntaxError] with the byte offset of the problem, and
// wraps one of the sentinel errors of this package, so callers branch with
// errors.Is.
//
// [Validate] and [ValidateObject] make the decision of [Decode] and
// [DecodeObject] (same errors) without building the value, in one scan
// that allocates nothing for records whose objects hold up to 16 keys: for
// bytes passed on undecoded that must still be checked. [Lookup] makes the
// same decision and also finds the bytes of chosen top-level members,
// which [DecodeValue] decodes exactly: a transform that reads two fields
// of a record decodes only those two, and [AppendValue] encodes a value as
// encoding/json does, so a transform that changes one member re-encodes
// only that one. For a flat object (scalar members, keys without escapes,
// up to 16 of them: most records) the three take a faster scan that
// reads string bodies eight bytes at a time, and fall back to the full
// parser for anything else, so the decision and the error are the same.
package jsonrecord

import (
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

var (
	// ErrSyntax is wrapped by errors of input that is not JSON.
	ErrSyntax = errors.New("invalid JSON")
	// ErrInvalidUTF8 is wrapped by errors of strings (keys or values)
	// that hold bytes that are not UTF-8, or \u escapes of lone
	// surrogates.
	ErrInvalidUTF8 = errors.New("invalid UTF-8")
	// ErrDuplicateKey is wrapped by errors of objects that hold a key
	// twice (compared after unescaping).
	ErrDuplicateKey = errors.New("duplicate key")
	// ErrNotObject is wrapped by errors of a top-level null, or of a
	// top-level value other than an object where the target is a map or
	// a struct.
	ErrNotObject = errors.New("not a JSON object")
	// ErrType is wrapped by errors of valid JSON that does not fit the
	// target type (a string for an int field).
	ErrType = errors.New("JSON value does not fit the record type")
	// ErrInexact is returned by [Value] for a number that neither int64
	// nor float64 holds exactly.
	ErrInexact = errors.New("number not representable exactly as int64 or float64")
)

// SyntaxError describes what is wrong with the input and where.
type SyntaxError struct {
	// Offset is the byte offset of the problem in the input.
	Offset int
	// Msg says what is wrong.
	Msg string
	// Err is one of the sentinel errors of this package.
	Err error
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%v at byte %d: %s", e.Err, e.Offset, e.Msg)
}

// Unwrap returns the sentinel error.
func (e *SyntaxError) Unwrap() error { return e.Err }

// maxDepth bounds the nesting of arrays and objects, as encoding/json does.
const maxDepth = 10000

var (
	anyType    = reflect.TypeFor[any]()
	stringType = reflect.TypeFor[string]()
	unmarshalT = reflect.TypeFor[json.Unmarshaler]()
	textUnmT   = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// Unmarshal decodes the JSON value in data into v, which must be a non-nil
// pointer. See the package documentation for how it differs from
// encoding/json's Unmarshal.
func Unmarshal(data []byte, v any) error {
	switch p := v.(type) {
	case *map[string]any:
		m, err := DecodeObject(data)
		if err != nil {
			return err
		}
		*p = m
		return nil
	case *any:
		x, err := Decode(data)
		if err != nil {
			return err
		}
		*p = x
		return nil
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("jsonrecord: Unmarshal needs a non-nil pointer, got %T", v)
	}
	t := rv.Type().Elem()
	custom := rv.Type().Implements(unmarshalT) || rv.Type().Implements(textUnmT)
	if !custom && t.Kind() == reflect.Map && t.Key() == stringType && t.Elem() == anyType {
		// A named map[string]any.
		m, err := DecodeObject(data)
		if err != nil {
			return err
		}
		rv.Elem().Set(reflect.ValueOf(m).Convert(t))
		return nil
	}
	base := t
	for base.Kind() == reflect.Pointer {
		base = base.Elem()
	}
	wantObject := !custom && (base.Kind() == reflect.Map || base.Kind() == reflect.Struct)
	p := parser{data: data}
	if err := p.top(wantObject, !custom); err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		off := 0
		if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
			off = int(te.Offset)
		}
		return &SyntaxError{Offset: off, Msg: err.Error(), Err: ErrType}
	}
	return nil
}

// Decode decodes any JSON value except a top-level null: objects become
// map[string]any, arrays []any, numbers int64, float64 or json.Number (see
// the package documentation).
func Decode(data []byte) (any, error) { return decode(data, false) }

// DecodeObject decodes a JSON object (a record); any other top-level value
// is an error wrapping [ErrNotObject].
func DecodeObject(data []byte) (map[string]any, error) {
	x, err := decode(data, true)
	if err != nil {
		return nil, err
	}
	return x.(map[string]any), nil
}

// Validate reports whether data is a JSON value that [Decode] accepts,
// without building it: it returns nil exactly when Decode would, and
// otherwise the same [*SyntaxError] (same offset, same message). It does
// not allocate for valid input whose objects hold at most
// [smallObjectKeys] keys each (it compares keys in place); larger objects
// fall back to a map of their keys.
func Validate(data []byte) error { return validate(data, false) }

// ValidateObject is [Validate] for [DecodeObject]: any top-level value
// other than an object is an error wrapping [ErrNotObject].
func ValidateObject(data []byte) error { return validate(data, true) }

func validate(data []byte, wantObject bool) error {
	if wantObject && flatScan(data, nil, nil) {
		return nil
	}
	p := parser{data: data}
	return p.top(wantObject, true)
}

func decode(data []byte, wantObject bool) (any, error) {
	p := parser{data: data, build: true}
	if err := p.top(wantObject, true); err != nil {
		return nil, err
	}
	return p.val, nil
}

// parser is a recursive-descent JSON parser. With build set it stores the
// top-level value in val; without, it only checks, and allocates nothing
// for input whose objects are small (see keys).
type parser struct {
	data  []byte
	i     int
	depth int
	build bool
	val   any
	buf   []byte // unescaped string bytes
	// Without build: the keys of the objects being parsed, innermost
	// last, as spans of data (a stack shared by the nested objects):
	// nkeys of them, the first len(keyArr) in keyArr (no allocation for
	// small records; an array, not a slice of one, so that the parser
	// holds no pointer to itself and stays on the stack), the rest in more.
	nkeys  int
	keyArr [32]span
	more   []span
	// Lookup: the top-level keys wanted (at most lookupChunk), and where
	// their values are: at[i] = {start, end} of want[i]'s (end 0: not
	// found). Offsets, not slices of data, so that the caller's vals do
	// not escape through the parser.
	want []string
	at   [lookupChunk][2]int
}

// lookupChunk is how many keys one pass of Lookup finds.
const lookupChunk = 8

func (p *parser) key(i int) span {
	if i < len(p.keyArr) {
		return p.keyArr[i]
	}
	return p.more[i-len(p.keyArr)]
}

func (p *parser) pushKey(sp span) {
	if p.nkeys < len(p.keyArr) {
		p.keyArr[p.nkeys] = sp
	} else {
		p.more = append(p.more[:p.nkeys-len(p.keyArr)], sp)
	}
	p.nkeys++
}

// span is a string's position in the input: the bytes between its quotes,
// and whether it holds escapes (then it is compared after unescaping).
type span struct {
	start, end int
	escaped    bool
}

// smallObjectKeys is how many keys an object may hold before the checking
// parser finds repeated keys with a map instead of comparing in place.
const smallObjectKeys = 16

func (p *parser) fail(at int, sentinel error, format string, args ...any) error {
	return &SyntaxError{Offset: at, Msg: fmt.Sprintf(format, args...), Err: sentinel}
}

func (p *parser) ws() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// top parses the whole input as one value.
func (p *parser) top(wantObject, noNull bool) error {
	p.ws()
	if p.i >= len(p.data) {
		return p.fail(p.i, ErrSyntax, "empty input")
	}
	start := p.i
	v, err := p.value()
	if err != nil {
		return err
	}
	p.ws()
	if p.i < len(p.data) {
		return p.fail(p.i, ErrSyntax, "unexpected %s after the top-level value", quoteByte(p.data[p.i]))
	}
	switch c := p.data[start]; {
	case wantObject && c != '{':
		return p.fail(start, ErrNotObject, "top-level value is %s, want an object", kindOf(c))
	case noNull && c == 'n':
		return p.fail(start, ErrNotObject, "top-level value is null, want a record")
	}
	p.val = v
	return nil
}

func kindOf(c byte) string {
	switch c {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return "a number"
	}
	return quoteByte(c)
}

func quoteByte(c byte) string {
	if c < utf8.RuneSelf && strconv.IsPrint(rune(c)) {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func (p *parser) value() (any, error) {
	if p.i >= len(p.data) {
		return nil, p.fail(p.i, ErrSyntax, "unexpected end of input")
	}
	switch c := p.data[p.i]; c {
	case '{':
		return p.object()
	case '[':
		return p.array()
	case '"':
		if !p.build {
			_, err := p.skipStr()
			return nil, err
		}
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return s, nil
	case 't':
		return true, p.literal("true")
	case 'f':
		return false, p.literal("false")
	case 'n':
		return nil, p.literal("null")
	default:
		if c == '-' || c >= '0' && c <= '9' {
			return p.number()
		}
		return nil, p.fail(p.i, ErrSyntax, "unexpected %s, want a value", quoteByte(c))
	}
}

func (p *parser) literal(lit string) error {
	if len(p.data)-p.i < len(lit) || string(p.data[p.i:p.i+len(lit)]) != lit {
		return p.fail(p.i, ErrSyntax, "invalid literal, want %s", lit)
	}
	p.i += len(lit)
	return nil
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.fail(p.i, ErrSyntax, "nesting deeper than %d", maxDepth)
	}
	return nil
}

func (p *parser) object() (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	p.i++ // '{'
	var m map[string]any
	// Without build, keys are still collected to find duplicates: as spans
	// on p.keys while the object is small, in seen beyond.
	var seen map[string]struct{}
	if p.build {
		m = map[string]any{}
	}
	base := p.nkeys
	if !p.build {
		defer func() { p.nkeys = base }()
	}
	p.ws()
	if p.i < len(p.data) && p.data[p.i] == '}' {
		p.i++
		if !p.build {
			return nil, nil
		}
		return m, nil
	}
	for {
		p.ws()
		if p.i >= len(p.data) || p.data[p.i] != '"' {
			return nil, p.unexpected("a string key")
		}
		keyAt := p.i
		var k string
		dup := false
		var valKeyEnd int // without build: the end of the key's bytes
		var keyEsc bool
		if p.build {
			var err error
			if k, err = p.str(); err != nil {
				return nil, err
			}
			_, dup = m[k]
		} else {
			esc, err := p.skipStr()
			if err != nil {
				return nil, err
			}
			sp := span{start: keyAt + 1, end: p.i - 1, escaped: esc}
			valKeyEnd, keyEsc = sp.end, esc
			switch {
			case seen != nil:
				k = p.unescape(sp)
				_, dup = seen[k]
				seen[k] = struct{}{}
			case p.nkeys-base < smallObjectKeys:
				for i := base; i < p.nkeys; i++ {
					if p.sameKey(p.key(i), sp) {
						dup = true
						break
					}
				}
				p.pushKey(sp)
			default:
				seen = make(map[string]struct{}, 2*smallObjectKeys)
				for i := base; i < p.nkeys; i++ {
					seen[p.unescape(p.key(i))] = struct{}{}
				}
				k = p.unescape(sp)
				_, dup = seen[k]
				seen[k] = struct{}{}
			}
			if dup {
				k = p.unescape(sp)
			}
		}
		if dup {
			return nil, p.fail(keyAt, ErrDuplicateKey, "key %q appears twice in one object", k)
		}
		p.ws()
		if p.i >= len(p.data) || p.data[p.i] != ':' {
			return nil, p.unexpected("':'")
		}
		p.i++
		p.ws()
		valAt := p.i
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		if p.build {
			m[k] = v
		} else if p.want != nil && p.depth == 1 {
			p.wantKey(span{start: keyAt + 1, end: valKeyEnd, escaped: keyEsc}, valAt)
		}
		p.ws()
		if p.i >= len(p.data) {
			return nil, p.unexpected("',' or '}'")
		}
		switch p.data[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			if !p.build {
				return nil, nil
			}
			return m, nil
		default:
			return nil, p.unexpected("',' or '}'")
		}
	}
}

// unescape returns the string a checked span holds.
func (p *parser) unescape(sp span) string {
	if !sp.escaped {
		return string(p.data[sp.start:sp.end])
	}
	q := parser{data: p.data, i: sp.start - 1}
	s, _ := q.str()
	return s
}

// sameKey reports whether two checked keys hold the same string, without
// allocating: raw bytes when neither has escapes, else rune by rune.
func (p *parser) sameKey(a, b span) bool {
	x, y := p.data[a.start:a.end], p.data[b.start:b.end]
	if !a.escaped && !b.escaped {
		return string(x) == string(y)
	}
	for len(x) > 0 && len(y) > 0 {
		var rx, ry rune
		rx, x = nextRune(x)
		ry, y = nextRune(y)
		if rx != ry {
			return false
		}
	}
	return len(x) == 0 && len(y) == 0
}

// nextRune decodes the first character of a checked string's bytes (a
// UTF-8 sequence or an escape, a surrogate pair as one rune). On bytes
// that are not checked (LookupValid's input) a cut escape gives
// utf8.RuneError and nothing left, without a panic.
func nextRune(b []byte) (rune, []byte) {
	if b[0] != '\\' {
		if b[0] < utf8.RuneSelf {
			return rune(b[0]), b[1:]
		}
		r, n := utf8.DecodeRune(b)
		return r, b[n:]
	}
	if len(b) < 2 || b[1] == 'u' && len(b) < 6 {
		return utf8.RuneError, nil
	}
	switch e := b[1]; e {
	case 'b':
		return '\b', b[2:]
	case 'f':
		return '\f', b[2:]
	case 'n':
		return '\n', b[2:]
	case 'r':
		return '\r', b[2:]
	case 't':
		return '\t', b[2:]
	case 'u':
		r := hexRune(b[2:6])
		b = b[6:]
		if utf16.IsSurrogate(r) && len(b) >= 6 {
			// A checked string holds only paired surrogates.
			r = utf16.DecodeRune(r, hexRune(b[2:6]))
			b = b[6:]
		}
		return r, b
	default: // '"', '\\', '/'
		return rune(e), b[2:]
	}
}

func hexRune(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		default:
			c = c - 'A' + 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

func (p *parser) array() (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	p.i++ // '['
	var a []any
	if p.build {
		a = []any{}
	}
	p.ws()
	if p.i < len(p.data) && p.data[p.i] == ']' {
		p.i++
		if !p.build {
			return nil, nil
		}
		return a, nil
	}
	for {
		p.ws()
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		if p.build {
			a = append(a, v)
		}
		p.ws()
		if p.i >= len(p.data) {
			return nil, p.unexpected("',' or ']'")
		}
		switch p.data[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			if !p.build {
				return nil, nil
			}
			return a, nil
		default:
			return nil, p.unexpected("',' or ']'")
		}
	}
}

func (p *parser) unexpected(want string) error {
	if p.i >= len(p.data) {
		return p.fail(p.i, ErrSyntax, "unexpected end of input, want %s", want)
	}
	return p.fail(p.i, ErrSyntax, "unexpected %s, want %s", quoteByte(p.data[p.i]), want)
}

// str parses a string starting at its opening quote.
func (p *parser) str() (string, error) {
	open := p.i
	p.i++
	start := p.i
	// Fast path: no escapes.
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			s := string(p.data[start:p.i])
			p.i++
			return s, nil
		case c == '\\':
			return p.slowStr(open, start, true)
		case c < 0x20:
			return "", p.fail(p.i, ErrSyntax, "control character 0x%02x in a string", c)
		case c < utf8.RuneSelf:
			p.i++
		default:
			r, size := utf8.DecodeRune(p.data[p.i:])
			if r == utf8.RuneError && size == 1 {
				return "", p.fail(p.i, ErrInvalidUTF8, "byte 0x%02x in the string starting at byte %d", c, open)
			}
			p.i += size
		}
	}
	return "", p.fail(open, ErrSyntax, "unterminated string")
}

// skipStr checks a string starting at its opening quote as str does,
// without building it, and reports whether it holds escapes.
func (p *parser) skipStr() (escaped bool, err error) {
	open := p.i
	p.i++
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			p.i++
			return false, nil
		case c == '\\':
			_, err := p.slowStr(open, p.i, false)
			return true, err
		case c < 0x20:
			return false, p.fail(p.i, ErrSyntax, "control character 0x%02x in a string", c)
		case c < utf8.RuneSelf:
			p.i++
		default:
			r, size := utf8.DecodeRune(p.data[p.i:])
			if r == utf8.RuneError && size == 1 {
				return false, p.fail(p.i, ErrInvalidUTF8, "byte 0x%02x in the string starting at byte %d", c, open)
			}
			p.i += size
		}
	}
	return false, p.fail(open, ErrSyntax, "unterminated string")
}

// slowStr continues a string at its first backslash, unescaping into the
// returned string when keep is set (else only checking).
func (p *parser) slowStr(open, start int, keep bool) (string, error) {
	var b []byte
	if keep {
		b = append(p.buf[:0], p.data[start:p.i]...)
		defer func() { p.buf = b[:0] }()
	}
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			p.i++
			if !keep {
				return "", nil
			}
			return string(b), nil
		case c == '\\':
			esc := p.i
			if p.i+1 >= len(p.data) {
				return "", p.fail(open, ErrSyntax, "unterminated string")
			}
			p.i += 2
			switch e := p.data[p.i-1]; e {
			case '"', '\\', '/':
				if keep {
					b = append(b, e)
				}
			case 'b':
				if keep {
					b = append(b, '\b')
				}
			case 'f':
				if keep {
					b = append(b, '\f')
				}
			case 'n':
				if keep {
					b = append(b, '\n')
				}
			case 'r':
				if keep {
					b = append(b, '\r')
				}
			case 't':
				if keep {
					b = append(b, '\t')
				}
			case 'u':
				r, ok := p.hex4()
				if !ok {
					return "", p.fail(esc, ErrSyntax, "invalid \\u escape")
				}
				if utf16.IsSurrogate(r) {
					// A high surrogate must be followed by an escaped low one.
					var r2 rune = -1
					if r < 0xdc00 && p.i+1 < len(p.data) && p.data[p.i] == '\\' && p.data[p.i+1] == 'u' {
						save := p.i
						p.i += 2
						if x, ok := p.hex4(); ok && x >= 0xdc00 && x <= 0xdfff {
							r2 = x
						} else {
							p.i = save
						}
					}
					if r2 < 0 {
						return "", p.fail(esc, ErrInvalidUTF8, "\\u%04x is a lone surrogate, which UTF-8 cannot hold", r)
					}
					r = utf16.DecodeRune(r, r2)
				}
				if keep {
					b = utf8.AppendRune(b, r)
				}
			default:
				return "", p.fail(esc, ErrSyntax, "invalid escape %s", quoteByte(e))
			}
		case c < 0x20:
			return "", p.fail(p.i, ErrSyntax, "control character 0x%02x in a string", c)
		case c < utf8.RuneSelf:
			if keep {
				b = append(b, c)
			}
			p.i++
		default:
			r, size := utf8.DecodeRune(p.data[p.i:])
			if r == utf8.RuneError && size == 1 {
				return "", p.fail(p.i, ErrInvalidUTF8, "byte 0x%02x in the string starting at byte %d", c, open)
			}
			if keep {
				b = append(b, p.data[p.i:p.i+size]...)
			}
			p.i += size
		}
	}
	return "", p.fail(open, ErrSyntax, "unterminated string")
}

func (p *parser) hex4() (rune, bool) {
	if len(p.data)-p.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.data[p.i : p.i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	p.i += 4
	return r, true
}

// number parses a number per RFC 8259 and returns its exact value.
func (p *parser) number() (any, error) {
	start := p.i
	d := p.data
	if d[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(d) && d[p.i] >= '0' && d[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	switch {
	case p.i < len(d) && d[p.i] == '0':
		p.i++
	case digits() == 0:
		return nil, p.fail(start, ErrSyntax, "invalid number")
	}
	integer := true
	if p.i < len(d) && d[p.i] == '.' {
		integer = false
		p.i++
		if digits() == 0 {
			return nil, p.fail(start, ErrSyntax, "invalid number: no digits after '.'")
		}
	}
	if p.i < len(d) && (d[p.i] == 'e' || d[p.i] == 'E') {
		integer = false
		p.i++
		if p.i < len(d) && (d[p.i] == '+' || d[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, p.fail(start, ErrSyntax, "invalid number: no digits in the exponent")
		}
	}
	if !p.build {
		return nil, nil
	}
	return exact(string(d[start:p.i]), integer), nil
}

// exact returns the value of a valid JSON number literal that encoding/json
// writes back as the same literal: int64, float64 or json.Number.
func exact(lit string, integer bool) any {
	if integer {
		if n, err := strconv.ParseInt(lit, 10, 64); err == nil && lit != "-0" {
			return n
		}
		return json.Number(lit)
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil {
		return json.Number(lit)
	}
	var buf [32]byte
	if string(appendFloat(buf[:0], f)) == lit {
		return f
	}
	return json.Number(lit)
}

// appendFloat formats f as encoding/json does (ES6 number-to-string).
func appendFloat(b []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// Value returns the exact numeric value of n for arithmetic and
// comparisons: an int64 if n is an integer that fits, else a float64 if n's
// decimal value is the float64's own (shortest) decimal value or the
// float64's exact value — 1.0, 1e3, 0.10 and 2^63 are, 12345678901234567891
// and 0.1000000000000000000001 are not.
// A number that neither holds exactly returns an error wrapping
// [ErrInexact]; an invalid literal one wrapping [ErrSyntax].
func Value(n json.Number) (any, error) {
	lit := string(n)
	if !validNumber(lit) {
		return nil, &SyntaxError{Msg: fmt.Sprintf("%q is not a number", lit), Err: ErrSyntax}
	}
	if i, err := strconv.ParseInt(lit, 10, 64); err == nil {
		return i, nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err == nil && sameDecimal(lit, strconv.FormatFloat(f, 'e', -1, 64)) {
		return f, nil
	}
	if err == nil && f != 0 {
		// A float64 that holds the value exactly but prints shorter
		// (2^63 = 9223372036854775808 prints as 9.223372036854776e+18).
		// f != 0 bounds the literal's exponent, and so the work.
		if r, ok := new(big.Rat).SetString(lit); ok && r.Cmp(new(big.Rat).SetFloat64(f)) == 0 {
			return f, nil
		}
	}
	return nil, fmt.Errorf("%s: %w", lit, ErrInexact)
}

// sameDecimal reports whether two valid number literals have the same
// decimal value.
func sameDecimal(a, b string) bool {
	na, nb := normalize(a), normalize(b)
	return na == nb
}

type decimal struct {
	neg    bool
	digits string // no leading or trailing zeros; "" for zero
	exp    int    // value = 0.digits × 10^exp
}

// normalize parses a valid number literal into a canonical form.
func normalize(s string) decimal {
	var d decimal
	if s[0] == '-' {
		d.neg = true
		s = s[1:]
	}
	mant, expPart := s, ""
	for i := range len(s) {
		if s[i] == 'e' || s[i] == 'E' {
			mant, expPart = s[:i], s[i+1:]
			break
		}
	}
	exp := 0
	if expPart != "" {
		e, err := strconv.ParseInt(expPart, 10, 64)
		if err != nil {
			// Beyond int64: clamp far beyond anything the literal's
			// digits can offset.
			e = math.MaxInt64 / 4
			if expPart[0] == '-' {
				e = -e
			}
		}
		exp = int(max(min(e, math.MaxInt64/4), -math.MaxInt64/4))
	}
	intPart, frac := mant, ""
	for i := range len(mant) {
		if mant[i] == '.' {
			intPart, frac = mant[:i], mant[i+1:]
			break
		}
	}
	digits := intPart + frac
	exp += len(intPart)
	i := 0
	for i < len(digits) && digits[i] == '0' {
		i++
		exp--
	}
	digits = digits[i:]
	j := len(digits)
	for j > 0 && digits[j-1] == '0' {
		j--
	}
	digits = digits[:j]
	if digits == "" {
		return decimal{} // zero, of either sign
	}
	d.digits, d.exp = digits, exp
	return d
}

// Compare compares two number literals by their exact decimal values: -1
// if a < b, 0 if equal, +1 if a > b. It works for numbers of any size
// without allocating big numbers. An invalid literal is an error wrapping
// [ErrSyntax].
func Compare(a, b json.Number) (int, error) {
	for _, n := range [2]json.Number{a, b} {
		if !validNumber(string(n)) {
			return 0, &SyntaxError{Msg: fmt.Sprintf("%q is not a number", string(n)), Err: ErrSyntax}
		}
	}
	da, db := normalize(string(a)), normalize(string(b))
	sign := func(d decimal) int {
		switch {
		case d.digits == "":
			return 0
		case d.neg:
			return -1
		}
		return 1
	}
	sa, sb := sign(da), sign(db)
	if sa != sb || sa == 0 {
		return cmpInt(sa, sb), nil
	}
	// Same sign, both non-zero: compare magnitudes, then apply the sign.
	m := cmpInt(da.exp, db.exp)
	if m == 0 {
		m = cmpDigits(da.digits, db.digits)
	}
	return sa * m, nil
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cmpDigits compares two digit strings as fractions 0.a and 0.b.
func cmpDigits(a, b string) int {
	for i := range max(len(a), len(b)) {
		var ca, cb byte = '0', '0'
		if i < len(a) {
			ca = a[i]
		}
		if i < len(b) {
			cb = b[i]
		}
		if ca != cb {
			return cmpInt(int(ca), int(cb))
		}
	}
	return 0
}

func validNumber(lit string) bool {
	if lit == "" || (lit[0] != '-' && (lit[0] < '0' || lit[0] > '9')) {
		return false
	}
	p := parser{data: []byte(lit)}
	_, err := p.number()
	return err == nil && p.i == len(lit)
}
