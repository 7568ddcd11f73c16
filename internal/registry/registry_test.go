package registry

import (
	"testing"
	"time"

	"github.com/sluice-io/sluice/stream"
)

func TestRegisterChecksSchema(t *testing.T) {
	build := func(BuildContext) (stream.DataStream[Record], error) { return stream.DataStream[Record]{}, nil }
	r := New()
	bad := []Source{
		{Name: "", Build: build},
		{Name: "x"},
		{Name: "x", Build: build, Options: []Option{{Name: "a", Type: Int}, {Name: "a", Type: Int}}},
		{Name: "x", Build: build, Options: []Option{{Name: "a", Type: "complex"}}},
		{Name: "x", Build: build, Options: []Option{{Name: "a", Type: Int, Default: 3}}}, // int, not int64
		{Name: "x", Build: build, Options: []Option{{Name: "a", Type: Enum}}},
		{Name: "x", Build: build, Options: []Option{{Name: "a", Type: Enum, Values: []string{"p"}, Default: "q"}}},
	}
	for _, s := range bad {
		if err := r.RegisterSource(s); err == nil {
			t.Errorf("RegisterSource(%+v): got no error", s)
		}
	}
	ok := Source{Name: "x", Build: build, Options: []Option{{Name: "a", Type: Duration, Default: time.Second}}}
	if err := r.RegisterSource(ok); err != nil {
		t.Fatal(err)
	}
	if err := r.RegisterSource(ok); err == nil {
		t.Error("registering twice: got no error")
	}
	if got := r.Names(KindSource); len(got) != 1 || got[0] != "x" {
		t.Errorf("Names: got %v", got)
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		typ  Type
		in   string
		want any
	}{
		{Int, "1_000", int64(1000)},
		{Int, "0x10", int64(16)},
		{Float, "2.5", 2.5},
		{Bool, "yes", true},
		{Bool, "False", false},
		{Duration, "1m30s", 90 * time.Second},
		{String, "s", "s"},
		{Enum, "b", "b"},
	}
	for _, tt := range tests {
		got, err := Option{Type: tt.typ, Values: []string{"a", "b"}}.Parse(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("Parse %s %q = %v, %v; want %v", tt.typ, tt.in, got, err, tt.want)
		}
	}
	for _, tt := range []struct {
		typ Type
		in  string
	}{{Int, "1.5"}, {Float, "NaN"}, {Bool, "maybe"}, {Duration, "5"}, {Enum, "c"}} {
		if _, err := (Option{Type: tt.typ, Values: []string{"a"}}).Parse(tt.in); err == nil {
			t.Errorf("Parse %s %q: got no error", tt.typ, tt.in)
		}
	}
}

func TestBuiltinsRegistered(t *testing.T) {
	for _, k := range []struct {
		kind Kind
		name string
	}{{KindSource, "datagen"}, {KindSource, "file"}, {KindSink, "print"}, {KindSink, "file"}, {KindSource, "kafka"}, {KindSink, "kafka"}} {
		if _, ok := Default().Lookup(k.kind, k.name); !ok {
			t.Errorf("%s %s is not registered", k.kind, k.name)
		}
	}
	if c, _ := Default().Lookup(KindSink, "file"); !c.ExactlyOnce {
		t.Error("the file sink is not marked exactly-once")
	}
}
