package transform

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/registry"
)

// TestKeyEqualKeysHashAlike: values that compare equal are one key
// (42, 42.0, a JSON 42, int32 42), whatever path evaluated them; other
// values hash apart.
func TestKeyEqualKeysHashAlike(t *testing.T) {
	c := mustCompile(t, Step{Kind: KeyBy, Name: "k", Expr: "k"})
	same := []any{int64(42), 42.0, json.Number("42"), int32(42), 42, uint64(42), float32(42)}
	want, err := c.Key(rec(Object{"k": same[0]}))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range same[1:] {
		if got, err := c.Key(rec(Object{"k": v})); err != nil || got != want {
			t.Errorf("key %T(%v): hash %d, %v; want %d (as int64 42)", v, v, got, err, want)
		}
	}
	if got, _ := c.Key(rec(Object{"k": "42"})); got == want {
		t.Errorf(`key "42" hashes like 42: strings and numbers are different keys`)
	}
	if got, _ := c.Key(rec(Object{"k": 42.5})); got == want {
		t.Errorf("key 42.5 hashes like 42")
	}
	ts := time.Unix(0, 12345)
	if got, _ := c.Key(rec(Object{"k": ts})); got != hashKey(int64(12345)) {
		t.Errorf("a time's key: got %d, want the hash of its Unix nanoseconds", got)
	}
}

// TestKeyLazyMatchesFull: a key evaluated on a JSON record's bytes (the
// lazy path) hashes as the same key evaluated on the decoded record.
func TestKeyLazyMatchesFull(t *testing.T) {
	js := &registry.Codecs{Value: lazyCodecs(t)["json-object"]}
	for _, expr := range []string{"user", "id % 4", "user + '-' + string(id)", "amount > 100"} {
		c := mustCompile(t, Step{Kind: KeyBy, Name: "k", Expr: expr})
		if c.lazy == nil {
			t.Fatalf("%s: no lazy plan", expr)
		}
		for _, b := range []string{`{"id":7,"user":"u1","amount":150}`, `{"id":8,"user":"u2","amount":1e2,"x":[1]}`} {
			raw := registry.RawRecord([]byte(b), js)
			lazy, err := c.Key(raw)
			if err != nil {
				t.Fatalf("%s on %s: %v", expr, b, err)
			}
			d, err := raw.Decode(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			full, err := c.Key(d)
			if err != nil || full != lazy {
				t.Errorf("%s on %s: lazy hash %d, full %d (%v)", expr, b, lazy, full, err)
			}
		}
	}
}

// TestKeyNotAKey: nil (a missing field), an object or a list is no key:
// the error wraps ErrBadKey and is a transform *Error (handled by the
// step's on-error policy).
func TestKeyNotAKey(t *testing.T) {
	c := mustCompile(t, Step{Kind: KeyBy, Name: "k", Expr: "k"})
	for _, v := range []any{nil, Object{"a": 1}, []any{1}} {
		r := rec(Object{"k": v})
		if v == nil {
			r = rec(Object{"other": 1})
		}
		_, err := c.Key(r)
		var te *Error
		if !errors.Is(err, ErrBadKey) || !errors.As(err, &te) {
			t.Errorf("key %v: got %v, want an *Error wrapping ErrBadKey", v, err)
		}
	}
}

// TestPartitionStepsReadNothing: a rebalance reads no value and never
// fails; a key_by reads its expression's fields and keeps the record's.
func TestPartitionStepsReadNothing(t *testing.T) {
	rb := mustCompile(t, Step{Kind: Rebalance, Name: "r"})
	if rb.ReadsValue() || NeedsPositions([]*Compiled{rb}) {
		t.Errorf("rebalance: reads value %v, needs positions %v; want neither", rb.ReadsValue(), NeedsPositions([]*Compiled{rb}))
	}
	kb := mustCompile(t, Step{Kind: KeyBy, Name: "k", Expr: "record.customer"})
	if got := kb.Reads(); len(got) != 1 || got[0] != "customer" {
		t.Errorf("key_by reads %v, want [customer]", got)
	}
	if out, known := kb.Writes([]string{"a", "b"}); !known || len(out) != 2 {
		t.Errorf("key_by writes %v (%v), want its input's fields", out, known)
	}
	if _, err := Compile(Step{Kind: KeyBy, Name: "k"}); err == nil {
		t.Error("key_by without an expression compiled")
	}
}
