package transform

import "testing"

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
