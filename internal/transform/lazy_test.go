package transform

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/format"
	"github.com/sluice-io/sluice/internal/registry"
	"github.com/sluice-io/sluice/serde/jsonrecord"
	"github.com/twmb/franz-go/pkg/kgo"
)

// lazyExprs are the filters and maps the lazy-vs-full tests run: fields
// present and missing, null, exact numbers, escapes, let shadowing, meta.
var lazyExprs = []Step{
	{Kind: Filter, Expr: `amount >= 0`},
	{Kind: Filter, Expr: `a > 1`},
	{Kind: Filter, Expr: `a == b`},
	{Kind: Filter, Expr: `a != nil && b == nil`},
	{Kind: Filter, Expr: `a == 1.5 || a == 1e3 || string(a) == "12345678901234567891"`},
	{Kind: Filter, Expr: `string(a) + string(b) != "x"`},
	{Kind: Filter, Expr: `a in [1, 2, "s", nil]`},
	{Kind: Filter, Expr: `(let a = 2; a) + (a ?? 0) > 3`},
	{Kind: Filter, Expr: `é == "é" || é == 1`},
	{Kind: Filter, Expr: `(let z = 2; z) + (a ?? 0) > 3`},
	{Kind: Filter, Expr: `len(c ?? []) > 1`},
	{Kind: Filter, Expr: `meta.topic == "in" && id % 2 == 0`},
	{Kind: Filter, Expr: `all(c ?? [], {# != nil})`},
	{Kind: Filter, Expr: `a`},
	{Kind: Map, Expr: `{"amount": amount * 2, "id": id, "pad": pad, "user": user}`},
	{Kind: Map, Expr: `{"x": a, "y": b, "z": c, "n": nope}`},
	{Kind: Map, Expr: `{"b": a, "a": b + 1}`},
	{Kind: Map, Expr: `{"a": a, "a2": a, "s": string(a)}`},
	{Kind: Map, Expr: `{"c": c, "t": meta.topic, "o": meta.offset}`},
	{Kind: Map, Expr: `{"<&>": a, "é": é, "q": "<x>"}`},
	{Kind: Map, Expr: `{"f": float(a) / 3, "id": id}`},
	{Kind: Map, Expr: `{"a": a * 2 + 1, "b": b}`},
	{Kind: Map, Expr: `{"x": (a - 2.0) - 1, "id": id}`}, // 2.0 must stay a float in the computed part
	{Kind: Map, Expr: `{"x": (a ?? 1) * 1.0, "id": id}`},
	{Kind: Map, Expr: `{"a": -(a ?? 1), "id": id, "c": c}`},
	{Kind: Map, Expr: `{"s": (a ?? 0) > 1 ? "big" : "small", "p": pad}`},
	{Kind: Map, Expr: `{"d": (a ?? 0) - (b ?? 0) * 2 / 4, "u": user, "e": string(id) + "-" + "x<"}`},
	{Kind: Map, Expr: `{"f": filter(c ?? [], # != nil), "g": c?.[0], "n": not (a == nil), "a": a}`},
	{Kind: Map, Expr: `{"k": "\u00e9\n", "a": a}`},
	{Kind: Map, Expr: `{"m": {"x": a, "y": [b, 1]}, "a": a}`},
	{Kind: Map, Expr: `{}`},
	{Kind: Map, Expr: `{"c": c}`},
}

// lazyDoc returns a random JSON document: mostly objects over a few
// keys (some escaped, some repeated), with numbers in forms that decode to
// int64, float64 and json.Number, strings with escapes, nulls, nesting,
// whitespace; now and then something the decoder rejects.
func lazyDoc(rng *rand.Rand) []byte {
	var b strings.Builder
	ws := func() {
		if rng.IntN(4) == 0 {
			b.WriteString([]string{" ", "\n", "\t ", "\r\n"}[rng.IntN(4)])
		}
	}
	var value func(depth int)
	value = func(depth int) {
		ws()
		switch n := rng.IntN(14); {
		case n < 5:
			b.WriteString([]string{"0", "1", "2", "-7", "1.5", "1.0", "1e3", "-0", "0.10", "12345678901234567891",
				"3", "1E2", "2.5e-3", "9223372036854775807", "-9223372036854775808", "100000000000000000000000"}[rng.IntN(16)])
		case n < 8:
			b.WriteString([]string{`"s"`, `"x"`, `"é"`, `"\u00e9"`, `"a\"b"`, `"<tag>&"`, `"\ud83d\ude00"`, `""`, `"\/\n\t"`, `"user-1"`}[rng.IntN(10)])
		case n < 9:
			b.WriteString([]string{"null", "true", "false"}[rng.IntN(3)])
		case n < 11 && depth < 3:
			b.WriteString("[")
			for i := range rng.IntN(3) {
				if i > 0 {
					b.WriteString(",")
				}
				value(depth + 1)
			}
			ws()
			b.WriteString("]")
		case depth < 3:
			object(&b, rng, depth+1, value, ws)
		default:
			b.WriteString("7")
		}
		ws()
	}
	if rng.IntN(20) == 0 {
		value(0)
	} else {
		object(&b, rng, 0, value, ws)
	}
	s := b.String()
	if rng.IntN(30) == 0 && len(s) > 2 { // break it
		i := rng.IntN(len(s))
		s = s[:i] + []string{"\xff", "}", `"`, ",", `\`}[rng.IntN(5)] + s[i+1:]
	}
	return []byte(s)
}

func object(b *strings.Builder, rng *rand.Rand, depth int, value func(int), ws func()) {
	keys := []string{`"a"`, `"b"`, `"c"`, `"amount"`, `"id"`, `"pad"`, `"user"`, `"\u0061"`, `"é"`, `"\u00e9"`, `"a\"b"`, `"nope"`, `"<&>"`}
	b.WriteString("{")
	n := rng.IntN(7)
	used := map[string]bool{}
	for i := range n {
		k := keys[rng.IntN(len(keys))]
		if used[k] && rng.IntN(8) != 0 {
			continue // mostly no duplicates; sometimes one (rejected)
		}
		used[k] = true
		if i > 0 && len(used) > 1 {
			b.WriteString(",")
		}
		ws()
		b.WriteString(k)
		ws()
		b.WriteString(":")
		value(depth)
	}
	b.WriteString("}")
	_ = depth
}

// lazyAgrees runs step on the raw record of doc on the lazy path and on
// the decoded record on the full path, and fails unless they agree: the
// same error, the same keep decision, a map output that means the same
// (the full output encoded as a sink would, and the lazy bytes, decode
// to the same value) and carries the metadata.
func lazyAgrees(t *testing.T, c *Compiled, js format.Codec, doc []byte) (lazyOut bool) {
	t.Helper()
	kr := &kgo.Record{Topic: "in", Partition: 1, Offset: 42, Key: []byte("k"), Value: doc}
	raw := registry.KafkaRecord(kr, &registry.Codecs{Value: js})
	full, derr := raw.Decode(t.Context())
	if c.Kind == Filter {
		lk, lerr := c.Keep(raw)
		if derr != nil {
			if lerr == nil && c.ReadsValue() {
				t.Fatalf("%s on %q: lazy kept=%v, the decoder rejects it: %v", c.Expr, doc, lk, derr)
			}
			return false
		}
		if ck, cerr := c.Keep(raw.WithRawValue(doc)); ck != lk || fmt.Sprint(cerr) != fmt.Sprint(lerr) {
			t.Fatalf("%s on %q: checked %v, %v; unchecked %v, %v", c.Expr, doc, ck, cerr, lk, lerr)
		}
		fk, ferr := c.Keep(full)
		if fmt.Sprint(lerr) != fmt.Sprint(ferr) || lk != fk {
			t.Fatalf("%s on %q: lazy %v, %v; full %v, %v", c.Expr, doc, lk, lerr, fk, ferr)
		}
		return false
	}
	lo, lerr := c.Apply(raw)
	if derr != nil {
		if lerr == nil && c.ReadsValue() { // a step that does not read values never decodes them
			t.Fatalf("%s on %q: lazy succeeded, the decoder rejects it: %v", c.Expr, doc, derr)
		}
		return false
	}
	co, cerr := c.Apply(raw.WithRawValue(doc)) // the source checked doc: LookupValid
	cb, _, _ := co.Bytes()
	lb, _, _ := lo.Bytes()
	if fmt.Sprint(cerr) != fmt.Sprint(lerr) || co.Decoded() != lo.Decoded() || string(cb) != string(lb) {
		t.Fatalf("%s on %q: checked %q, %v; unchecked %q, %v", c.Expr, doc, cb, cerr, lb, lerr)
	}
	fo, ferr := c.Apply(full)
	if fmt.Sprint(lerr) != fmt.Sprint(ferr) {
		t.Fatalf("%s on %q: lazy error %v, full %v", c.Expr, doc, lerr, ferr)
	}
	if ferr != nil {
		return false
	}
	fb, ferr := json.Marshal(fo.Value())
	if ferr != nil {
		return false // the sink fails on it either way
	}
	want, err := jsonrecord.DecodeObject(fb)
	if err != nil {
		t.Fatalf("full output %s: %v", fb, err)
	}
	var got any
	if b, _, ok := lo.Bytes(); ok && !lo.Decoded() {
		if got, err = jsonrecord.DecodeObject(b); err != nil {
			t.Fatalf("%s on %q: lazy output %s: %v", c.Expr, doc, b, err)
		}
		if strings.ContainsAny(string(b), "\r\n") {
			t.Fatalf("%s on %q: lazy output %q holds a line break", c.Expr, doc, b)
		}
	} else { // took the full path
		lb, err := json.Marshal(lo.Value())
		if err != nil {
			t.Fatal(err)
		}
		if got, err = jsonrecord.DecodeObject(lb); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(got, any(want)) {
		t.Fatalf("%s on %q: lazy output %#v, full %#v (%s)", c.Expr, doc, got, want, fb)
	}
	if string(lo.Key()) != "k" || lo.Offset() != 42 || lo.Topic() != "in" {
		t.Fatalf("%s: lazy output lost the metadata: %+v", c.Expr, lo.Meta())
	}
	return !lo.Decoded()
}

func lazyCodecs(t testing.TB) map[string]format.Codec {
	out := map[string]format.Codec{}
	for name, any := range map[string]bool{"json-object": false, "json": true} {
		c, err := format.Builtin().New("json", format.Config{AnyJSON: any})
		if err != nil {
			t.Fatal(err)
		}
		out[name] = c
	}
	return out
}

// TestLazyAgreesWithFull: every expression of lazyExprs on thousands of
// random documents, on both JSON codecs.
func TestLazyAgreesWithFull(t *testing.T) {
	var steps []*Compiled
	for i, s := range lazyExprs {
		s.Name = fmt.Sprint("s", i)
		c := mustCompile(t, s)
		if c.ReadsValue() && c.lazy == nil {
			t.Fatalf("%s: no lazy plan", s.Expr)
		}
		steps = append(steps, c)
		if c.lazy != nil && c.lazy.fast {
			// And the general lazy path (expr's VM) alone.
			g := mustCompile(t, s)
			g.lazy.fast, g.lazy.filterFast = false, nil
			steps = append(steps, g)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	n := 3000
	if testing.Short() {
		n = 300
	}
	outs := make([]int, len(steps)) // lazy map outputs per step
	for _, js := range lazyCodecs(t) {
		for range n {
			doc := lazyDoc(rng)
			for i, c := range steps {
				if lazyAgrees(t, c, js, doc) {
					outs[i]++
				}
			}
		}
	}
	for i, c := range steps {
		if c.Kind == Map && c.ReadsValue() && outs[i] < n/20 { // most documents lack a field some expressions compute with
			t.Errorf("%s: %d lazy outputs of %d documents: the random documents miss the lazy path", c.Expr, outs[i], 2*n)
		}
	}
}

func FuzzLazy(f *testing.F) {
	for _, s := range []string{`{"amount":37,"id":1,"pad":"q3ZkT","user":"user-1"}`, `{"a":1.0,"b":null}`, `{"\u0061":2,"c":[1, 2]}`, `{"a":1,"a":2}`, `[1]`} {
		for i := range lazyExprs {
			f.Add([]byte(s), uint8(i))
		}
	}
	steps := make([]*Compiled, len(lazyExprs))
	for i, s := range lazyExprs {
		c, err := Compile(s)
		if err != nil {
			f.Fatal(err)
		}
		steps[i] = c
	}
	codecs := lazyCodecs(f)
	f.Fuzz(func(t *testing.T, doc []byte, which uint8) {
		c := steps[int(which)%len(steps)]
		for _, js := range codecs {
			lazyAgrees(t, c, js, doc)
		}
	})
}

// TestLazyPlans: which steps get a lazy plan, and what it looks up.
func TestLazyPlans(t *testing.T) {
	for _, c := range []struct {
		s    Step
		keys []string // nil: no plan
	}{
		{Step{Kind: Filter, Expr: `amount > 1 && id != 2`}, []string{"amount", "id"}},
		{Step{Kind: Filter, Expr: `record.amount > 1`}, nil},
		{Step{Kind: Filter, Expr: `record["a"] > 1`}, nil},
		{Step{Kind: Filter, Expr: `$env.a > 1`}, nil},
		{Step{Kind: Filter, Expr: `len(x) > 1`}, []string{"x"}},
		{Step{Kind: Map, Expr: `{"amount": amount * 2, "id": id, "pad": pad}`}, []string{"amount", "id", "pad"}},
		{Step{Kind: Map, Expr: `{"a": a}`}, []string{"a"}},
		{Step{Kind: Map, Expr: `record`}, nil},
		{Step{Kind: Map, Expr: `{"r": record}`}, nil},
		{Step{Kind: Map, Expr: `let x = {"a": a}; x`}, nil},
		{Step{Kind: Map, Expr: `{(k): 1}`}, nil},
		{Step{Kind: Select, Fields: []string{"a"}}, nil},
	} {
		p := planLazy(c.s)
		switch {
		case c.keys == nil && p != nil:
			t.Errorf("%s: lazy plan %+v, want none", c.s.Expr, p)
		case c.keys != nil && (p == nil || !reflect.DeepEqual(p.keys, c.keys)):
			t.Errorf("%s: plan %+v, want keys %v", c.s.Expr, p, c.keys)
		}
	}
	if DecodesValues([]*Compiled{mustCompile(t, Step{Kind: Filter, Expr: `a > 1`}), mustCompile(t, Step{Kind: Map, Expr: `record`})}) {
		t.Error("DecodesValues: true for a lazy filter first")
	}
	if !DecodesValues([]*Compiled{mustCompile(t, Step{Kind: Map, Expr: `record`})}) {
		t.Error("DecodesValues: false for a map of record")
	}
}
