package jsonrecord

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// flatAgrees fails unless the flat scan, where it takes in, decides as
// the general parser does: it accepts only input the parser accepts, and
// finds the same spans.
func flatAgrees(t *testing.T, in []byte, want []string) (took bool) {
	t.Helper()
	at := make([][2]int, len(want))
	if !flatScan(in, want, at) {
		return false
	}
	p := parser{data: in, want: want}
	if err := p.top(true, true); err != nil {
		t.Fatalf("flat scan accepted %q, the parser: %v", in, err)
	}
	for i := range want {
		if at[i] != p.at[i] {
			t.Fatalf("flat scan of %q: %q at %v, the parser: %v", in, want[i], at[i], p.at[i])
		}
	}
	return true
}

var flatCases = []string{
	`{}`, ` { } `, `{"a":1}`, `{"a":-0.5e+3,"b":"x","c":true,"d":false,"e":null}`, "\t{\"a\" :\n\"b\" , \"c\":2}\r\n",
	`{"a":"x\"y\\z\/\b\f\n\r\t"}`, `{"a":"é😀"}`, `{"amount":37,"id":1,"pad":"q3ZkT","user":"user-1"}`,
	string(benchLine), manyKeys(16, -1),
	// Not taken (nested, escapes in keys, \u, too many keys) or rejected.
	`{"a":{"b":1}}`, `{"a":[1]}`, `{"\u0061":1}`, `{"é":1}`, `{"a":"\u00e9"}`, manyKeys(17, -1), manyKeys(16, 15),
	`{"a":1,"a":2}`, `{"a":1,}`, `{"a" 1}`, `{"a":01}`, `{"a":1.}`, `{"a":tru}`, `{"a":truex}`, `{"a":nul}`,
	`{"a":1} x`, `{"a":1`, `{"a":"x`, `{"a":"x\`, "{\"a\":\"\xff\"}", "{\"a\":\"a\x01\"}", `{"a":"\q"}`, `{`, ``, `[]`,
	`null`, `{"a":-}`, `{"a":1e}`, `{"a":"12345678\"9"}`, `{"a":"1234567\\"}`, `{"a":"1234567890"`, `{"a"}`, `{1:2}`,
}

func TestFlatAgreesWithParser(t *testing.T) {
	want := []string{"a", "b", "e", "k3", "amount", "pad", "x"}
	took := 0
	for _, c := range flatCases {
		if flatAgrees(t, []byte(c), want) {
			took++
		}
	}
	if took < 10 {
		t.Errorf("the flat scan took %d of the cases, want at least the 10 flat ones", took)
	}
	// Random flat objects, and every one of them with one byte changed,
	// deleted or repeated: each mutation that the flat scan takes must
	// be one the parser accepts, with the same spans.
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("{}[]:,\"\\/ \t\n-+.eE0123456789abfnrtux\x01\x7f\xc3\xa9\xff")
	mutants, taken := 0, 0
	for range 2000 {
		in := []byte(randomFlat(r))
		if !flatAgrees(t, in, want) {
			t.Fatalf("the flat scan did not take the flat object %q", in)
		}
		for range 20 {
			m := append([]byte(nil), in...)
			i := r.IntN(len(m))
			switch r.IntN(3) {
			case 0:
				m[i] = alphabet[r.IntN(len(alphabet))]
			case 1:
				m = append(m[:i], m[i+1:]...)
			default:
				m = append(m[:i+1], m[i:]...)
			}
			mutants++
			if flatAgrees(t, m, want) {
				taken++
			}
		}
	}
	if taken == 0 || taken == mutants {
		t.Errorf("the flat scan took %d of %d mutants; want some, not all", taken, mutants)
	}
}

// randomFlat returns a flat JSON object of random members.
func randomFlat(r *rand.Rand) string {
	var b strings.Builder
	b.WriteString(ws(r) + "{")
	n := r.IntN(8)
	for i := range n {
		if i > 0 {
			b.WriteString(ws(r) + "," + ws(r))
		}
		b.WriteString(`"` + []string{"a", "b", "e", "k3", "amount", "pad", "x", "y", "zz"}[i] + `"` + ws(r) + ":" + ws(r))
		switch r.IntN(6) {
		case 0:
			b.WriteString([]string{"0", "-1", "37", "1.5", "-0.25e-3", "12345678901234567890123", "1E9"}[r.IntN(7)])
		case 1:
			b.WriteString([]string{"true", "false", "null"}[r.IntN(3)])
		default:
			b.WriteByte('"')
			for range r.IntN(40) {
				b.WriteString([]string{"a", "Z", "9", " ", "é", "😀", `\"`, `\\`, `\n`, `\/`, "~"}[r.IntN(11)])
			}
			b.WriteByte('"')
		}
	}
	b.WriteString("}" + ws(r))
	return b.String()
}

func ws(r *rand.Rand) string { return []string{"", "", "", " ", "\n\t"}[r.IntN(5)] }

func TestFlatScanNoAllocation(t *testing.T) {
	keys := []string{"amount", "id", "pad", "user"}
	spans := make([][2]int, len(keys))
	if n := testing.AllocsPerRun(100, func() {
		if err := LookupSpans(benchLine, keys, spans); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("LookupSpans: %v allocations per run, want 0", n)
	}
}

func FuzzFlat(f *testing.F) {
	for _, s := range flatCases {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		flatAgrees(t, in, []string{"a", "b", "amount"})
		sameOutcome(t, in)
		lookupAgrees(t, in, []string{"a", "b", "amount"})
	})
}

// BenchmarkLookupSpans is the Kafka source's check of a benchmark record
// that also finds the members the first step reads: the flat scan, and
// the general parser it falls back to.
func BenchmarkLookupSpans(b *testing.B) {
	in := []byte(`{"amount":37,"id":1234567,"pad":"q3ZkTa9Lm2Xc7Vb1Nn4Rt6Yu8Ii0Oo5Pp3Aa","user":"user-1234"}`)
	keys := []string{"amount", "id", "pad", "user"}
	spans := make([][2]int, len(keys))
	b.Run("flat", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(in)))
		for b.Loop() {
			if err := LookupSpans(in, keys, spans); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parser", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(in)))
		for b.Loop() {
			p := parser{data: in, want: keys}
			if err := p.top(true, true); err != nil {
				b.Fatal(err)
			}
		}
	})
}
