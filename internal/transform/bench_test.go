package transform

import (
	"testing"

	"github.com/expr-lang/expr"
)

// BenchmarkFilter measures a typical filter on a datagen record; its
// numeric comparisons go through the exact-number patch (numbers.go).
func BenchmarkFilter(b *testing.B) {
	f, err := Compile(Step{Kind: Filter, Expr: `amount >= 500 && user != "user-3" && id % 2 == 0`})
	if err != nil {
		b.Fatal(err)
	}
	r := Record{"id": int64(42), "amount": int64(731), "user": "user-6"}
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
	}{{"plain", nil}, {"exact", numberOptions()}} {
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
