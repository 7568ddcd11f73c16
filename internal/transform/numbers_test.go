package transform

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/serde/jsonrecord"
)

// TestExactNumbers: expressions on records decoded by serde/jsonrecord
// compare and compute exactly; arithmetic on a number no Go number type
// holds fails clearly; copying a field keeps its literal.
func TestExactNumbers(t *testing.T) {
	r, err := jsonrecord.DecodeObject([]byte(`{"i":3,"f":2.5,"uno":1.0,"k":1e3,"big":12345678901234567891,` +
		`"big2":12345678901234567892,"neg":-9007199254740993,"arr":[1.50,2],"s":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r["big"].(json.Number); !ok {
		t.Fatalf("big decoded as %T, want json.Number", r["big"])
	}
	for _, c := range []struct {
		expr string
		want any
	}{
		{`i * 2`, 6},
		{`i % 2`, 1},
		{`i > 2.5`, true},
		{`f * 2`, 5.0},
		{`uno == 1`, true},
		{`uno + 1`, 2.0},
		{`k == 1000`, true},
		{`k / 10`, 100.0},
		{`-uno`, -1.0},
		{`abs(neg) > 9007199254740992`, true},
		{`neg == -9007199254740993`, true},
		{`neg + 1`, int64(-9007199254740992)},
		{`uno in [1, 2]`, true},
		{`sum(arr)`, 3.5},
		{`arr[0] + 1`, 2.5},
		{`big == big`, true},
		{`big != big2`, true},
		{`big < big2`, true},
		{`big > 1.2345678901234567e19`, true}, // the float64 nearest big is below it
		{`big > 9223372036854775807`, true},
		{`big >= i`, true},
		{`big == 12345678901234567000.0`, false}, // what float64 rounding would have said is equal
		{`big != nil`, true},
		{`record["big"] > 0`, true},
		{`string(big)`, "12345678901234567891"},
		{`float(big)`, 12345678901234567891.0},
		{`s < "y"`, true},
		{`missing == nil`, true},
	} {
		c := c
		got, err := mustCompile(t, Step{Kind: Map, Name: "m", Expr: c.expr}).run(r)
		if err != nil || got != c.want && !(isNum(got) && isNum(c.want) && asFloat(got) == asFloat(c.want)) {
			t.Errorf("%s: got %#v (%T), %v; want %#v", c.expr, got, got, err, c.want)
		}
	}
	for _, e := range []string{`big + 1`, `-big`, `big * 1.0`, `abs(big)`, `int(big)`, `big in [1]`, `max(big, 1)`} {
		_, err := mustCompile(t, Step{Kind: Map, Name: "m", Expr: e}).run(r)
		if !errors.Is(err, ErrInexactNumber) || !strings.Contains(err.Error(), "12345678901234567891") {
			t.Errorf("%s: got %v, want an error wrapping ErrInexactNumber naming the number", e, err)
		}
	}
	m := mustCompile(t, Step{Kind: Map, Name: "m", Expr: `{"big": big, "uno": uno, "k": k, "neg": neg, "i2": i * 2}`})
	outr, err := m.Apply(rec(r))
	out := obj(outr)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(out)
	if want := `{"big":12345678901234567891,"i2":6,"k":1e3,"neg":-9007199254740993,"uno":1.0}`; err != nil || string(b) != want {
		t.Errorf("map output encoded as %s (%v), want %s", b, err, want)
	}
	f := mustCompile(t, Step{Kind: Filter, Name: "f", Expr: `big > 12345678901234567000.0 && uno == 1`})
	if ok, err := f.Keep(rec(r)); !ok || err != nil {
		t.Errorf("filter on exact numbers: got %v, %v", ok, err)
	}
	if reflect.DeepEqual(r["big"], r["big2"]) {
		t.Fatal("test data: big and big2 must differ")
	}
}

func isNum(x any) bool {
	switch x.(type) {
	case int, int64, float64:
		return true
	}
	return false
}

func asFloat(x any) float64 {
	switch v := x.(type) {
	case int:
		return float64(v)
	case int64:
		return float64(v)
	case float64:
		return v
	}
	return 0
}

// TestNonNumberLiterals: comparisons with string, bool and nil literals
// are left to expr and mean what they meant.
func TestNonNumberLiterals(t *testing.T) {
	r := rec(Object{"n": json.Number("1.0"), "s": "1.0", "b": true})
	for e, want := range map[string]bool{
		`n == "1.0"`: false, // a number is not a string
		`s == "1.0"`: true,
		`n != nil`:   true,
		`b == true`:  true,
		`n == 1`:     true,
	} {
		got, err := mustCompile(t, Step{Kind: Filter, Expr: e}).Keep(r)
		if err != nil || got != want {
			t.Errorf("%s: got %v, %v; want %v", e, got, err, want)
		}
	}
}
