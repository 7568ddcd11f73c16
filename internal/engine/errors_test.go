package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

var errBoom = errors.New("boom")

// failingSink fails in the role named by where: "create", "write", "flush",
// "prepare" or "commit".
type failingSink struct{ where string }

func (s *failingSink) CreateWriter(context.Context, sink.InitContext) (sink.CommittingWriter[rec, string], error) {
	if s.where == "create" {
		return nil, errBoom
	}
	return &failingWriter{s: s}, nil
}
func (s *failingSink) CreateCommitter(context.Context, sink.InitContext) (sink.Committer[string], error) {
	return &failingCommitter{s: s}, nil
}
func (s *failingSink) CommittableSerializer() serde.Versioned[string] { return serde.JSON[string](1) }

type failingWriter struct{ s *failingSink }

func (w *failingWriter) Write(context.Context, rec, sink.Meta) error {
	if w.s.where == "write" {
		return errBoom
	}
	return nil
}
func (w *failingWriter) Flush(context.Context, bool) error {
	if w.s.where == "flush" {
		return errBoom
	}
	return nil
}
func (w *failingWriter) PrepareCommit(context.Context, int64) ([]string, error) {
	if w.s.where == "prepare" {
		return nil, errBoom
	}
	return []string{"c"}, nil
}
func (w *failingWriter) Close() error { return nil }

type failingCommitter struct{ s *failingSink }

func (c *failingCommitter) Commit(_ context.Context, reqs []sink.CommitRequest[string]) error {
	if c.s.where == "commit" {
		for _, r := range reqs {
			r.SignalFailedWithUnknownReason(errBoom)
		}
	}
	return nil
}
func (c *failingCommitter) Close() error { return nil }

// TestFailuresNameOperatorSubtaskAndCause: an error from any role fails the
// job (restart strategy none) with an error that names the operator, the
// subtask and the cause.
func TestFailuresNameOperatorSubtaskAndCause(t *testing.T) {
	splits := []rangeSplit{{ID: "s0", End: 10}, {ID: "s1", End: 10}}
	cases := []struct {
		name string
		src  *scriptSource
		sink *failingSink
		want []string
	}{
		{"reader", &scriptSource{splits: splits, pull: true, readerErr: errBoom}, &failingSink{}, []string{"src -> out", "subtask", "start reader", "boom"}},
		{"enumerator", &scriptSource{splits: splits, pull: true, enumErr: errBoom}, &failingSink{}, []string{"src (enumerator)", "start enumerator", "boom"}},
		{"poll", &scriptSource{splits: splits, pull: true, failAt: func(_ int, r rec) bool { return r.Split == "s1" && r.Pos == 3 }}, &failingSink{}, []string{"src -> out", "poll reader", "s1@3"}},
		{"create writer", &scriptSource{splits: splits, pull: true}, &failingSink{where: "create"}, []string{"sink out", "create writer", "boom"}},
		{"write", &scriptSource{splits: splits, pull: true}, &failingSink{where: "write"}, []string{"src -> out", "subtask", "write: boom"}},
		{"flush", &scriptSource{splits: splits, pull: true}, &failingSink{where: "flush"}, []string{"src -> out", "flush at end of input", "boom"}},
		{"prepare", &scriptSource{splits: splits, pull: true}, &failingSink{where: "prepare"}, []string{"src -> out", "prepare commit at checkpoint", "boom"}},
		{"commit", &scriptSource{splits: splits, pull: true}, &failingSink{where: "commit"}, []string{"src -> out", "committer", "commit failed", "boom"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := stream.New(stream.Parallelism(2), stream.Logger(engine.DiscardLogger()))
			stream.SinkTo(stream.FromSource(env, c.src, watermark.None[rec](), "src"), sink.NewTwoPhase[rec, string](c.sink), "out")
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			_, err := env.Execute(ctx, "errs")
			if err == nil {
				t.Fatal("job succeeded, want an error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			var te *engine.TaskError
			if !errors.As(err, &te) {
				t.Errorf("error %v is not a *engine.TaskError", err)
			}
		})
	}
}

// TestRestartStrategyExhausted: a job that fails on every attempt stops
// after the strategy's attempts, with the cause.
func TestRestartStrategyExhausted(t *testing.T) {
	src := &scriptSource{splits: []rangeSplit{{ID: "s0", End: 10}}, pull: true,
		failAt: func(_ int, r rec) bool { return r.Pos == 5 }}
	env := stream.New(stream.Restart(restart.FixedDelay(3, time.Millisecond)), stream.Logger(engine.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, src, watermark.None[rec](), "src"), testsink.NewTwoPhase(testsink.NewStore[rec]()), "out")
	res, err := env.Execute(t.Context(), "exhaust")
	if err == nil || !strings.Contains(err.Error(), "after 3 restarts") || !strings.Contains(err.Error(), "s0@5") {
		t.Fatalf("got %v, want failure after 3 restarts naming s0@5", err)
	}
	if res.Restarts != 3 || len(res.Failures) != 3 {
		t.Errorf("got %d restarts and %d failures, want 3 and 3", res.Restarts, len(res.Failures))
	}
}

// TestBadJobDefinitions: mistakes are rejected before the job starts, with
// a message that says what to fix.
func TestBadJobDefinitions(t *testing.T) {
	gen := func() *datagen.Source[int64] { return datagen.New(func(i int64) int64 { return i }, datagen.Count(10)) }
	cases := []struct {
		name  string
		build func(env *stream.Environment)
		opts  []stream.Option
		want  string
	}{
		{"no sink", func(env *stream.Environment) {
			stream.Map(stream.FromSource(env, gen(), watermark.None[int64](), "g"), func(v int64) int64 { return v })
		}, nil, "has no sink"},
		{"no source", func(*stream.Environment) {}, nil, "has no source"},
		{"parallelism 0", func(env *stream.Environment) {
			stream.SinkTo(stream.FromSource(env, gen(), watermark.None[int64](), "g"), testsink.NewCollect(testsink.NewStore[int64]()), "out")
		}, []stream.Option{stream.Parallelism(-1)}, "parallelism is -1"},
		{"operator parallelism", func(env *stream.Environment) {
			s := stream.FromSource(env, gen(), watermark.None[int64](), "g", stream.WithParallelism(-2))
			stream.SinkTo(s, testsink.NewCollect(testsink.NewStore[int64]()), "out")
		}, nil, `operator "g" has parallelism -2`},
		{"duplicate names", func(env *stream.Environment) {
			s := stream.FromSource(env, gen(), watermark.None[int64](), "same")
			stream.SinkTo(s, testsink.NewCollect(testsink.NewStore[int64]()), "same")
		}, nil, `two operators are named "same"`},
		{"missing serializer", func(env *stream.Environment) {
			stream.SinkTo(stream.FromSource(env, noSerializer{&scriptSource{}}, watermark.None[rec](), "g"), testsink.NewCollect(testsink.NewStore[rec]()), "out")
		}, nil, "SplitSerializer() returned nil"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := stream.New(c.opts...)
			c.build(env)
			_, err := env.Build("bad")
			if !errors.Is(err, engine.ErrInvalidJob) {
				t.Fatalf("got %v, want ErrInvalidJob", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %q does not say %q", err, c.want)
			}
		})
	}
}

type noSerializer struct{ *scriptSource }

func (noSerializer) SplitSerializer() serde.Versioned[rangeSplit] { return nil }
func (noSerializer) CreateEnumerator(ctx source.EnumeratorContext[rangeSplit]) (source.Enumerator[rangeSplit, enumState], error) {
	return nil, errBoom
}

// TestMoreReadersThanSplits: idle readers get no-more-splits and the job
// finishes, in pull and in push mode.
func TestMoreReadersThanSplits(t *testing.T) {
	for _, push := range []bool{false, true} {
		opts := []datagen.Option{datagen.Count(1000), datagen.Splits(2)}
		if push {
			opts = append(opts, datagen.PushAssignment())
		}
		store := testsink.NewStore[int64]()
		env := stream.New(stream.Parallelism(4), stream.Logger(engine.DiscardLogger()))
		s := stream.FromSource(env, datagen.New(func(i int64) int64 { return i }, opts...), watermark.None[int64](), "g")
		stream.SinkTo(s, testsink.NewTwoPhase(store), "out")
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		_, err := env.Execute(ctx, "idle-readers")
		cancel()
		if err != nil {
			t.Fatalf("push=%v: %v", push, err)
		}
		if got := len(store.Committed()); got != 1000 {
			t.Errorf("push=%v: got %d records, want 1000", push, got)
		}
	}
}

// TestTryMapFailsTheTask: an error from a TryMap function fails the job
// with the operator's name and the error, and the records before it in the
// batch still went through.
func TestTryMapFailsTheTask(t *testing.T) {
	store := testsink.NewStore[int64]()
	env := stream.New(stream.Logger(engine.DiscardLogger()))
	s := stream.FromSource(env, datagen.New(func(i int64) int64 { return i }, datagen.Count(100)), watermark.None[int64](), "gen")
	m := stream.TryMap(s, func(v int64) (int64, error) {
		if v == 42 {
			return 0, errBoom
		}
		return v, nil
	}, stream.Name("picky"))
	stream.SinkTo(m, testsink.NewCollect(store), "out")
	_, err := env.Execute(t.Context(), "trymap")
	if !errors.Is(err, errBoom) || !strings.Contains(err.Error(), "operator picky") {
		t.Fatalf("got %v, want boom from operator picky", err)
	}
	var te *engine.TaskError
	if !errors.As(err, &te) || strings.Contains(err.Error(), "goroutine") {
		t.Errorf("want a TaskError without a stack trace, got %v", err)
	}
}
