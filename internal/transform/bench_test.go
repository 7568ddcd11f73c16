package transform

import (
	"testing"

	"github.com/expr-lang/expr"
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
