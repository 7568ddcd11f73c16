package jsonrecord

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestNumbers decodes numbers exactly and checks that encoding/json writes
// each back byte for byte.
func TestNumbers(t *testing.T) {
	for _, c := range []struct {
		lit  string
		want any
	}{
		{"0", int64(0)},
		{"7", int64(7)},
		{"-42", int64(-42)},
		{"9007199254740993", int64(9007199254740993)}, // 2^53+1: float64 would round it
		{"9223372036854775807", int64(9223372036854775807)},
		{"-9223372036854775808", int64(-9223372036854775808)},
		{"9223372036854775808", json.Number("9223372036854775808")}, // beyond int64
		{"12345678901234567891", json.Number("12345678901234567891")},
		{"-12345678901234567891", json.Number("-12345678901234567891")},
		{"-0", json.Number("-0")},
		{"1.5", 1.5},
		{"-0.25", -0.25},
		{"0.1", 0.1},
		{"0.30000000000000004", 0.30000000000000004},
		{"1e-7", 1e-7},
		{"1e+21", 1e21},
		{"1.0", json.Number("1.0")}, // float64 would write 1
		{"1.50", json.Number("1.50")},
		{"1e3", json.Number("1e3")},
		{"1E+21", json.Number("1E+21")},
		{"2.5e-3", json.Number("2.5e-3")},
		{"0.1000000000000000000001", json.Number("0.1000000000000000000001")},
		{"123456789.123456789123", json.Number("123456789.123456789123")},
		{"1e400", json.Number("1e400")},
		{"1e-400", json.Number("1e-400")},
	} {
		rec := `{"n":` + c.lit + `,"a":[` + c.lit + `]}`
		m, err := DecodeObject([]byte(rec))
		if err != nil {
			t.Errorf("%s: %v", c.lit, err)
			continue
		}
		if got := m["n"]; got != c.want {
			t.Errorf("%s: got %#v (%T), want %#v (%T)", c.lit, got, got, c.want, c.want)
		}
		if got := m["a"].([]any)[0]; got != c.want {
			t.Errorf("%s in an array: got %#v, want %#v", c.lit, got, c.want)
		}
		out, err := json.Marshal(m["n"])
		if err != nil || string(out) != c.lit {
			t.Errorf("%s: re-encoded as %s (%v)", c.lit, out, err)
		}
	}
}

// TestRoundTripBytes: a record re-encoded by encoding/json keeps every
// number's bytes (keys are sorted, so the input is written sorted).
func TestRoundTripBytes(t *testing.T) {
	in := `{"big":12345678901234567891,"f":1.0,"i":-3,"nested":{"x":[1e3,0.5,-12345678901234567891]},"s":"é\u00e9"}`
	m, err := DecodeObject([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"big":12345678901234567891,"f":1.0,"i":-3,"nested":{"x":[1e3,0.5,-12345678901234567891]},"s":"éé"}`; string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
}

// TestRejects: input encoding/json would rewrite or accept silently is an
// error naming the problem and its byte offset.
func TestRejects(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     error
		at       int
	}{
		{"invalid UTF-8 in a value", "{\"a\":\"x\xffy\"}", ErrInvalidUTF8, 7},
		{"invalid UTF-8 in a key", "{\"k\xc3\":1}", ErrInvalidUTF8, 3},
		{"invalid UTF-8 after an escape", "{\"a\":\"\\n\xfe\"}", ErrInvalidUTF8, 8},
		{"truncated UTF-8 sequence", "{\"a\":\"\xe2\x82\"}", ErrInvalidUTF8, 6},
		{"UTF-8 encoded surrogate", "{\"a\":\"\xed\xa0\x80\"}", ErrInvalidUTF8, 6},
		{"lone high surrogate escape", `{"a":"\ud800"}`, ErrInvalidUTF8, 6},
		{"lone low surrogate escape", `{"a":"\udc00x"}`, ErrInvalidUTF8, 6},
		{"high surrogate then a non-surrogate", `{"a":"\ud800\u0041"}`, ErrInvalidUTF8, 6},
		{"duplicate key", `{"a":1,"a":2}`, ErrDuplicateKey, 7},
		{"duplicate key after unescaping", `{"a":1,"\u0061":2}`, ErrDuplicateKey, 7},
		{"duplicate key nested in an object", `{"a":{"b":1,"c":2,"b":3}}`, ErrDuplicateKey, 18},
		{"duplicate key in an array's object", `{"a":[{},{"x":1,"x":1}]}`, ErrDuplicateKey, 16},
		{"null line", `null`, ErrNotObject, 0},
		{"null line with blanks", "  null ", ErrNotObject, 2},
		{"array line", `[1,2]`, ErrNotObject, 0},
		{"number line", `12345678901234567891`, ErrNotObject, 0},
		{"string line", `"x"`, ErrNotObject, 0},
		{"boolean line", `true`, ErrNotObject, 0},
		{"empty", ``, ErrSyntax, 0},
		{"truncated", `{"a":1`, ErrSyntax, 6},
		{"trailing data", `{"a":1} x`, ErrSyntax, 8},
		{"two objects", `{}{}`, ErrSyntax, 2},
		{"trailing comma", `{"a":1,}`, ErrSyntax, 7},
		{"leading zero", `{"a":01}`, ErrSyntax, 6},
		{"bare dot", `{"a":1.}`, ErrSyntax, 5},
		{"NaN", `{"a":NaN}`, ErrSyntax, 5},
		{"single quotes", `{'a':1}`, ErrSyntax, 1},
		{"control character", "{\"a\":\"\t\"}", ErrSyntax, 6},
		{"bad escape", `{"a":"\x"}`, ErrSyntax, 6},
	} {
		_, err := DecodeObject([]byte(c.in))
		var se *SyntaxError
		if !errors.Is(err, c.want) || !errors.As(err, &se) || se.Offset != c.at {
			t.Errorf("%s: %q: got %v, want %v at byte %d", c.name, c.in, err, c.want, c.at)
		}
	}
}

// TestValidAgrees: everything else is decoded as encoding/json decodes it
// (with UseNumber, numbers compared by value).
func TestValidAgrees(t *testing.T) {
	for _, in := range []string{
		`{}`,
		` { "a" : [ ] , "b" : { } } `,
		`{"s":"a\"b\\c\/d\b\f\n\r\t\u0041\u00e9\u20ac\ud83d\ude00","t":true,"f":false,"n":null}`,
		`{"x":[1,-2.5,[3,[4,{"y":"z"}]],null]}`,
		`{"emoji":"😀","cjk":"漢字","":"empty key"}`,
		`{"A":1,"a":2}`,
	} {
		got, err := Decode([]byte(in))
		if err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		d := json.NewDecoder(strings.NewReader(in))
		d.UseNumber()
		var want any
		if err := d.Decode(&want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(normalizeNumbers(got), normalizeNumbers(want)) {
			t.Errorf("%s:\ngot  %#v\nwant %#v", in, got, want)
		}
	}
}

func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = normalizeNumbers(e)
		}
	case json.Number:
		return normalize(string(x))
	case int64:
		b, _ := json.Marshal(x)
		return normalize(string(b))
	case float64:
		b, _ := json.Marshal(x)
		return normalize(string(b))
	}
	return v
}

// TestUnmarshalTargets covers typed targets: structs and typed maps are
// checked the same way, then decoded by encoding/json.
func TestUnmarshalTargets(t *testing.T) {
	type S struct {
		ID   int64  `json:"id"`
		Name string `json:"name"`
	}
	var s S
	if err := Unmarshal([]byte(`{"id":9007199254740993,"name":"x"}`), &s); err != nil || s.ID != 9007199254740993 || s.Name != "x" {
		t.Errorf("struct: got %+v, %v", s, err)
	}
	for in, want := range map[string]error{
		`null`:                  ErrNotObject,
		`[1]`:                   ErrNotObject,
		`{"id":1,"id":2}`:       ErrDuplicateKey,
		"{\"name\":\"\xff\"}":   ErrInvalidUTF8,
		`{"id":"not a number"}`: ErrType,
	} {
		var s S
		if err := Unmarshal([]byte(in), &s); !errors.Is(err, want) {
			t.Errorf("struct %q: got %v, want %v", in, err, want)
		}
		var p *S
		if err := Unmarshal([]byte(in), &p); !errors.Is(err, want) {
			t.Errorf("*struct %q: got %v, want %v", in, err, want)
		}
	}
	type Rec map[string]any
	var r Rec
	if err := Unmarshal([]byte(`{"n":12345678901234567891}`), &r); err != nil || r["n"] != json.Number("12345678901234567891") {
		t.Errorf("named map: got %#v, %v", r, err)
	}
	var m map[string]any
	if err := Unmarshal([]byte(`null`), &m); !errors.Is(err, ErrNotObject) || m != nil {
		t.Errorf("null into a map: got %v, %v", m, err)
	}
	var a any
	if err := Unmarshal([]byte(`[1,"x"]`), &a); err != nil || !reflect.DeepEqual(a, []any{int64(1), "x"}) {
		t.Errorf("array into any: got %#v, %v", a, err)
	}
	if err := Unmarshal([]byte(`null`), &a); !errors.Is(err, ErrNotObject) {
		t.Errorf("null into any: got %v", err)
	}
	var raw json.RawMessage
	if err := Unmarshal([]byte(`null`), &raw); err != nil || string(raw) != "null" {
		t.Errorf("null into a json.Unmarshaler: got %s, %v", raw, err)
	}
	var ints []int
	if err := Unmarshal([]byte(`[1,2]`), &ints); err != nil || len(ints) != 2 {
		t.Errorf("[]int: got %v, %v", ints, err)
	}
	if err := Unmarshal([]byte(`{}`), m); err == nil {
		t.Error("non-pointer: got no error")
	}
}

func TestValue(t *testing.T) {
	for lit, want := range map[string]any{
		"7":                        int64(7),
		"-0":                       int64(0),
		"1.0":                      1.0,
		"1e3":                      1000.0,
		"0.10":                     0.1,
		"-2.5E-3":                  -0.0025,
		"1e21":                     1e21,
		"9223372036854775808":      9223372036854775808.0, // 2^63 is a float64
		"12345678901234567891":     nil,
		"0.1000000000000000000001": nil,
		"1e400":                    nil,
		"1e-400":                   nil,
	} {
		got, err := Value(json.Number(lit))
		if want == nil {
			if !errors.Is(err, ErrInexact) {
				t.Errorf("Value(%s): got %v, %v; want ErrInexact", lit, got, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("Value(%s): got %#v, %v; want %#v", lit, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "1.", "--1", "1 "} {
		if _, err := Value(json.Number(bad)); !errors.Is(err, ErrSyntax) {
			t.Errorf("Value(%q): got %v, want ErrSyntax", bad, err)
		}
	}
}

func TestDeepNesting(t *testing.T) {
	in := `{"a":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}`
	if _, err := Decode([]byte(in)); !errors.Is(err, ErrSyntax) {
		t.Errorf("nesting beyond %d: got %v", maxDepth, err)
	}
}

// FuzzDecode: whatever encoding/json rejects is rejected; what is accepted
// re-encodes to JSON that decodes to the same value.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":"\ud83d\ude00"}`, `[1.0,1e3,12345678901234567891]`, `{"a":{"a":1}}`, "\"\xff\""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		v, err := Decode(in)
		if err != nil {
			return
		}
		if !json.Valid(in) || !utf8.Valid(in) {
			t.Fatalf("accepted %q, which encoding/json or UTF-8 rejects", in)
		}
		out, err := json.Marshal(v)
		if err != nil {
			t.Fatalf("re-encode %#v: %v", v, err)
		}
		v2, err := Decode(out)
		if err != nil {
			t.Fatalf("re-decode %s: %v", out, err)
		}
		if !reflect.DeepEqual(v, v2) {
			t.Fatalf("round trip changed %#v into %#v", v, v2)
		}
		if bytes.Contains(out, []byte("\ufffd")) && !bytes.Contains(in, []byte("\ufffd")) && !bytes.Contains(in, []byte(`\ufffd`)) && !bytes.Contains(in, []byte(`\uFFFD`)) {
			t.Fatalf("U+FFFD appeared: %q → %s", in, out)
		}
	})
}

func TestCompare(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"1", "1.0", 0},
		{"0", "-0.0e5", 0},
		{"1e3", "1000", 0},
		{"12345678901234567891", "12345678901234567892", -1},
		{"12345678901234567891", "1.2345678901234567168e19", 1},
		{"-12345678901234567891", "-12345678901234567892", 1},
		{"-1", "0", -1},
		{"0.1", "0.10000000000000000001", -1},
		{"1e999999999999999999999", "1e400", 1},
		{"-1e999999999999999999999", "-1e400", -1},
		{"1e-999999999999999999999", "0", 1},
		{"2", "10", -1},
	} {
		got, err := Compare(json.Number(c.a), json.Number(c.b))
		if err != nil || got != c.want {
			t.Errorf("Compare(%s, %s) = %d, %v; want %d", c.a, c.b, got, err, c.want)
		}
		if back, _ := Compare(json.Number(c.b), json.Number(c.a)); back != -c.want {
			t.Errorf("Compare(%s, %s) = %d, want %d", c.b, c.a, back, -c.want)
		}
	}
	if _, err := Compare("1", "x"); !errors.Is(err, ErrSyntax) {
		t.Errorf("Compare with an invalid literal: got %v", err)
	}
}

var benchLine = []byte(`{"id":123456,"amount":731,"user":"user-6","ts":1733011200000,"tags":["a","b"],"price":12.5,"note":"caf\u00e9 ok"}`)

// BenchmarkDecodeObject against encoding/json decoding the same line into
// a map: run both with -bench Decode and compare.
func BenchmarkDecodeObject(b *testing.B) {
	for b.Loop() {
		if _, err := DecodeObject(benchLine); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeEncodingJSON(b *testing.B) {
	for b.Loop() {
		var m map[string]any
		if err := json.Unmarshal(benchLine, &m); err != nil {
			b.Fatal(err)
		}
	}
}
