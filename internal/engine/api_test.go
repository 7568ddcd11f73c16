package engine_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// eventSource exercises source events both ways and CallAsync: the
// enumerator greets every reader; each reader answers; once all answered,
// the enumerator discovers splits with a periodic CallAsync (one split per
// run, off the coordinator goroutine) and pushes them.
type eventSource struct {
	splits      int
	answers     atomic.Int32
	discoveries atomic.Int32
	greetings   atomic.Int32
	blockedFnOK atomic.Bool
}

type greet struct{ To int }
type answer struct{ From int }

func (s *eventSource) Boundedness() source.Boundedness { return source.Bounded }
func (s *eventSource) CreateEnumerator(ctx source.EnumeratorContext[rangeSplit]) (source.Enumerator[rangeSplit, enumState], error) {
	return &eventEnum{s: s, ctx: ctx}, nil
}
func (s *eventSource) RestoreEnumerator(ctx source.EnumeratorContext[rangeSplit], _ enumState) (source.Enumerator[rangeSplit, enumState], error) {
	return &eventEnum{s: s, ctx: ctx}, nil
}
func (s *eventSource) CreateReader(ctx source.ReaderContext) (source.Reader[rec, rangeSplit], error) {
	return &eventReader{scriptReader: scriptReader{s: &scriptSource{}, ctx: ctx, avail: make(chan struct{})}, es: s}, nil
}
func (s *eventSource) SplitSerializer() serde.Versioned[rangeSplit] { return serde.JSON[rangeSplit](1) }
func (s *eventSource) EnumeratorStateSerializer() serde.Versioned[enumState] {
	return serde.JSON[enumState](1)
}

type eventEnum struct {
	s        *eventSource
	ctx      source.EnumeratorContext[rangeSplit]
	answered map[int]bool
	next     int
	closed   chan struct{}
}

func (e *eventEnum) Start(context.Context) error {
	e.answered = map[int]bool{}
	e.closed = make(chan struct{})
	// A blocking call: it must run off the coordinator goroutine (or the
	// job would hang) and its context must end when the enumerator closes.
	e.ctx.CallAsync(func(ctx context.Context) (any, error) {
		<-ctx.Done()
		e.s.blockedFnOK.Store(true)
		return nil, ctx.Err()
	}, func(any, error) {}, 0, 0)
	return nil
}

func (e *eventEnum) AddReader(subtask int) error {
	e.s.greetings.Add(1)
	e.ctx.SendEventToReader(subtask, greet{To: subtask})
	return nil
}

func (e *eventEnum) HandleSourceEvent(subtask int, ev source.Event) error {
	a, ok := ev.(answer)
	if !ok || a.From != subtask {
		return fmt.Errorf("unexpected event %#v from %d", ev, subtask)
	}
	e.s.answers.Add(1)
	e.answered[subtask] = true
	if len(e.answered) == e.ctx.Parallelism() {
		e.ctx.CallAsync(func(context.Context) (any, error) {
			e.s.discoveries.Add(1)
			return nil, nil
		}, func(_ any, err error) {
			if err != nil || e.next >= e.s.splits {
				return
			}
			sp := rangeSplit{ID: fmt.Sprint("d", e.next), End: 50}
			if err := e.ctx.AssignSplits(map[int][]rangeSplit{e.next % e.ctx.Parallelism(): {sp}}); err != nil {
				panic(err)
			}
			e.next++
			if e.next == e.s.splits {
				for i := range e.ctx.Parallelism() {
					e.ctx.SignalNoMoreSplits(i)
				}
			}
		}, time.Millisecond, time.Millisecond)
	}
	return nil
}

func (e *eventEnum) HandleSplitRequest(int, string) error   { return nil }
func (e *eventEnum) AddSplitsBack([]rangeSplit, int) error  { return nil }
func (e *eventEnum) SnapshotState(int64) (enumState, error) { return enumState{}, nil }
func (e *eventEnum) Close() error                           { return nil }

type eventReader struct {
	scriptReader
	es *eventSource
}

func (r *eventReader) HandleSourceEvent(ev source.Event) error {
	g, ok := ev.(greet)
	if !ok || g.To != r.ctx.SubtaskIndex() {
		return fmt.Errorf("unexpected event %#v", ev)
	}
	r.ctx.SendEventToEnumerator(answer{From: r.ctx.SubtaskIndex()})
	return nil
}

// TestSourceEventsAndCallAsync: events flow both ways, periodic async
// discovery pushes splits, and a blocking async call neither blocks the
// coordinator nor outlives the job.
func TestSourceEventsAndCallAsync(t *testing.T) {
	src := &eventSource{splits: 5}
	store := testsink.NewStore[rec]()
	env := stream.New(stream.Parallelism(3), stream.Logger(engine.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, src, watermark.None[rec](), "events"), testsink.NewTwoPhase(store), "sink")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := env.Execute(ctx, "events"); err != nil {
		t.Fatal(err)
	}
	if g, a := src.greetings.Load(), src.answers.Load(); g != 3 || a != 3 {
		t.Errorf("got %d greetings and %d answers, want 3 and 3", g, a)
	}
	if d := src.discoveries.Load(); d < 5 {
		t.Errorf("periodic discovery ran %d times, want at least 5", d)
	}
	if !src.blockedFnOK.Load() {
		t.Error("the blocking async call was not released when the enumerator closed")
	}
	var want []rangeSplit
	for i := range 5 {
		want = append(want, rangeSplit{ID: fmt.Sprint("d", i), End: 50})
	}
	expectExactlyOnce(t, want, store.Committed())
}

// countingSink is an at-least-once sink with stateful writers: each writer
// keeps a running count and sum of what it wrote in its state. After a
// restart the restored states must continue where the checkpoint was.
type countingSink struct {
	mu       sync.Mutex
	restored [][]writerTally
	final    map[int]writerTally
}

type writerTally struct{ Count, Sum int64 }

func (s *countingSink) CreateWriter(ctx context.Context, ic sink.InitContext) (sink.StatefulWriter[int64, writerTally], error) {
	return &countingWriter{s: s, sub: ic.SubtaskIndex()}, nil
}
func (s *countingSink) RestoreWriter(ctx context.Context, ic sink.InitContext, states []writerTally) (sink.StatefulWriter[int64, writerTally], error) {
	s.mu.Lock()
	s.restored = append(s.restored, states)
	s.mu.Unlock()
	w := &countingWriter{s: s, sub: ic.SubtaskIndex()}
	for _, st := range states {
		w.t.Count += st.Count
		w.t.Sum += st.Sum
	}
	return w, nil
}
func (s *countingSink) WriterStateSerializer() serde.Versioned[writerTally] {
	return serde.JSON[writerTally](1)
}

type countingWriter struct {
	s   *countingSink
	sub int
	t   writerTally
}

func (w *countingWriter) Write(ctx context.Context, v int64, _ sink.Meta) error {
	w.t.Count++
	w.t.Sum += v
	return nil
}
func (w *countingWriter) Flush(ctx context.Context, end bool) error {
	if end {
		w.s.mu.Lock()
		w.s.final[w.sub] = w.t
		w.s.mu.Unlock()
	}
	return nil
}
func (w *countingWriter) SnapshotState(context.Context, int64) ([]writerTally, error) {
	return []writerTally{w.t}, nil
}
func (w *countingWriter) Close() error { return nil }

// TestStatefulWriterRestores: writer state survives a failure — the
// restored tallies plus what was written after the restore add up to
// exactly the input (the source rewinds to the same checkpoint).
func TestStatefulWriterRestores(t *testing.T) {
	const n = 20_000
	cs := &countingSink{final: map[int]writerTally{}}
	plan := faultinject.NewPlan(faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: 0, Records: 3000})
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(10*time.Millisecond),
		stream.Restart(restart.FixedDelay(1, 0)), stream.Logger(engine.DiscardLogger()))
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(n), datagen.Splits(2), datagen.RatePerSecond(40_000))
	stream.SinkTo(stream.FromSource(env, faultinject.WrapSource(gen, plan), watermark.None[int64](), "gen"), sink.NewStateful[int64, writerTally](cs), "tally")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := env.Execute(ctx, "tally")
	if err != nil {
		t.Fatal(err)
	}
	if res.Restarts != 1 || len(cs.restored) == 0 {
		t.Fatalf("got %d restarts and %d restores, want 1 and some", res.Restarts, len(cs.restored))
	}
	var total writerTally
	for _, tl := range cs.final {
		total.Count += tl.Count
		total.Sum += tl.Sum
	}
	if want := (writerTally{n, n * (n - 1) / 2}); total != want {
		t.Errorf("final tallies %+v, want %+v", total, want)
	}
}

// TestExchangesAndParallelism: flat map, per-operator parallelism,
// forward/rebalance/hash exchanges in one job; KeyBy sends each key to one
// subtask.
func TestExchangesAndParallelism(t *testing.T) {
	const n = 5000
	reg := metrics.NewRegistry()
	store := testsink.NewStore[string]()
	env := stream.New(stream.Parallelism(2), stream.Logger(engine.DiscardLogger()), stream.Metrics(reg))
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(n), datagen.Splits(4))
	s := stream.FromSource(env, gen, watermark.None[int64](), "gen", stream.WithParallelism(3))
	pairs := stream.FlatMap(s, func(v int64, emit func(int64)) { emit(v); emit(-v - 1) }, stream.Name("twice"), stream.WithParallelism(3))
	keyed := stream.KeyBy(pairs, func(v int64) int64 { return ((v % 7) + 7) % 7 })
	tagged := stream.Map(keyed, func(v int64) int64 { return v }, stream.Name("keyed"), stream.WithParallelism(4))
	out := stream.Map(tagged, func(v int64) string { return fmt.Sprint(v) }, stream.Name("fmt"), stream.WithParallelism(2))
	stream.SinkTo(out, testsink.NewTwoPhase(store), "sink")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := env.Execute(ctx, "exchanges"); err != nil {
		t.Fatal(err)
	}
	got := store.Committed()
	if len(got) != 2*n {
		t.Fatalf("got %d records, want %d", len(got), 2*n)
	}
	seen := map[string]bool{}
	for _, v := range got {
		if seen[v] {
			t.Fatalf("record %s twice", v)
		}
		seen[v] = true
	}
	// The keyed operator (parallelism 4) got all records, spread by key.
	var perSub []int64
	for i := range 4 {
		perSub = append(perSub, reg.Sum(metrics.NumRecordsIn, "operator", "keyed", "subtask", fmt.Sprint(i)))
	}
	var sum int64
	for _, c := range perSub {
		sum += c
	}
	if sum != 2*n || slices.Max(perSub) == 2*n {
		t.Errorf("records into the keyed operator per subtask %v: want all %d spread over subtasks", perSub, 2*n)
	}
}

// TestKeyByRoutesKeysToOneSubtask checks the hash exchange's contract.
func TestKeyByRoutesKeysToOneSubtask(t *testing.T) {
	var mu sync.Mutex
	owner := map[int64]int{}
	bad := 0
	env := stream.New(stream.Parallelism(3), stream.Logger(engine.DiscardLogger()))
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(3000), datagen.Splits(3))
	keyed := stream.KeyBy(stream.FromSource(env, gen, watermark.None[int64](), "gen"), func(v int64) int64 { return v % 10 })
	stream.SinkTo(keyed, &keyCheck{mu: &mu, owner: owner, bad: &bad}, "check")
	if _, err := env.Execute(t.Context(), "keyby"); err != nil {
		t.Fatal(err)
	}
	if bad > 0 || len(owner) != 10 {
		t.Errorf("%d records reached a second subtask for their key; %d keys seen, want 10", bad, len(owner))
	}
}

type keyCheck struct {
	mu    *sync.Mutex
	owner map[int64]int
	bad   *int
}

func (k *keyCheck) CreateWriter(ctx context.Context, ic sink.InitContext) (sink.Writer[int64], error) {
	return &keyWriter{k: k, sub: ic.SubtaskIndex()}, nil
}

type keyWriter struct {
	k   *keyCheck
	sub int
}

func (w *keyWriter) Write(ctx context.Context, v int64, _ sink.Meta) error {
	w.k.mu.Lock()
	defer w.k.mu.Unlock()
	if o, ok := w.k.owner[v%10]; ok && o != w.sub {
		*w.k.bad++
	}
	w.k.owner[v%10] = w.sub
	return nil
}
func (w *keyWriter) Flush(context.Context, bool) error { return nil }
func (w *keyWriter) Close() error                      { return nil }

// TestStandardMetrics: the runtime reports Flink's standard metric names.
func TestStandardMetrics(t *testing.T) {
	reg := metrics.NewRegistry()
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(5*time.Millisecond), stream.Metrics(reg), stream.Logger(engine.DiscardLogger()))
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(4000), datagen.Splits(2), datagen.RatePerSecond(100_000),
		datagen.Timestamps(func(i int64) int64 { return time.Now().UnixMilli() - 1000 }))
	s := stream.FromSource(env, gen, watermark.Monotonous[int64](), "gen")
	stream.SinkTo(stream.Rebalance(stream.Filter(s, func(int64) bool { return true }, stream.Name("all"))), testsink.NewTwoPhase(testsink.NewStore[int64]()), "sink")
	res, err := env.Execute(t.Context(), "metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		name, op string
		want     int64
	}{
		{metrics.NumRecordsIn, "gen", 4000},
		{metrics.NumRecordsOut, "all", 4000},
		{metrics.NumRecordsIn, "sink", 4000},
		{metrics.NumRecordsSend, "sink", 4000},
	} {
		if got := res.Counter(w.name, "operator", w.op); got != w.want {
			t.Errorf("%s of %s = %d, want %d", w.name, w.op, got, w.want)
		}
	}
	if c := res.Counter(metrics.NumberOfCompletedCheckpoints); c < 1 || int(c) != res.Checkpoints.Completed {
		t.Errorf("numberOfCompletedCheckpoints = %d, stats say %d", c, res.Checkpoints.Completed)
	}
	names := map[string]bool{}
	for _, s := range reg.Snapshot() {
		names[s.Name] = true
	}
	for _, n := range []string{metrics.LastCheckpointDuration, metrics.LastCheckpointSize, metrics.CurrentOutputWatermark,
		metrics.CurrentEmitEventTimeLag, metrics.NumRestarts} {
		if !names[n] {
			t.Errorf("metric %s not reported", n)
		}
	}
	for _, s := range reg.Snapshot() {
		if s.Name == metrics.CurrentEmitEventTimeLag && s.Value < 1000 {
			t.Errorf("currentEmitEventTimeLag = %d ms, want at least 1000 (timestamps are a second old)", s.Value)
		}
	}
}
