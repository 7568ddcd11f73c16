package transform

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/format"
	"github.com/sluice-io/sluice/internal/registry"
	"github.com/sluice-io/sluice/serde/jsonrecord"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fastExpr returns a random expression of the fast path's language
// (fast.go) over the fields lazyDoc writes, with literals chosen to hit
// its edges: int64 overflow, mixed int and float, division and modulo by
// zero, NaN, strings with characters encoding/json escapes, nil, and
// operand types expr rejects.
func fastExpr(rng *rand.Rand, depth int) string {
	if depth <= 0 || rng.IntN(4) == 0 {
		switch rng.IntN(10) {
		case 0, 1, 2, 3:
			return []string{"a", "b", "c", "amount", "id", "user", "pad", "nope", "é"}[rng.IntN(9)]
		case 4, 5:
			return []string{"0", "1", "2", "3", "7", "100", "9223372036854775807", "4611686018427387904"}[rng.IntN(8)]
		case 6:
			return []string{"1.5", "0.1", "2.0", "1e300", "0.0", "3.25"}[rng.IntN(6)]
		case 7:
			return []string{`"s"`, `"user-1"`, `"é"`, `""`, `"<x>"`, `"a\"b"`}[rng.IntN(6)]
		case 8:
			return []string{"true", "false"}[rng.IntN(2)]
		}
		return "nil"
	}
	sub := func() string { return fastExpr(rng, depth-1) }
	switch rng.IntN(8) {
	case 0:
		return []string{"-", "not ", "!"}[rng.IntN(3)] + "(" + sub() + ")"
	case 1:
		return "(" + sub() + " ? " + sub() + " : " + sub() + ")"
	case 2:
		return "(" + sub() + " ?? " + sub() + ")"
	}
	ops := []string{"+", "-", "*", "/", "%", "==", "!=", "<", ">", "<=", ">=", "&&", "||", "and", "or"}
	return "(" + sub() + " " + ops[rng.IntN(len(ops))] + " " + sub() + ")"
}

// fastSteps returns a random filter or map over fastExpr, compiled twice:
// with its fast path and without (the general lazy path); ok false when
// it does not compile or gets no fast path.
func fastSteps(t testing.TB, rng *rand.Rand) (fast, general *Compiled, ok bool) {
	var s Step
	if rng.IntN(3) == 0 {
		s = Step{Kind: Filter, Name: "f", Expr: fastExpr(rng, 3)}
	} else {
		members := []string{`"x": ` + fastExpr(rng, 3)}
		if rng.IntN(2) == 0 {
			members = append(members, `"y": `+fastExpr(rng, 2))
		}
		for _, f := range []string{"a", "id", "user"} {
			if rng.IntN(2) == 0 {
				members = append(members, fmt.Sprintf("%q: %s", f, f))
			}
		}
		rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
		s = Step{Kind: Map, Name: "m", Expr: "{" + strings.Join(members, ", ") + "}"}
	}
	fast, err := Compile(s)
	if err != nil || fast.lazy == nil || !fast.lazy.fast {
		return nil, nil, false
	}
	general, err = Compile(s)
	if err != nil {
		t.Fatalf("%s: compiles once, not twice: %v", s.Expr, err)
	}
	general.lazy.fast, general.lazy.filterFast = false, nil
	return fast, general, true
}

// fastAgrees runs both steps on doc, raw and checked, and fails unless
// they give the same bytes, the same decision or the same error; it
// reports whether the fast path made the result.
func fastAgrees(t *testing.T, fast, general *Compiled, js format.Codec, doc []byte) (hit bool) {
	t.Helper()
	kr := &kgo.Record{Topic: "in", Partition: 1, Offset: 42, Value: doc}
	raw := registry.KafkaRecord(kr, &registry.Codecs{Value: js})
	for _, r := range []Record{raw, raw.WithRawValue(doc)} {
		if r.Checked() && jsonrecord.ValidateObject(doc) != nil {
			continue // a source never marks such bytes checked
		}
		if fast.Kind == Filter {
			fk, ferr := fast.Keep(r)
			gk, gerr := general.Keep(r)
			if fk != gk || fmt.Sprint(ferr) != fmt.Sprint(gerr) {
				t.Fatalf("%s on %q (checked %v): fast %v, %v; general %v, %v", fast.Expr, doc, r.Checked(), fk, ferr, gk, gerr)
			}
			continue
		}
		fo, ferr := fast.Apply(r)
		gro, gerr := general.Apply(r)
		fb, _, _ := fo.Bytes()
		gb, _, _ := gro.Bytes()
		if fmt.Sprint(ferr) != fmt.Sprint(gerr) || fo.Decoded() != gro.Decoded() || string(fb) != string(gb) ||
			fmt.Sprint(fo.Value()) != fmt.Sprint(gro.Value()) {
			t.Fatalf("%s on %q (checked %v): fast %q %v, %v; general %q %v, %v", fast.Expr, doc, r.Checked(),
				fb, fo.Value(), ferr, gb, gro.Value(), gerr)
		}
	}
	// Did the fast path decide? (Only for a document the lookup takes.)
	var arr [8][]byte
	vals, ok := fast.lazy.lookup(registry.RawRecord(doc, &registry.Codecs{Value: js}), doc, &arr)
	if !ok {
		return false
	}
	if fast.Kind == Filter {
		v, ok := fast.lazy.filterFast.eval(vals)
		return ok && v.kind == fBool
	}
	_, ok = fast.lazy.outputFast(doc, vals)
	return ok
}

// TestFastAgreesWithGeneral: random fast-path filters and maps on random
// documents give the same output bytes, decisions and errors on the fast
// path as on the general lazy path (expr's VM), and agree with the full
// path (lazyAgrees).
func TestFastAgreesWithGeneral(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	exprs, docs := 400, 150
	if testing.Short() {
		exprs = 100
	}
	codecs := lazyCodecs(t)
	js := codecs["json-object"]
	var tried, hits, compiled int
	for range exprs * 4 {
		if compiled == exprs {
			break
		}
		fast, general, ok := fastSteps(t, rng)
		if !ok {
			continue
		}
		compiled++
		for range docs {
			doc := lazyDoc(rng)
			tried++
			if fastAgrees(t, fast, general, js, doc) {
				hits++
			}
			lazyAgrees(t, fast, js, doc)
		}
	}
	t.Logf("%d expressions on the fast path, %d of %d runs decided by it", compiled, hits, tried)
	if compiled < exprs/2 || hits < tried/20 {
		t.Fatalf("%d expressions compiled, %d of %d runs on the fast path: the random cases miss it", compiled, hits, tried)
	}
}

// TestFastPlans: which expressions get the fast path, and its results on
// the edges of expr's arithmetic.
func TestFastPlans(t *testing.T) {
	for _, c := range []struct {
		s    Step
		fast bool
	}{
		{Step{Kind: Map, Expr: `{"amount": amount * 2, "id": id, "pad": pad, "user": user}`}, true},
		{Step{Kind: Filter, Expr: `amount >= 0 && user != "x"`}, true},
		{Step{Kind: Map, Expr: `{"a": a ?? 0, "b": b > 1 ? "big" : "small"}`}, true},
		{Step{Kind: Map, Expr: `{"a": a, "id": id}`}, false}, // copies only: nothing to compute
		{Step{Kind: Map, Expr: `{"s": string(a)}`}, false},
		{Step{Kind: Map, Expr: `{"t": meta.topic}`}, false},
		{Step{Kind: Map, Expr: `{"p": a ** 2}`}, false},
		{Step{Kind: Filter, Expr: `a in [1, 2]`}, false},
		{Step{Kind: Filter, Expr: `let x = 1; x > a`}, false},
	} {
		p := planLazy(c.s)
		if got := p != nil && p.fast; got != c.fast {
			t.Errorf("%s: fast %v, want %v", c.s.Expr, got, c.fast)
		}
	}
	js := lazyCodecs(t)["json-object"]
	for _, c := range []struct {
		expr, doc, want string // want "": the fast path gives up
	}{
		{`{"a": a * 2}`, `{"a":37}`, `{"a":74}`},
		{`{"a": a * 2}`, `{"a":4611686018427387904}`, `{"a":-9223372036854775808}`}, // wraps as expr's int
		{`{"a": a * 2}`, `{"a":1.5}`, `{"a":3}`},
		{`{"a": a * 2}`, `{"a":1.0}`, ``},                  // a json.Number
		{`{"a": a * 2}`, `{"a":12345678901234567891}`, ``}, // a json.Number
		{`{"a": a * 2}`, `{"b":1}`, ``},                    // nil * 2 fails
		{`{"a": a / 2}`, `{"a":3}`, `{"a":1.5}`},
		{`{"a": a / 0}`, `{"a":3}`, ``}, // +Inf
		{`{"a": a % 0}`, `{"a":3}`, ``},
		{`{"a": -a}`, `{"a":-9223372036854775808}`, `{"a":-9223372036854775808}`},
		{`{"a": a + "x"}`, `{"a":"<\u00e9>"}`, `{"a":"\u003cé\u003ex"}`},
		{`{"a": a == 1}`, `{"a":1.0}`, ``},
		{`{"a": a == 1, "b": b}`, `{"a":1,"b":[1]}`, `{"a":true,"b":[1]}`},
		{`{"a": a == 1, "b": b}`, `{"a":1e0,"b":[1]}`, ``}, // a json.Number
		{`{"a": a == 2}`, `{"a":2.5}`, `{"a":false}`},
		{`{"a": a >= 2.5 && a < 3}`, `{"a":2.5}`, `{"a":true}`},
		{`{"a": 0.0 / 0.0 <= a}`, `{"a":2.5}`, `{"a":false}`}, // NaN
		{`{"a": a % 2, "b": b > 0 ? b : -b}`, `{"a":-7,"b":-2.5}`, `{"a":-1,"b":2.5}`},
		{`{"a": a < "b"}`, `{"a":1}`, ``},
		{`{"a": a ?? "none", "id": id}`, `{"a":null,"id":7}`, `{"a":"none","id":7}`},
	} {
		fast, general := mustCompile(t, Step{Kind: Map, Name: "m", Expr: c.expr}), mustCompile(t, Step{Kind: Map, Name: "m", Expr: c.expr})
		general.lazy.fast = false
		var arr [8][]byte
		vals, ok := fast.lazy.lookup(registry.RawRecord([]byte(c.doc), &registry.Codecs{Value: js}), []byte(c.doc), &arr)
		if !ok {
			t.Fatalf("%s: lookup of %s failed", c.expr, c.doc)
		}
		out, ok := fast.lazy.outputFast([]byte(c.doc), vals)
		if got := string(out); !ok && c.want != "" || ok && got != c.want {
			t.Errorf("%s on %s: fast %q (ok %v), want %q", c.expr, c.doc, got, ok, c.want)
		}
		fastAgrees(t, fast, general, js, []byte(c.doc))
	}
}

// TestDecodeNumberAgrees: jsonrecord.DecodeNumber is DecodeValue for the
// numbers it takes.
func TestDecodeNumberAgrees(t *testing.T) {
	for _, lit := range []string{"0", "-0", "1", "-1", "37", "9223372036854775807", "9223372036854775808",
		"-9223372036854775808", "-9223372036854775809", "99999999999999999999", "1.5", "1.0", "1e3", "1E2", "0.1",
		"0.10", "2.5e-3", "1e300", "1e400", "-0.0", "0.000001", "1e-7", "100000000000000000000000", "1e21", "01", "1.", "-", ""} {
		i, f, isInt, ok := jsonrecord.DecodeNumber([]byte(lit))
		v, err := jsonrecord.DecodeValue([]byte(lit))
		switch x := v.(type) {
		case int64:
			if !ok || !isInt || i != x {
				t.Errorf("%s: DecodeNumber %d %v %v %v, DecodeValue %d", lit, i, f, isInt, ok, x)
			}
		case float64:
			if !ok || isInt || f != x {
				t.Errorf("%s: DecodeNumber %d %v %v %v, DecodeValue %v", lit, i, f, isInt, ok, x)
			}
		default:
			if ok {
				t.Errorf("%s: DecodeNumber %d %v %v ok, DecodeValue %#v, %v", lit, i, f, isInt, v, err)
			}
		}
	}
}

// FuzzFast: a fuzzed document under random fast-path expressions.
func FuzzFast(f *testing.F) {
	for _, s := range []string{`{"amount":37,"id":1,"pad":"q3ZkT","user":"user-1"}`, `{"a":1.5,"b":null,"c":"x"}`, `{"a":-9223372036854775808,"b":2}`} {
		f.Add([]byte(s), uint64(1))
	}
	js := lazyCodecs(f)["json-object"]
	f.Fuzz(func(t *testing.T, doc []byte, seed uint64) {
		rng := rand.New(rand.NewPCG(seed, 1))
		for range 20 {
			if fast, general, ok := fastSteps(t, rng); ok {
				fastAgrees(t, fast, general, js, doc)
				return
			}
		}
	})
}
