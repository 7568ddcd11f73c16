package faultinject

import (
	"context"
	"testing"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectortest/fakes"
	"github.com/sluice-io/sluice/source"
)

// BenchmarkWrappedReader measures the per-record cost of the record-counting
// wrapper around a datagen reader (one op = one record), against the bare
// reader in the same run.
func BenchmarkWrappedReader(b *testing.B) {
	gen := datagen.New(func(i int64) int64 { return i })
	plan := NewPlan(Fault{Kind: AfterRecords, Subtask: 0, Records: 1 << 62})
	for _, bc := range []struct {
		name string
		src  source.Source[int64, datagen.Split, datagen.EnumState]
	}{
		{"bare", gen},
		{"wrapped", WrapSource(gen, plan)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r, err := bc.src.CreateReader(&fakes.ReaderContext{})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			r.Start(context.Background())
			r.AddSplits(gen.InitialSplits())
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
