package stream_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// The pipeline of the benchmarks: generate i, map to 3i+1, keep the even
// ones, discard. The baselines do the same in a plain loop, so the ratio
// shows the framework's cost per record.

func gen(i int64) int64     { return i }
func mapFn(v int64) int64   { return 3*v + 1 }
func filterFn(v int64) bool { return v&1 == 0 }

type discard struct{}

func (discard) CreateWriter(context.Context, sink.InitContext) (sink.Writer[int64], error) {
	return &discardWriter{}, nil
}

type discardWriter struct{ sum int64 }

func (w *discardWriter) Write(ctx context.Context, v int64, _ sink.Meta) error {
	w.sum += v
	return nil
}
func (w *discardWriter) Flush(context.Context, bool) error { return nil }
func (w *discardWriter) Close() error                      { return nil }

var sinkHole int64

// baselineLoop is the hand-written equivalent of the job.
func baselineLoop(n int64) {
	var sum int64
	g, m, f := gen, mapFn, filterFn // through function values, as a user would pass them
	for i := range n {
		if v := m(g(i)); f(v) {
			sum += v
		}
	}
	sinkHole = sum
}

// userFuncs holds the user's functions as values the compiler cannot see
// through, as a framework gets them.
type userFuncs struct {
	gen, mapFn func(int64) int64
	filterFn   func(int64) bool
	sink       interface {
		Write(context.Context, int64, sink.Meta) error
	}
}

//go:noinline
func opaque() userFuncs { return userFuncs{gen, mapFn, filterFn, &discardWriter{}} }

// baselineCalls is the hand-written loop with the same calls a framework
// cannot avoid: generator, map and filter through function values and the
// sink's Write through an interface — the floor for any engine that takes
// user functions.
func baselineCalls(n int64) {
	u := opaque()
	for i := range n {
		if v := u.mapFn(u.gen(i)); u.filterFn(v) {
			_ = u.sink.Write(context.Background(), v, sink.Meta{})
		}
	}
}

func runJob(b *testing.B, n int64, rebalance bool, interval time.Duration) {
	b.Helper()
	opts := []stream.Option{stream.Logger(stream.DiscardLogger()), stream.BatchSize(benchBatch)}
	if interval > 0 {
		opts = append(opts, stream.CheckpointEvery(interval))
	}
	env := stream.New(opts...)
	s := stream.FromSource(env, datagen.New(gen, datagen.Count(n)), watermark.None[int64](), "gen")
	m := stream.Map(s, mapFn, stream.Name("map"))
	f := stream.Filter(m, filterFn, stream.Name("filter"))
	if rebalance {
		f = stream.Rebalance(f)
	}
	stream.SinkTo(f, discard{}, "discard")
	res, err := env.Execute(context.Background(), "bench")
	if err != nil {
		b.Fatal(err)
	}
	// The final checkpoint of a bounded job is counted too.
	b.ReportMetric(float64(res.Checkpoints.Completed), "checkpoints")
}

// BenchmarkPipeline reports ns per record (one op = one record). For (c) to
// take checkpoints the run must last seconds:
//
//	go test -run XXX -bench Pipeline -benchtime 300000000x -count 6 ./stream
func BenchmarkPipeline(b *testing.B) {
	b.Run("baseline-loop", func(b *testing.B) {
		b.ReportAllocs()
		baselineLoop(int64(b.N))
	})
	b.Run("baseline-calls", func(b *testing.B) {
		b.ReportAllocs()
		baselineCalls(int64(b.N))
	})
	b.Run("a-chained", func(b *testing.B) {
		b.ReportAllocs()
		runJob(b, int64(b.N), false, 0)
	})
	b.Run("baseline-two-goroutines", func(b *testing.B) {
		b.ReportAllocs()
		baselineChannels(int64(b.N))
	})
	b.Run("b-rebalance", func(b *testing.B) {
		b.ReportAllocs()
		runJob(b, int64(b.N), true, 0)
	})
	b.Run("c-rebalance-checkpoint-1s", func(b *testing.B) {
		b.ReportAllocs()
		runJob(b, int64(b.N), true, time.Second)
	})
}

// baselineChannels is the hand-written equivalent of the rebalanced job:
// a producer goroutine hands batches of 1024 records to a consumer over a
// buffered channel.
func baselineChannels(n int64) {
	const batch = 1024
	ch := make(chan []int64, 4)
	free := make(chan []int64, 8)
	done := make(chan int64)
	go func() {
		var sum int64
		for b := range ch {
			for _, v := range b {
				sum += v
			}
			select {
			case free <- b[:0]:
			default:
			}
		}
		done <- sum
	}()
	g, m, f := gen, mapFn, filterFn
	buf := make([]int64, 0, batch)
	for i := range n {
		if v := m(g(i)); f(v) {
			buf = append(buf, v)
			if len(buf) == batch {
				ch <- buf
				select {
				case buf = <-free:
				default:
					buf = make([]int64, 0, batch)
				}
			}
		}
	}
	if len(buf) > 0 {
		ch <- buf
	}
	close(ch)
	sinkHole = <-done
}

var benchBatch = 1024
