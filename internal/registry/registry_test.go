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

// TestOptionsIsSet: Has is true for a value set or defaulted; IsSet only
// for one the user gave, a setting equal to the default included, and for
// a key set under a family. A default is never taken for a setting.
func TestOptionsIsSet(t *testing.T) {
	schema := []Option{
		{Name: "delay", Type: Duration, Default: time.Second},
		{Name: "zone", Type: String, Default: "UTC"},
		{Name: "count", Type: Int, Default: int64(3)},
		{Name: "path", Type: String},
		{Name: "props.*", Type: String},
	}
	o := NewOptions(map[string]any{"zone": "UTC", "count": int64(5)}).
		WithDefaults(schema).WithPrefixed(map[string]string{"props.a": "1"}).MarkFromEnvironment("count")
	for _, c := range []struct {
		name     string
		has, set bool
	}{
		{"delay", true, false}, // the default
		{"zone", true, true},   // set to its default
		{"count", true, true},  // set to another value
		{"path", false, false}, // no default, not set
		{"props.a", false, true},
		{"props.b", false, false},
	} {
		if got := o.Has(c.name); got != c.has {
			t.Errorf("Has(%q) = %v, want %v", c.name, got, c.has)
		}
		if got := o.IsSet(c.name); got != c.set {
			t.Errorf("IsSet(%q) = %v, want %v", c.name, got, c.set)
		}
	}
	if o.Duration("delay") != time.Second || o.String("zone") != "UTC" || o.Int("count") != 5 {
		t.Errorf("values: delay %v zone %q count %d, want 1s UTC 5", o.Duration("delay"), o.String("zone"), o.Int("count"))
	}
	if !o.FromEnvironment("count") {
		t.Error("MarkFromEnvironment lost after WithDefaults")
	}
	// WithDefaults keeps what is set: a second call changes nothing.
	if again := o.WithDefaults(schema); !again.IsSet("zone") || again.IsSet("delay") || again.Int("count") != 5 {
		t.Errorf("WithDefaults twice: zone set %v, delay set %v, count %d", again.IsSet("zone"), again.IsSet("delay"), again.Int("count"))
	}
	if (Options{}).IsSet("delay") || (Options{}).Has("delay") {
		t.Error("the zero Options has a value")
	}
}
