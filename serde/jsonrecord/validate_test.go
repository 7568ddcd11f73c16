package jsonrecord

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// sameOutcome fails unless Validate/ValidateObject decide as
// Decode/DecodeObject do, with the same error text.
func sameOutcome(t *testing.T, in []byte) {
	t.Helper()
	_, derr := Decode(in)
	verr := Validate(in)
	if fmt.Sprint(derr) != fmt.Sprint(verr) {
		t.Fatalf("Decode(%q) = %v, Validate = %v", in, derr, verr)
	}
	_, derr = DecodeObject(in)
	verr = ValidateObject(in)
	if fmt.Sprint(derr) != fmt.Sprint(verr) {
		t.Fatalf("DecodeObject(%q) = %v, ValidateObject = %v", in, derr, verr)
	}
	if verr != nil {
		var se *SyntaxError
		if !errors.As(verr, &se) {
			t.Fatalf("Validate(%q): %T, want *SyntaxError", in, verr)
		}
	}
}

func manyKeys(n int, dupAt int) string {
	var b strings.Builder
	b.WriteString("{")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		k := i
		if i == dupAt {
			k = 0
		}
		fmt.Fprintf(&b, `"k%d":%d`, k, i)
	}
	b.WriteString("}")
	return b.String()
}

func TestValidateAgreesWithDecode(t *testing.T) {
	cases := []string{
		`{"a":1}`, `{}`, `[]`, `1`, `"s"`, `null`, `true`, ` {"a":1} x`, `{"a":1,"a":2}`,
		`{"a":{"b":1,"b":2}}`, `{"a":1,"b":{"a":1}}`, `[{"a":1},{"a":1}]`,
		`{"\u0061":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"\ud83d\ude00":1,"😀":2}`, `{"é":1,"\u00e9":2}`,
		`{"a\nb":1,"a\\nb":2}`, `{"a\/":1,"a/":2}`, `{"\"":1,"\u0022":2}`, `{"ab":1,"a":2}`, `{"a":1,"ab":2}`,
		"{\"a\":\"\xff\"}", "{\"\xff\":1}", `{"a":"\ud800"}`, `{"\ud800x":1}`, `"\q"`, `{"a":1,}`, `{"a" 1}`,
		`[1,2`, `{"a":tru}`, `-`, `1.`, `1e`, `01`, "\"a\x01\"", `{"a":[1,{"a":1,"a":1}]}`,
		manyKeys(16, -1), manyKeys(17, -1), manyKeys(40, -1), manyKeys(40, 3), manyKeys(40, 16), manyKeys(40, 17), manyKeys(40, 39),
		manyKeys(17, 16), `{"a":{"x":1},"b":{"x":1},"x":1}`,
		strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth+1),
		string(benchLine),
	}
	for _, c := range cases {
		sameOutcome(t, []byte(c))
	}
}

func TestValidateNoAllocation(t *testing.T) {
	deep := []byte(`{"a":{"b":{"c":[1,2,{"d":"e\u00e9","f":null}]}},"g":"\ud83d\ude00","h":` + manyKeys(16, -1) + `}`)
	for _, in := range [][]byte{benchLine, deep} {
		if n := testing.AllocsPerRun(100, func() {
			if err := ValidateObject(in); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("ValidateObject(%s): %v allocations per run, want 0", in, n)
		}
	}
}

func FuzzValidate(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":"\ud83d\ude00"}`, `[1.0,1e3,12345678901234567891]`, `{"a":{"a":1}}`, "\"\xff\"",
		`{"\u0061":1,"a":2}`, `{"a\/":1,"a/":2}`, manyKeys(20, 18), manyKeys(20, -1), `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) { sameOutcome(t, in) })
}

// BenchmarkValidateObject against BenchmarkDecodeObject (same line).
func BenchmarkValidateObject(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchLine)))
	for b.Loop() {
		if err := ValidateObject(benchLine); err != nil {
			b.Fatal(err)
		}
	}
}
