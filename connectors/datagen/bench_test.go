package datagen

import (
	"context"
	"testing"

	"github.com/sluice-io/sluice/connectortest/fakes"
	"github.com/sluice-io/sluice/source"
)

// BenchmarkPollNext measures the reader's cost per record into a no-op
// output (one op = one record) against a hand-written loop that calls the
// same generator and the same Output interface.
func BenchmarkPollNext(b *testing.B) {
	gen := func(i int64) int64 { return i * 3 }
	// loop-inlined lets the compiler inline gen; loop calls it through a
	// func value, as any reader taking a user function must.
	b.Run("loop-inlined", func(b *testing.B) {
		var out source.Output[int64] = &fakes.Discard[int64]{}
		so := out.ForSplit("split-0")
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			so.Collect(gen(int64(i)))
		}
	})
	b.Run("loop", func(b *testing.B) {
		var out source.Output[int64] = &fakes.Discard[int64]{}
		so := out.ForSplit("split-0")
		genFn := benchGen
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			so.Collect(genFn(int64(i)))
		}
	})
	for _, bc := range []struct {
		name string
		opts []Option
	}{
		{"datagen", nil},
		{"datagen-timestamps", []Option{Timestamps(func(i int64) int64 { return i })}},
		{"datagen-4-splits", []Option{Splits(4)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			src := New(gen, bc.opts...)
			r, err := src.CreateReader(&fakes.ReaderContext{})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			r.Start(context.Background())
			r.AddSplits(src.InitialSplits())
			out := &fakes.Discard[int64]{}
			b.ReportAllocs()
			b.ResetTimer()
			for out.N < int64(b.N) {
				if _, err := r.PollNext(out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchGen is a func value the compiler cannot inline at the call site.
var benchGen = func(i int64) int64 { return i * 3 }
