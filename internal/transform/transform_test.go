package transform

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func mustCompile(t *testing.T, s Step) *Compiled {
	t.Helper()
	c, err := Compile(s)
	if err != nil {
		t.Fatalf("Compile(%+v): %v", s, err)
	}
	return c
}

func TestSteps(t *testing.T) {
	r := rec(Object{"id": int64(7), "amount": 250.0, "user": "u1", "tags": []any{"a", "b"}})
	f := mustCompile(t, Step{Kind: Filter, Expr: `amount > 100 && user == "u1" && "b" in tags`})
	if ok, err := f.Keep(r); !ok || err != nil {
		t.Errorf("filter: got %v, %v; want true", ok, err)
	}
	if ok, _ := mustCompile(t, Step{Kind: Filter, Expr: `missing == nil && amount < 100`}).Keep(r); ok {
		t.Error("filter amount < 100: got true")
	}
	m := mustCompile(t, Step{Kind: Map, Expr: `{"id": id, "double": amount * 2, "field": record["user"]}`})
	gotr, err := m.Apply(r)
	got := obj(gotr)
	if want := (Object{"id": int64(7), "double": 500.0, "field": "u1"}); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("map: got %v, %v; want %v", got, err, want)
	}
	gotr, _ = mustCompile(t, Step{Kind: Select, Fields: []string{"id", "nope"}}).Apply(r)
	got = obj(gotr)
	if want := (Object{"id": int64(7)}); !reflect.DeepEqual(got, want) {
		t.Errorf("select: got %v, want %v", got, want)
	}
	gotr, _ = mustCompile(t, Step{Kind: Rename, Renames: [][2]string{{"id", "order"}, {"nope", "x"}}}).Apply(rec(Object{"id": 1, "a": 2}))
	got = obj(gotr)
	if want := (Object{"order": 1, "a": 2}); !reflect.DeepEqual(got, want) {
		t.Errorf("rename: got %v, want %v", got, want)
	}
}

func TestCompileErrors(t *testing.T) {
	for _, s := range []Step{
		{Kind: Filter, Expr: ""},
		{Kind: Filter, Expr: "a +"},
		{Kind: Filter, Expr: `"a string"`}, // not a bool
		{Kind: Select},
		{Kind: Rename, Renames: [][2]string{{"a", "x"}, {"b", "x"}}},
		{Kind: "explode"},
	} {
		if _, err := Compile(s); err == nil {
			t.Errorf("Compile(%+v): got no error", s)
		}
	}
}

func TestRunErrors(t *testing.T) {
	m := mustCompile(t, Step{Kind: Map, Name: "m", Where: "p.yaml:3", Expr: `id + 1`})
	_, err := m.Apply(rec(Object{"id": 1}))
	var te *Error
	if !errors.As(err, &te) || te.Step.Where != "p.yaml:3" {
		t.Errorf("map to a number: got %v, want an *Error naming p.yaml:3", err)
	}
	f := mustCompile(t, Step{Kind: Filter, Expr: `amount > 1`})
	if _, err := f.Keep(rec(Object{"amount": "text"})); err == nil {
		t.Error("comparing a string with a number: got no error")
	}
}

// TestInJob runs steps in a job at parallelism 2 and checks the output.
func TestInJob(t *testing.T) {
	store := testsink.NewStore[Record]()
	env := stream.New(stream.Parallelism(2), stream.Logger(engine.DiscardLogger()), stream.CheckpointEvery(50*time.Millisecond))
	src := stream.FromSource(env, datagen.New(func(i int64) Record { return rec(Object{"id": i}) }, datagen.Count(1000), datagen.Splits(4)),
		watermark.None[Record](), "gen")
	out := AddTo(src, []*Compiled{
		mustCompile(t, Step{Kind: Filter, Name: "even", Expr: "id % 2 == 0"}),
		mustCompile(t, Step{Kind: Map, Name: "half", Expr: `{"half": id / 2, "id": id}`}),
		mustCompile(t, Step{Kind: Rename, Name: "rn", Renames: [][2]string{{"half", "h"}}}),
	})
	stream.SinkTo(out, testsink.NewTwoPhase(store), "sink")
	if _, err := env.Execute(t.Context(), "transform-test"); err != nil {
		t.Fatal(err)
	}
	got := store.Committed()
	if len(got) != 500 {
		t.Fatalf("got %d records, want 500", len(got))
	}
	seen := map[int64]bool{}
	for _, rr := range got {
		r := obj(rr)
		id := r["id"].(int64)
		if id%2 != 0 || seen[id] || r["h"] != float64(id)/2 {
			t.Fatalf("bad or repeated record %v", r)
		}
		seen[id] = true
	}
}

// TestRename: renames are simultaneous (swaps and chains keep every
// value), and replacing an existing field that is not renamed away needs
// Overwrite.
func TestRename(t *testing.T) {
	rn := func(overwrite bool, pairs ...string) *Compiled {
		s := Step{Kind: Rename, Name: "rn", Where: "p.yaml:9", Overwrite: overwrite}
		for i := 0; i < len(pairs); i += 2 {
			s.Renames = append(s.Renames, [2]string{pairs[i], pairs[i+1]})
		}
		return mustCompile(t, s)
	}
	for _, c := range []struct {
		name string
		step *Compiled
		in   Object
		want Object
	}{
		{"swap", rn(false, "id", "user", "user", "id"), Object{"id": 1, "user": "u", "x": 3}, Object{"user": 1, "id": "u", "x": 3}},
		{"chain", rn(false, "a", "b", "b", "c"), Object{"a": 1, "b": 2}, Object{"b": 1, "c": 2}},
		{"chain in the other order", rn(false, "b", "c", "a", "b"), Object{"a": 1, "b": 2}, Object{"b": 1, "c": 2}},
		{"rotation", rn(false, "a", "b", "b", "c", "c", "a"), Object{"a": 1, "b": 2, "c": 3}, Object{"b": 1, "c": 2, "a": 3}},
		{"chain with the middle field missing", rn(false, "a", "b", "b", "c"), Object{"a": 1}, Object{"b": 1}},
		{"source missing, target kept", rn(false, "a", "b"), Object{"b": 2}, Object{"b": 2}},
		{"to itself", rn(false, "a", "a"), Object{"a": 1}, Object{"a": 1}},
		{"overwrite allowed", rn(true, "id", "user"), Object{"id": 1, "user": "u"}, Object{"user": 1}},
		{"nil value is a value", rn(false, "a", "b"), Object{"a": nil}, Object{"b": nil}},
	} {
		gotr, err := c.step.Apply(rec(c.in))
		got := obj(gotr)
		if err != nil || !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v → %v, %v; want %v", c.name, c.in, got, err, c.want)
		}
	}
	for _, c := range []struct {
		name string
		step *Compiled
		in   Object
	}{
		{"overwrite", rn(false, "id", "user"), Object{"id": 1, "user": "u"}},
		{"overwrite by a chain's end", rn(false, "a", "b", "b", "c"), Object{"a": 1, "b": 2, "c": 3}},
		{"overwrite of a nil field", rn(false, "a", "b"), Object{"a": 1, "b": nil}},
	} {
		_, err := c.step.Apply(rec(c.in))
		var te *Error
		if !errors.Is(err, ErrRenameOverwrite) || !errors.As(err, &te) || te.Step.Where != "p.yaml:9" {
			t.Errorf("%s: %v: got %v, want an *Error wrapping ErrRenameOverwrite", c.name, c.in, err)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, `"rn"`) || !strings.Contains(msg, "overwrite: true") {
			t.Errorf("%s: message %q does not name the step and the option", c.name, msg)
		}
	}
	if _, err := Compile(Step{Kind: Rename, Renames: [][2]string{{"a", "x"}, {"a", "y"}}}); err == nil {
		t.Error("one field renamed twice: got no error")
	}
	big := Object{"id": 1, "user": "u"}
	for i := range 100 {
		big[fmt.Sprintf("field-%03d", i)] = "é"
	}
	_, err := rn(false, "id", "user").Apply(rec(big))
	if err == nil || !strings.Contains(err.Error(), "…") || len(err.Error()) > 600 {
		t.Errorf("a large record is not cut in the message: %v", err)
	}
}
