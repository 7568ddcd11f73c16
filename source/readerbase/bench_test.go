package readerbase_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/source/readerbase"
)

type benchState struct {
	id   string
	next int
}

type benchSplit struct {
	ID string
	N  int // records to read
}

func (s benchSplit) SplitID() string { return s.ID }

// benchReader serves N records per split from one shared slice, round
// robin, batch records at a time, without allocating per record.
type benchReader struct {
	recs   []int
	splits []*benchSplit
	rr     int
}

func (r *benchReader) AddSplits(ss []benchSplit) error {
	for _, s := range ss {
		r.splits = append(r.splits, &s)
	}
	return nil
}

func (r *benchReader) Fetch(ctx context.Context) (readerbase.Batch[int], error) {
	if len(r.splits) == 0 {
		<-ctx.Done()
		return readerbase.Batch[int]{}, ctx.Err()
	}
	r.rr = (r.rr + 1) % len(r.splits)
	s := r.splits[r.rr]
	k := min(len(r.recs), s.N)
	s.N -= k
	b := readerbase.Batch[int]{Records: []readerbase.SplitRecords[int]{{SplitID: s.ID, Records: r.recs[:k]}}}
	if s.N == 0 {
		b.Finished = []string{s.ID}
		r.splits = append(r.splits[:r.rr], r.splits[r.rr+1:]...)
	}
	return b, nil
}

func (r *benchReader) Close() error { return nil }

type nopOutput struct{}

func (nopOutput) Collect(int)                          {}
func (nopOutput) CollectAt(int, int64)                 {}
func (nopOutput) EmitWatermark(int64)                  {}
func (nopOutput) MarkIdle()                            {}
func (o nopOutput) ForSplit(string) source.Output[int] { return o }
func (nopOutput) ReleaseSplit(string)                  {}

var benchEmitter = readerbase.EmitterFunc[int, int, *benchState](
	func(e int, out source.Output[int], s *benchState) error {
		out.Collect(e)
		s.next++
		return nil
	})

// benchBatchEmitter emits the same records as benchEmitter, a split's
// group per call, moving the state once.
var benchBatchEmitter = readerbase.BatchEmitterFunc[int, int, *benchState](
	func(es []int, out source.Output[int], s *benchState) error {
		for _, e := range es {
			out.Collect(e)
		}
		s.next += len(es)
		return nil
	})

// BenchmarkReaderBase measures the cost per record (one op is one record)
// of moving records from a SplitReader through the queue and PollNext to a
// no-op output, against a plain loop that calls the same emitter over the
// same slices.
func BenchmarkReaderBase(b *testing.B) {
	for _, batch := range []int{64, 1024} {
		recs := make([]int, batch)

		b.Run(fmt.Sprintf("baseline/batch=%d", batch), func(b *testing.B) {
			b.ReportAllocs()
			var em readerbase.RecordEmitter[int, int, *benchState] = benchEmitter
			var out source.Output[int] = nopOutput{}
			st := &benchState{id: "s"}
			for n := 0; n < b.N; {
				k := min(batch, b.N-n)
				so := out.ForSplit(st.id)
				for _, e := range recs[:k] {
					if err := em.Emit(e, so, st); err != nil {
						b.Fatal(err)
					}
				}
				n += k
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/record")
		})

		for _, m := range []struct {
			name   string
			splits int
			opt    readerbase.Option
			em     readerbase.RecordEmitter[int, int, *benchState]
		}{
			{"single", 1, readerbase.SingleFetcher(), benchEmitter},
			{"single4", 4, readerbase.SingleFetcher(), benchEmitter},
			{"perSplit4", 4, readerbase.FetcherPerSplit(), benchEmitter},
			{"batchEmitter/single", 1, readerbase.SingleFetcher(), benchBatchEmitter},
			{"batchEmitter/single4", 4, readerbase.SingleFetcher(), benchBatchEmitter},
		} {
			b.Run(fmt.Sprintf("%s/batch=%d", m.name, batch), func(b *testing.B) {
				b.ReportAllocs()
				benchReaderBase(b, recs, m.splits, m.opt, m.em)
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/record")
			})
		}
	}
}

func benchReaderBase(b *testing.B, recs []int, nsplits int, opt readerbase.Option, em readerbase.RecordEmitter[int, int, *benchState]) {
	r, err := readerbase.New(benchContext{}, readerbase.Config[int, int, benchSplit, *benchState]{
		NewSplitReader: func() (readerbase.SplitReader[int, benchSplit], error) {
			return &benchReader{recs: recs}, nil
		},
		Emitter:   em,
		InitState: func(s benchSplit) *benchState { return &benchState{id: s.ID} },
		ToSplit:   func(s *benchState) benchSplit { return benchSplit{ID: s.id} },
	}, opt)
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	if err := r.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	splits := make([]benchSplit, nsplits)
	for i := range splits {
		splits[i] = benchSplit{ID: fmt.Sprint(i), N: b.N / nsplits}
	}
	splits[0].N += b.N % nsplits
	b.ResetTimer()
	if err := r.AddSplits(splits); err != nil {
		b.Fatal(err)
	}
	r.NotifyNoMoreSplits()
	out := nopOutput{}
	for {
		st, err := r.PollNext(out)
		if err != nil {
			b.Fatal(err)
		}
		if st == source.EndOfInput {
			break
		}
		if st == source.NothingAvailable {
			<-r.Available()
		}
	}
	b.StopTimer()
}

type benchContext struct{}

func (benchContext) SubtaskIndex() int                  { return 0 }
func (benchContext) Parallelism() int                   { return 1 }
func (benchContext) Attempt() int                       { return 0 }
func (benchContext) SendSplitRequest()                  {}
func (benchContext) JobID() string                      { return "bench" }
func (benchContext) SendEventToEnumerator(source.Event) {}
func (benchContext) Metrics() metrics.Group             { return metrics.Discard() }
