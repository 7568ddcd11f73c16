package stream_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

type memSink struct {
	mu  sync.Mutex
	got []int64
}

func (m *memSink) CreateWriter(context.Context, sink.InitContext) (sink.Writer[int64], error) {
	return &memWriter{m: m}, nil
}

type memWriter struct {
	m   *memSink
	buf []int64
}

func (w *memWriter) Write(ctx context.Context, v int64, _ sink.Meta) error {
	w.buf = append(w.buf, v)
	return nil
}
func (w *memWriter) Flush(context.Context, bool) error {
	w.m.mu.Lock()
	w.m.got = append(w.m.got, w.buf...)
	w.m.mu.Unlock()
	w.buf = w.buf[:0]
	return nil
}
func (w *memWriter) Close() error { return nil }

func TestSmoke(t *testing.T) {
	for _, p := range []int{1, 4} {
		env := stream.New(stream.Parallelism(p), stream.Logger(stream.DiscardLogger()))
		src := datagen.New(func(i int64) int64 { return i }, datagen.Count(10000), datagen.Splits(3))
		s := stream.FromSource(env, src, watermark.None[int64](), "gen")
		m := stream.Map(s, func(v int64) int64 { return v * 2 }, stream.Name("double"))
		out := &memSink{}
		stream.SinkTo(stream.Rebalance(m), out, "sink")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := env.Execute(ctx, "smoke")
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if len(out.got) != 10000 {
			t.Fatalf("p=%d: got %d records, want 10000", p, len(out.got))
		}
		t.Logf("p=%d: %+v", p, res.Checkpoints)
	}
}
