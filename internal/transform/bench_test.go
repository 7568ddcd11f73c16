package transform

import (
	"context"
	"testing"

	"github.com/expr-lang/expr"
	"github.com/sluice-io/sluice/internal/format"
	"github.com/sluice-io/sluice/internal/registry"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkFilter measures a typical filter on a datagen record; its
// numeric comparisons go through the exact-number patch (numbers.go).
func BenchmarkFilter(b *testing.B) {
	f, err := Compile(Step{Kind: Filter, Expr: `amount >= 500 && user != "user-3" && id % 2 == 0`})
	if err != nil {
		b.Fatal(err)
	}
	r := rec(Object{"id": int64(42), "amount": int64(731), "user": "user-6"})
	for b.Loop() {
		if _, err := f.Keep(r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFilterComparison measures the cost of exact number comparison:
// one filter `amount > 100` over a decoded record, compiled as expr
// compiles it (plain) and with the number patcher (exact).
func BenchmarkFilterComparison(b *testing.B) {
	env := map[string]any{"amount": int64(150), "id": int64(7)}
	for _, c := range []struct {
		name string
		opts []expr.Option
	}{{"plain", nil}, {"exact", registry.ExprNumberOptions()}} {
		b.Run(c.name, func(b *testing.B) {
			p, err := expr.Compile("amount > 100", append([]expr.Option{expr.AsBool()}, c.opts...)...)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if v, err := expr.Run(p, env); err != nil || v != true {
					b.Fatal(v, err)
				}
			}
		})
	}
}

// BenchmarkFilterPosition measures what naming the source position in a
// fail error costs a filter per record: the plain filter (no position),
// and the source attaching a file's position (registry.WithPosition, one
// allocation) or a Kafka record's (a reference to it, no allocation),
// which the step takes off (keepAt). Compare the ns/op of the
// sub-benchmarks.
func BenchmarkFilterPosition(b *testing.B) {
	f, err := Compile(Step{Kind: Filter, Expr: `amount >= 500`})
	if err != nil {
		b.Fatal(err)
	}
	keep := f.keepAt
	newRecord := func() Record { return rec(Object{"id": int64(42), "amount": int64(731), "user": "user-6"}) }
	kafkaRec := &kgo.Record{Topic: "in", Partition: 1, Offset: 1234}
	for _, c := range []struct {
		name   string
		attach func(Record) Record
	}{
		{"none", nil},
		{"file", func(r Record) Record {
			return registry.WithPosition(r, registry.Position{Split: "in/a.jsonl@0", File: "in/a.jsonl", Offset: 1234})
		}},
		{"kafka", func(r Record) Record { return registry.WithKafkaPosition(r, kafkaRec) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := newRecord()
				if c.attach != nil {
					if _, err := keep(c.attach(r)); err != nil {
						b.Fatal(err)
					}
				} else if _, err := f.Keep(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchValue is a value of the Kafka benchmark's input (bench/kafka): a
// canonical 100-byte JSON object.
var benchValue = []byte(`{"amount":37,"id":1234567,"pad":"q3ZkTa9Lm2Xc7Vb1Nn4Rt6Yu8Ii0Oo5Pp3Aa","user":"user-1234"}`)

// BenchmarkJSONRecord is the CPU cost per record of the JSON work of the
// Kafka benchmark's pipelines, on one undecoded Kafka record: a filter
// that reads one field (`amount >= 0`) and a map that doubles it and
// copies the other fields, each the lazy way (the default: the fields
// read from the bytes, the map's result written as bytes, lazy.go) and
// the full way (the value decoded into a map[string]any first, the map's
// result encoded as the sink encodes it); and the parts: the source's
// check of the bytes, a full decode, and the encoding.
func BenchmarkJSONRecord(b *testing.B) {
	js, err := format.Builtin().New("json", format.Config{})
	if err != nil {
		b.Fatal(err)
	}
	kr := &kgo.Record{Topic: "in", Partition: 1, Offset: 7, Value: benchValue}
	raw := registry.KafkaRecord(kr, &registry.Codecs{Value: js})
	filter, err := Compile(Step{Kind: Filter, Name: "f", Expr: `amount >= 0`})
	if err != nil {
		b.Fatal(err)
	}
	double, err := Compile(Step{Kind: Map, Name: "m", Expr: `{"amount": amount * 2, "id": id, "pad": pad, "user": user}`})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	encode := func(r Record) {
		if _, _, ok := r.Bytes(); ok && !r.Decoded() {
			return // the sink writes the bytes
		}
		if _, err := js.Encode(ctx, "out", nil, r.Value()); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		fn   func()
	}{
		{"validate", func() {
			if err := js.(format.Validator).Validate(benchValue); err != nil {
				b.Fatal(err)
			}
		}},
		{"decode", func() {
			if _, err := raw.Decode(ctx); err != nil {
				b.Fatal(err)
			}
		}},
		{"filter/lazy", func() {
			if keep, err := filter.Keep(raw); err != nil || !keep {
				b.Fatal(keep, err)
			}
		}},
		{"filter/full", func() {
			r, err := raw.Decode(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if keep, err := filter.Keep(r); err != nil || !keep {
				b.Fatal(keep, err)
			}
		}},
		{"double/lazy", func() {
			out, err := double.Apply(raw)
			if err != nil {
				b.Fatal(err)
			}
			encode(out)
		}},
		{"double/full", func() {
			r, err := raw.Decode(ctx)
			if err != nil {
				b.Fatal(err)
			}
			out, err := double.Apply(r)
			if err != nil {
				b.Fatal(err)
			}
			encode(out)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.fn()
			}
		})
	}
}
