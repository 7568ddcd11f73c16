package transform

import (
	"testing"

	"github.com/sluice-io/sluice/internal/format"
	"github.com/sluice-io/sluice/internal/registry"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestMetaSteps: a filter that reads only meta does not read the value
// (the source need not decode it) and keeps the record's bytes; a map
// reading meta and fields reads the record it gets undecoded (from its
// bytes, lazy.go), and its output keeps the metadata; Reads does not list meta as a field.
func TestMetaSteps(t *testing.T) {
	js, err := format.Builtin().New("json", format.Config{})
	if err != nil {
		t.Fatal(err)
	}
	kr := &kgo.Record{Topic: "in", Partition: 1, Offset: 3, Key: []byte("k1"),
		Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("keep")}}, Value: []byte(`{"id": 7}`)}
	r := registry.KafkaRecord(kr, &registry.Codecs{Value: js})

	f := mustCompile(t, Step{Kind: Filter, Name: "f", Expr: `meta.headers["h"] == "keep" && meta.key == "k1"`})
	if f.ReadsValue() || !f.ReadsMeta() || ReadsValue([]*Compiled{f}) || !ReadsMeta([]*Compiled{f}) {
		t.Fatalf("filter on meta: ReadsValue %v ReadsMeta %v", f.ReadsValue(), f.ReadsMeta())
	}
	if got := f.Reads(); len(got) != 0 {
		t.Errorf("Reads() = %v, want none (meta is not a field)", got)
	}
	if keep, err := f.Keep(r); !keep || err != nil {
		t.Fatalf("Keep: %v, %v", keep, err)
	}
	if _, _, ok := r.Bytes(); !ok || r.Decoded() {
		t.Error("a filter on meta decoded the record")
	}

	m := mustCompile(t, Step{Kind: Map, Name: "m", Expr: `{"id": id, "key": meta.key, "at": meta.topic + "/" + string(meta.offset)}`})
	if !m.ReadsValue() || !ReadsValue([]*Compiled{f, m}) {
		t.Error("a map reading id does not read the value")
	}
	out, err := m.Apply(r)
	if err != nil {
		t.Fatal(err)
	}
	o := obj(out)
	if o["id"] != int64(7) || o["key"] != "k1" || o["at"] != "in/3" {
		t.Errorf("map output %v", o)
	}
	if b, _, ok := out.Bytes(); ok && string(b) == string(kr.Value) || string(out.Key()) != "k1" || out.Topic() != "in" {
		t.Errorf("map output keeps its old bytes or lost the metadata: %+v", out.Meta())
	}
	if _, err := Compile(Step{Kind: Filter, Expr: `meta.kee == "x"`}); err == nil {
		t.Error("meta.kee compiled")
	}
}
