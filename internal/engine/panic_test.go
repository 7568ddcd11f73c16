package engine_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/internal/sinkerase"
	"github.com/sluice-io/sluice/internal/sinkrt"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/source/readerbase"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// once fires the first time fire is called with a true condition, across
// every attempt of a job (so a restarted job runs clean).
type once struct{ fired atomic.Bool }

func (o *once) fire(cond bool) bool { return cond && !o.fired.Swap(true) }

const panicValue = "injected panic"

// panicSink wraps an erased sink; its committer (where == "commit") or
// global committer (where == "global") panics once.
type panicSink[T any] struct {
	sinkerase.Sink[T]
	where string
	o     *once
}

func (s *panicSink[T]) CreateWriter(ctx context.Context, ic sink.InitContext) (sink.Writer[T], error) {
	w, _, err := s.NewWriter(ctx, ic, nil)
	return w, err
}

func (s *panicSink[T]) NewCommitter(ctx context.Context, ic sink.InitContext) (sinkrt.Committer, error) {
	c, err := s.Sink.NewCommitter(ctx, ic)
	if err != nil || c == nil {
		return c, err
	}
	return &panicCommitter{Committer: c, s: s}, nil
}

func (s *panicSink[T]) NewGlobalCommitter(ctx context.Context, ic sink.InitContext) (sinkrt.GlobalCommitter, error) {
	g, err := s.Sink.NewGlobalCommitter(ctx, ic)
	if err != nil || g == nil {
		return g, err
	}
	return &panicGlobal{GlobalCommitter: g, s: s}, nil
}

type panicCommitter struct {
	sinkrt.Committer
	s interface{ fire(string) bool }
}

func (s *panicSink[T]) fire(where string) bool { return s.o.fire(s.where == where) }

func (c *panicCommitter) Commit(ctx context.Context, reqs []*sinkrt.Request) error {
	if c.s.fire("commit") {
		panic(panicValue)
	}
	return c.Committer.Commit(ctx, reqs)
}

type panicGlobal struct {
	sinkrt.GlobalCommitter
	s interface{ fire(string) bool }
}

func (g *panicGlobal) CommitGlobal(ctx context.Context, id int64, committed [][]byte) error {
	if g.s.fire("global") {
		panic(panicValue)
	}
	return g.GlobalCommitter.CommitGlobal(ctx, id, committed)
}

// hookedSource is a datagen whose enumerator starts an async call (one-shot
// or periodic) whose function or handler may panic, and whose snapshot may
// panic.
type hookedSource struct {
	*datagen.Source[int64]
	where string // "async", "periodic", "handler", "snapshot"
	o     *once
}

func (s *hookedSource) CreateEnumerator(ctx source.EnumeratorContext[datagen.Split]) (source.Enumerator[datagen.Split, datagen.EnumState], error) {
	e, err := s.Source.CreateEnumerator(ctx)
	return &hookedEnum{Enumerator: e, s: s, ctx: ctx, holdAll: !s.o.fired.Load()}, err
}

func (s *hookedSource) RestoreEnumerator(ctx source.EnumeratorContext[datagen.Split], st datagen.EnumState) (source.Enumerator[datagen.Split, datagen.EnumState], error) {
	e, err := s.Source.RestoreEnumerator(ctx, st)
	return &hookedEnum{Enumerator: e, s: s, ctx: ctx, holdAll: !s.o.fired.Load()}, err
}

// hookedEnum hands out no split in an attempt that started before the
// fault fired, so that attempt cannot finish before the fault (which does
// not depend on records) fails it.
type hookedEnum struct {
	source.Enumerator[datagen.Split, datagen.EnumState]
	s       *hookedSource
	ctx     source.EnumeratorContext[datagen.Split]
	holdAll bool
}

func (e *hookedEnum) HandleSplitRequest(subtask int, host string) error {
	if e.holdAll {
		return nil // the reader waits; this attempt ends by the fault
	}
	return e.Enumerator.HandleSplitRequest(subtask, host)
}

func (e *hookedEnum) Start(ctx context.Context) error {
	s := e.s
	var calls int
	switch s.where {
	case "async", "handler":
		e.ctx.CallAsync(func(context.Context) (any, error) {
			if s.o.fire(s.where == "async") {
				panic(panicValue)
			}
			return nil, nil
		}, func(any, error) {
			if s.o.fire(s.where == "handler") {
				panic(panicValue)
			}
		}, 0, 0)
	case "periodic":
		e.ctx.CallAsync(func(context.Context) (any, error) {
			calls++ // only this goroutine touches calls
			if s.o.fire(calls == 3) {
				panic(panicValue)
			}
			return nil, nil
		}, func(any, error) {}, 0, time.Millisecond)
	}
	return e.Enumerator.Start(ctx)
}

func (e *hookedEnum) SnapshotState(id int64) (datagen.EnumState, error) {
	if e.s.o.fire(e.s.where == "snapshot") {
		panic(panicValue)
	}
	return e.Enumerator.SnapshotState(id)
}

// fetchSource is the script source read through readerbase: its
// SplitReader panics once on a given record, on a fetcher goroutine.
type fetchSource struct {
	*scriptSource
	panicAt  func(r rec) bool
	perSplit bool
}

func (s *fetchSource) CreateReader(ctx source.ReaderContext) (source.Reader[rec, rangeSplit], error) {
	opts := []readerbase.Option{readerbase.PullSplits()}
	if s.perSplit {
		opts = append(opts, readerbase.FetcherPerSplit())
	}
	return readerbase.New(ctx, readerbase.Config[rec, rec, rangeSplit, *rangeSplit]{
		NewSplitReader: func() (readerbase.SplitReader[rec, rangeSplit], error) {
			return &rangeSplitReader{panicAt: s.panicAt}, nil
		},
		Emitter: readerbase.EmitterFunc[rec, rec, *rangeSplit](func(e rec, out source.Output[rec], st *rangeSplit) error {
			out.Collect(e)
			st.Next = e.Pos + 1
			return nil
		}),
		InitState: func(sp rangeSplit) *rangeSplit { return &sp },
		ToSplit:   func(st *rangeSplit) rangeSplit { return *st },
	}, opts...)
}

// rangeSplitReader reads its splits one after the other, 10 records per
// Fetch.
type rangeSplitReader struct {
	splits  []rangeSplit
	panicAt func(r rec) bool
}

func (r *rangeSplitReader) AddSplits(ss []rangeSplit) error {
	r.splits = append(r.splits, ss...)
	return nil
}

func (r *rangeSplitReader) Fetch(ctx context.Context) (readerbase.Batch[rec], error) {
	if len(r.splits) == 0 {
		<-ctx.Done()
		return readerbase.Batch[rec]{}, ctx.Err()
	}
	sp := &r.splits[0]
	var recs []rec
	for ; sp.Next < sp.End && len(recs) < 10; sp.Next++ {
		x := rec{Split: sp.ID, Pos: sp.Next}
		if r.panicAt(x) {
			panic(panicValue)
		}
		recs = append(recs, x)
	}
	b := readerbase.Batch[rec]{Records: []readerbase.SplitRecords[rec]{{SplitID: sp.ID, Records: recs}}}
	if sp.Next == sp.End {
		b.Finished = []string{sp.ID}
		r.splits = r.splits[1:]
	}
	return b, nil
}

func (r *rangeSplitReader) Close() error { return nil }

// syncBuffer is a log destination safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestPanicsInConnectorCode: a panic in any goroutine that runs connector
// or user code — the task goroutine (map, writer), the committer, the
// global committer, a readerbase fetcher, an enumerator method, an
// enumerator's async function (one-shot and periodic) or its handler —
// does not crash the process. With restart.None the job fails with an
// error wrapping engine.ErrPanic that names the operator (and subtask,
// for subtasks) and the panic value but holds no stack (the stack is
// logged); with a restart strategy the job restarts and its output equals
// its input.
func TestPanicsInConnectorCode(t *testing.T) {
	const n = 2000
	gen := func(i int64) int64 { return i }
	splits := []rangeSplit{{ID: "s0", End: 300}, {ID: "s1", End: 300}, {ID: "s2", End: 300}}
	type job struct {
		build func(env *stream.Environment, o *once, store *testsink.Store[int64], rstore *testsink.Store[rec])
		recs  bool   // the output is rstore's (rangeSplit records), not store's
		want  string // the failed operator, as the error names it
		sub   bool   // the error names a subtask
	}
	dg := func(o *once, where string) source.Source[int64, datagen.Split, datagen.EnumState] {
		src := datagen.New(gen, datagen.Count(n), datagen.Splits(4), datagen.RatePerSecond(20_000))
		if where == "" {
			return src
		}
		return &hookedSource{Source: src, where: where, o: o}
	}
	viaSink := func(where string, global bool) func(*stream.Environment, *once, *testsink.Store[int64], *testsink.Store[rec]) {
		return func(env *stream.Environment, o *once, store *testsink.Store[int64], _ *testsink.Store[rec]) {
			var opts []testsink.Option
			if global {
				opts = append(opts, testsink.WithGlobalCommit())
			}
			s := &panicSink[int64]{Sink: sinkerase.Erase(testsink.NewTwoPhase(store, opts...)), where: where, o: o}
			stream.SinkTo(stream.FromSource(env, dg(o, ""), watermark.None[int64](), "gen"), s, "out")
		}
	}
	viaSource := func(where string) func(*stream.Environment, *once, *testsink.Store[int64], *testsink.Store[rec]) {
		return func(env *stream.Environment, o *once, store *testsink.Store[int64], _ *testsink.Store[rec]) {
			stream.SinkTo(stream.FromSource(env, dg(o, where), watermark.None[int64](), "gen"), testsink.NewTwoPhase(store), "out")
		}
	}
	viaFetcher := func(perSplit bool) func(*stream.Environment, *once, *testsink.Store[int64], *testsink.Store[rec]) {
		return func(env *stream.Environment, o *once, _ *testsink.Store[int64], rstore *testsink.Store[rec]) {
			src := &fetchSource{scriptSource: &scriptSource{splits: splits, pull: true}, perSplit: perSplit,
				panicAt: func(r rec) bool { return o.fire(r.Split == "s1" && r.Pos == 150) }}
			stream.SinkTo(stream.FromSource(env, src, watermark.None[rec](), "src"), testsink.NewTwoPhase(rstore), "out")
		}
	}
	cases := map[string]job{
		"map": {build: func(env *stream.Environment, o *once, store *testsink.Store[int64], _ *testsink.Store[rec]) {
			s := stream.FromSource(env, dg(o, ""), watermark.None[int64](), "gen")
			m := stream.Map(s, func(v int64) int64 {
				if o.fire(v == 700) {
					panic(panicValue)
				}
				return v
			}, stream.Name("double"))
			stream.SinkTo(m, testsink.NewTwoPhase(store), "out")
		}, want: "gen -> double -> out", sub: true},
		"committer":           {build: viaSink("commit", false), want: "gen -> out", sub: true},
		"global committer":    {build: viaSink("global", true), want: "out (global committer)"},
		"enumerator snapshot": {build: viaSource("snapshot"), want: "gen (enumerator)"},
		"async function":      {build: viaSource("async"), want: "gen (enumerator)"},
		"periodic async":      {build: viaSource("periodic"), want: "gen (enumerator)"},
		"async handler":       {build: viaSource("handler"), want: "gen (enumerator)"},
		"fetcher":             {build: viaFetcher(false), recs: true, want: "src -> out", sub: true},
		"fetcher per split":   {build: viaFetcher(true), recs: true, want: "src -> out", sub: true},
	}
	for name, c := range cases {
		for _, restarts := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/restart=%v", name, restarts), func(t *testing.T) {
				var logs syncBuffer
				strategy := restart.None()
				if restarts {
					strategy = restart.FixedDelay(3, 0)
				}
				env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(5*time.Millisecond), stream.Restart(strategy),
					stream.Logger(slog.New(slog.NewTextHandler(&logs, nil))))
				o := &once{}
				store, rstore := testsink.NewStore[int64](), testsink.NewStore[rec]()
				c.build(env, o, store, rstore)
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				defer cancel()
				res, err := env.Execute(ctx, "panics")
				if !o.fired.Load() {
					t.Fatalf("the panic was not injected (job error %v)", err)
				}
				if !strings.Contains(logs.String(), "recovered from a panic") || !strings.Contains(logs.String(), "goroutine ") {
					t.Errorf("the panic and its stack were not logged:\n%s", logs.String())
				}
				if restarts {
					if err != nil {
						t.Fatalf("job with restarts failed: %v", err)
					}
					if res.Restarts < 1 || len(res.Failures) < 1 || !errors.Is(res.Failures[0], engine.ErrPanic) {
						t.Fatalf("got %d restarts, failures %v; want a restart caused by a panic", res.Restarts, res.Failures)
					}
					if c.recs {
						expectExactlyOnce(t, splits, rstore.Committed())
					} else {
						checkSequence(t, datagen.New(gen, datagen.Count(n), datagen.Splits(4)), n, store.Committed(), false)
					}
					return
				}
				if !errors.Is(err, engine.ErrPanic) {
					t.Fatalf("job error %v does not wrap engine.ErrPanic", err)
				}
				t.Logf("job error: %v", err)
				var te *engine.TaskError
				if !errors.As(err, &te) {
					t.Fatalf("job error %v is not a *engine.TaskError", err)
				}
				if te.Operator != c.want || (te.Subtask >= 0) != c.sub {
					t.Errorf("error names operator %q subtask %d, want %q (subtask named: %v)", te.Operator, te.Subtask, c.want, c.sub)
				}
				msg := err.Error()
				if !strings.Contains(msg, panicValue) || !strings.Contains(msg, "panic") || strings.Contains(msg, "goroutine ") {
					t.Errorf("error %q should name the panic and its value, without a stack", msg)
				}
			})
		}
	}
}
