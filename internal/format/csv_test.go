package format

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func newCodec(t *testing.T, name string, c Config) Codec {
	t.Helper()
	cd, err := Builtin().New(name, c)
	if err != nil {
		t.Fatal(err)
	}
	return cd
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
}

func TestCSVColumns(t *testing.T) {
	ctx := context.Background()
	c := newCodec(t, "csv", Config{CSVColumns: []string{"id", "name", "note"}})
	v, err := c.Decode(ctx, "t", []byte("1,\"Smith, J\",\"say \"\"hi\"\"\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"id": "1", "name": "Smith, J", "note": `say "hi"`}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("got %#v want %#v", v, want)
	}
	out, err := c.Encode(ctx, "t", nil, v)
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `1,"Smith, J","say ""hi"""` {
		t.Fatalf("encoded %q", out)
	}
	out, err = c.Encode(ctx, "t", []byte("x"), map[string]any{"id": int64(7), "name": 2.5, "note": nil})
	if err != nil || string(out) != "x7,2.5," {
		t.Fatalf("encoded %q, %v", out, err)
	}
	out, err = c.Encode(ctx, "t", nil, map[string]any{"id": json.Number("1.0"), "name": true, "note": time.Date(2026, 12, 1, 6, 30, 0, 0, time.UTC)})
	if err != nil || string(out) != "1.0,true,2026-12-01T06:30:00Z" {
		t.Fatalf("encoded %q, %v", out, err)
	}

	_, err = c.Decode(ctx, "t", []byte("1,2\n"))
	wantErr(t, err, "2 fields, want 3")
	v8 := c.(Validator)
	wantErr(t, v8.Validate([]byte("1,2\n")), "2 fields, want 3")
	wantErr(t, v8.Validate([]byte("1,2,3\n4,5,6")), "more than one row")
	if err := v8.Validate([]byte(`1,"a,b",3`)); err != nil {
		t.Fatal(err)
	}
	_, err = c.Decode(ctx, "t", []byte("1,2,3\n4,5,6\n"))
	wantErr(t, err, "more than one row")
	_, err = c.Decode(ctx, "t", []byte(`1,"2,3`))
	wantErr(t, err, "csv format", "quote")
	_, err = c.Encode(ctx, "t", nil, map[string]any{"id": map[string]any{"a": int64(1)}})
	wantErr(t, err, `column "id"`, "an object cannot be a CSV field")
	_, err = c.Encode(ctx, "t", nil, map[string]any{"name": []any{}})
	wantErr(t, err, `column "name"`, "list")
	_, err = c.Encode(ctx, "t", nil, []any{"a"})
	wantErr(t, err, "cannot write a list", "want an object")
}

func TestCSVList(t *testing.T) {
	ctx := context.Background()
	c := newCodec(t, "csv", Config{CSVComma: ';'})
	v, err := c.Decode(ctx, "t", []byte("a;b,c;"))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(v, []any{"a", "b,c", ""}) {
		t.Fatalf("got %#v", v)
	}
	out, err := c.Encode(ctx, "t", nil, []any{"a;b", int64(1), "b,c"})
	if err != nil || string(out) != `"a;b";1;b,c` {
		t.Fatalf("encoded %q, %v", out, err)
	}
	for _, row := range [][]any{{""}, {"", ""}, {" lead"}, {"multi\nline"}} {
		b, err := c.Encode(ctx, "t", nil, row)
		if err != nil {
			t.Fatal(err)
		}
		got, err := c.Decode(ctx, "t", b)
		if err != nil || !reflect.DeepEqual(got, row) {
			t.Fatalf("%q: %q → %#v, %v", row, b, got, err)
		}
	}
	_, err = c.Encode(ctx, "t", nil, map[string]any{})
	wantErr(t, err, "cannot write an object", "want a list")
	_, err = c.Encode(ctx, "t", nil, []any{"a", []any{}})
	wantErr(t, err, "item 1", "a list cannot be a CSV field")
	if got, want := c.Identity(), newCodec(t, "csv", Config{CSVComma: ';'}).Identity(); got != want || got == newCodec(t, "csv", Config{}).Identity() {
		t.Fatalf("identities %q %q", got, want)
	}
	if _, err := Builtin().New("csv", Config{CSVComma: '"'}); err == nil {
		t.Fatal("quote as separator accepted")
	}
}
