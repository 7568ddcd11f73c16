package engine_test

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// wmSink records, per subtask, the watermarks it got and the records that
// arrived at or behind the current watermark (late records).
type wmSink struct {
	mu    sync.Mutex
	wms   map[int][]int64
	late  map[int][]rec
	count int
}

func newWMSink() *wmSink { return &wmSink{wms: map[int][]int64{}, late: map[int][]rec{}} }

func (s *wmSink) CreateWriter(ctx context.Context, ic sink.InitContext) (sink.Writer[rec], error) {
	return &wmWriter{s: s, sub: ic.SubtaskIndex()}, nil
}

type wmWriter struct {
	s   *wmSink
	sub int
}

func (w *wmWriter) Write(ctx context.Context, v rec, c sink.Meta) error {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	w.s.count++
	if !c.HasTimestamp {
		w.s.late[w.sub] = append(w.s.late[w.sub], v)
	} else if c.Timestamp <= c.Watermark {
		w.s.late[w.sub] = append(w.s.late[w.sub], v)
	}
	return nil
}

func (w *wmWriter) WriteWatermark(ctx context.Context, wm int64) error {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	w.s.wms[w.sub] = append(w.s.wms[w.sub], wm)
	return nil
}

// maxWatermark is the highest watermark any sink subtask saw.
func (s *wmSink) maxWatermark() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := int64(math.MinInt64)
	for _, wms := range s.wms {
		for _, wm := range wms {
			m = max(m, wm)
		}
	}
	return m
}

func (w *wmWriter) Flush(context.Context, bool) error { return nil }
func (w *wmWriter) Close() error                      { return nil }

func tsOf(r rec, _ int64) int64 { return r.Pos * 10 }

// TestWatermarksMinOverSplitsAndInputs: two readers, two splits each, read
// in turn; a rebalance to two sink subtasks. A monotonous strategy per
// split and the minimum over splits and over inputs mean no record is ever
// behind the watermark; watermarks never go back; the last one is Max.
func TestWatermarksMinOverSplitsAndInputs(t *testing.T) {
	var splits []rangeSplit
	for _, id := range []string{"a", "b", "c", "d"} {
		splits = append(splits, rangeSplit{ID: id, End: 3000})
	}
	// Every split pauses halfway until checkpoint 1 completes, so that
	// watermarks are emitted while records are still to come.
	src := &scriptSource{splits: splits, perPoll: 7, roundRobin: true,
		onRestore: func(*scriptEnum) {},
		hold:      func(completed int64, sp rangeSplit) bool { return completed < 1 && sp.Next >= 1500 }}
	// push: two splits per reader at start
	src.beforeTrigger = nil
	out := newWMSink()
	env := stream.New(stream.Parallelism(2), stream.WatermarkInterval(time.Millisecond), stream.BufferTimeout(time.Millisecond),
		stream.CheckpointEvery(20*time.Millisecond), stream.Logger(engine.DiscardLogger()))
	ws := watermark.Monotonous[rec]().WithTimestampAssigner(tsOf)
	s := stream.FromSource(env, &pushAll{src}, ws, "src")
	stream.SinkTo(stream.Rebalance(s), out, "sink")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := env.Execute(ctx, "watermarks"); err != nil {
		t.Fatal(err)
	}
	if out.count != 12000 {
		t.Fatalf("got %d records, want 12000", out.count)
	}
	for sub, late := range out.late {
		if len(late) > 0 {
			t.Errorf("subtask %d: %d records at or behind the watermark, first %v", sub, len(late), late[0])
		}
	}
	for sub := range 2 {
		wms := out.wms[sub]
		if len(wms) < 2 || wms[0] == math.MaxInt64 {
			t.Fatalf("subtask %d: watermarks %v, want some before the final one", sub, wms)
		}
		for i := 1; i < len(wms); i++ {
			if wms[i] < wms[i-1] {
				t.Fatalf("subtask %d: watermark went back from %d to %d", sub, wms[i-1], wms[i])
			}
		}
		if last := wms[len(wms)-1]; last != math.MaxInt64 {
			t.Errorf("subtask %d: last watermark %d, want Max", sub, last)
		}
	}
}

// TestIdleSplitDoesNotHoldBackWatermark: split "slow" has no data until
// checkpoint 2 completes, while split "fast" reads 1000 records and then
// waits for the same checkpoint. With idleness the slow split is left out,
// so the watermark advances with the fast one — and the slow split's
// records then arrive behind the watermark. Without idleness they do not.
func TestIdleSplitDoesNotHoldBackWatermark(t *testing.T) {
	for _, idle := range []bool{true, false} {
		// The slow split comes first, so that the reader's first poll
		// registers it (a held split is registered when a poll passes it)
		// before the fast one's records can move the watermark: with fast
		// first, a watermark tick between the first two polls (a loaded
		// machine) let the watermark advance before slow existed.
		splits := []rangeSplit{{ID: "slow", End: 100}, {ID: "fast", End: 200_000}}
		out := newWMSink()
		// The slow split (timestamps 0..990) is held until the sink has
		// seen a watermark past all of its records — which happens only
		// when idleness excludes it — or, bounded, for 50 checkpoints. The
		// fast split is never held and long, so it stays active while the
		// slow one goes idle (a held fast split would go idle too, and with
		// every split idle the watermark does not advance).
		released := func(completed int64) bool { return out.maxWatermark() > 990 || completed >= 50 }
		src := &scriptSource{splits: splits, perPoll: 5, roundRobin: true,
			hold: func(completed int64, sp rangeSplit) bool {
				return sp.ID == "slow" && !released(completed)
			}}
		env := stream.New(stream.WatermarkInterval(time.Millisecond), stream.CheckpointEvery(20*time.Millisecond),
			stream.Logger(engine.DiscardLogger()))
		ws := watermark.Monotonous[rec]().WithTimestampAssigner(tsOf)
		if idle {
			ws = ws.WithIdleness(5 * time.Millisecond)
		}
		stream.SinkTo(stream.FromSource(env, &pushAll{src}, ws, "src"), out, "sink")
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		_, err := env.Execute(ctx, "idle")
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		late := len(out.late[0])
		if idle && late == 0 {
			t.Error("with idleness: no slow record behind the watermark; the idle split held the watermark back")
		}
		if !idle && late > 0 {
			t.Errorf("without idleness: %d records behind the watermark, first %v", late, out.late[0][0])
		}
	}
}

// pushAll wraps a scriptSource so that its enumerator assigns all splits
// round-robin at start and signals no more splits.
type pushAll struct{ *scriptSource }

func (p *pushAll) CreateEnumerator(ctx sourceEnumCtx) (sourceEnum, error) {
	e, _ := p.scriptSource.CreateEnumerator(ctx)
	se := e.(*scriptEnum)
	p.scriptSource.onRestore = nil
	return &pushEnum{se}, nil
}

type pushEnum struct{ *scriptEnum }

func (e *pushEnum) Start(ctx context.Context) error {
	i := 0
	for len(e.pending) > 0 {
		e.assign(e.pending[0].ID, i%e.ctx.Parallelism())
		i++
	}
	e.finish()
	return nil
}
