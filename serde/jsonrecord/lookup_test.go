package jsonrecord

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
)

// lookupAgrees fails unless Lookup of keys decides as DecodeObject does
// (same error text) and finds, for every key, the bytes that DecodeValue
// turns into the decoded object's member (nil for a member it lacks).
func lookupAgrees(t *testing.T, in []byte, keys []string) {
	t.Helper()
	m, derr := DecodeObject(in)
	vals := make([][]byte, len(keys))
	lerr := Lookup(in, keys, vals)
	if fmt.Sprint(derr) != fmt.Sprint(lerr) {
		t.Fatalf("DecodeObject(%q) = %v, Lookup = %v", in, derr, lerr)
	}
	if derr != nil {
		return
	}
	for i, k := range keys {
		want, ok := m[k]
		if !ok {
			if vals[i] != nil {
				t.Fatalf("Lookup(%q) found %q for %q, which DecodeObject lacks", in, vals[i], k)
			}
			continue
		}
		if vals[i] == nil {
			t.Fatalf("Lookup(%q) did not find %q (DecodeObject: %#v)", in, k, want)
		}
		got, err := DecodeValue(vals[i])
		if err != nil {
			t.Fatalf("DecodeValue(%q) of %q in %q: %v", vals[i], k, in, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q in %q: DecodeValue(%q) = %#v, DecodeObject has %#v", k, in, vals[i], got, want)
		}
	}
}

var lookupCases = []string{
	`{"a":1}`, `{}`, `[]`, `1`, `null`, `{"a":1,"a":2}`, `{"a":{"a":1},"b":2}`, `{"b":{"a":1}}`,
	`{"\u0061":1,"b":2}`, `{"a":1,"\u0061":2}`, `{"\ud83d\ude00":null,"é":"\u00e9"}`, ` { "a" : [ 1 , {"a":2} ] , "c" : 1.0 } `,
	`{"a":12345678901234567891,"b":1e3,"c":-0,"d":0.10,"e":0.5}`, `{"a":"x\"y","b":"\\"}`, `{"a":null}`,
	`{"a":1,}`, "{\"a\":\"\xff\"}", `{"a":{"b":1,"b":2}}`, manyKeys(40, -1), manyKeys(40, 39),
	`{"amount":37,"id":1,"pad":"q3ZkT","user":"user-1"}`,
}

func TestLookupAgreesWithDecode(t *testing.T) {
	keys := []string{"a", "b", "c", "d", "e", "k0", "k39", "😀", "é", "amount", "x"}
	for _, c := range lookupCases {
		lookupAgrees(t, []byte(c), keys)
	}
}

func TestLookupNoAllocation(t *testing.T) {
	in := []byte(`{"amount":37,"id":1,"pad":"q3ZkT\u00e9","user":"user-1","n":{"amount":1}}`)
	keys := []string{"amount", "user"}
	vals := make([][]byte, 2)
	n := testing.AllocsPerRun(100, func() {
		if err := Lookup(in, keys, vals); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Errorf("%v allocations per Lookup, want 0", n)
	}
	if string(vals[0]) != "37" || string(vals[1]) != `"user-1"` {
		t.Errorf("found %q", vals)
	}
}

func TestAppendValueAsMarshal(t *testing.T) {
	for _, v := range []any{nil, true, false, int64(-7), 3, 0.5, 1e21, 1e-7, -0.0, 123456789.125, json.Number("1.0"),
		json.Number("1e400"), "a<b>&\u2028\"", []any{int64(1), "x"}, map[string]any{"b": 1, "a": nil}} {
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, err := AppendValue([]byte("x"), v)
		if err != nil || string(got) != "x"+string(want) {
			t.Errorf("AppendValue(%#v) = %s, %v; want x%s", v, got, err, want)
		}
	}
	if _, err := AppendValue(nil, json.Number("x")); err == nil {
		t.Error("AppendValue of an invalid json.Number: no error")
	}
}

func FuzzLookup(f *testing.F) {
	for _, s := range lookupCases {
		f.Add([]byte(s), "a", "b")
	}
	f.Fuzz(func(t *testing.T, in []byte, k1, k2 string) {
		lookupAgrees(t, in, []string{k1, k2, "a"})
		if m, err := DecodeObject(in); err == nil {
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			lookupAgrees(t, in, keys)
		}
	})
}
