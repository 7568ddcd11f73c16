package ratelimit

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/source"
)

// Clock is the time source of a limiter. Now is read on the reader's
// goroutine; AfterFunc arms a wake-up whose f only closes a channel (it may
// run on any goroutine) and returns a function that cancels it, reporting
// whether it was still pending.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// Option configures [Wrap].
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	clock Clock
	burst time.Duration
}

// defaultOptions holds every default in one place.
func defaultOptions() options {
	return options{clock: systemClock{}, burst: 100 * time.Millisecond}
}

// WithClock sets the clock (default: the system clock, time.Now and
// time.AfterFunc). Tests pass a fake clock to drive per-second limiters
// without waiting; a nil c keeps the default.
func WithClock(c Clock) Option {
	return optionFunc(func(o *options) {
		if c != nil {
			o.clock = c
		}
	})
}

// Burst sets how much a per-second limiter may save up while its reader is
// idle or slower than the rate, as a duration of records at the reader's
// rate (default 100 ms, always at least one record). It also bounds the
// batch a reader is woken for. Per-checkpoint strategies ignore it.
func Burst(d time.Duration) Option {
	return optionFunc(func(o *options) { o.burst = d })
}

// Source is a source whose readers are throttled by a [Strategy]; the
// enumerator, serializers and boundedness are the wrapped source's.
type Source[T any, S source.Split, E any] struct {
	inner    source.Source[T, S, E]
	strategy Strategy
	opts     options
	err      error
}

var _ source.Source[int, source.Split, int] = (*Source[int, source.Split, int])(nil)

// Wrap returns src throttled by s. Invalid arguments do not panic: the
// error is returned by [Source.Err] and by CreateEnumerator, so the job
// fails at start with a message naming the strategy.
func Wrap[T any, S source.Split, E any](src source.Source[T, S, E], s Strategy, opts ...Option) *Source[T, S, E] {
	w := &Source[T, S, E]{inner: src, strategy: s, opts: defaultOptions()}
	for _, o := range opts {
		o.apply(&w.opts)
	}
	switch {
	case src == nil:
		w.err = fmt.Errorf("%w: the wrapped source is nil", ErrInvalidStrategy)
	case w.opts.burst <= 0:
		w.err = fmt.Errorf("%w: Burst(%v): the burst must be positive", ErrInvalidStrategy, w.opts.burst)
	default:
		w.err = s.validate()
	}
	return w
}

// Err returns the configuration error, if any.
func (s *Source[T, S, E]) Err() error { return s.err }

// Strategy returns the strategy the source was wrapped with.
func (s *Source[T, S, E]) Strategy() Strategy { return s.strategy }

// Boundedness is the wrapped source's.
func (s *Source[T, S, E]) Boundedness() source.Boundedness { return s.inner.Boundedness() }

// CreateEnumerator returns the wrapped source's enumerator, unwrapped.
func (s *Source[T, S, E]) CreateEnumerator(ctx source.EnumeratorContext[S]) (source.Enumerator[S, E], error) {
	if s.err != nil {
		return nil, s.err
	}
	return s.inner.CreateEnumerator(ctx)
}

// RestoreEnumerator returns the wrapped source's restored enumerator,
// unwrapped.
func (s *Source[T, S, E]) RestoreEnumerator(ctx source.EnumeratorContext[S], state E) (source.Enumerator[S, E], error) {
	if s.err != nil {
		return nil, s.err
	}
	return s.inner.RestoreEnumerator(ctx, state)
}

// SplitSerializer is the wrapped source's.
func (s *Source[T, S, E]) SplitSerializer() serde.Versioned[S] { return s.inner.SplitSerializer() }

// EnumeratorStateSerializer is the wrapped source's.
func (s *Source[T, S, E]) EnumeratorStateSerializer() serde.Versioned[E] {
	return s.inner.EnumeratorStateSerializer()
}

// CreateReader returns the wrapped source's reader, throttled. It
// implements source.ReaderEventHandler and source.SplitPauser exactly when
// the wrapped reader does.
func (s *Source[T, S, E]) CreateReader(ctx source.ReaderContext) (source.Reader[T, S], error) {
	if s.err != nil {
		return nil, s.err
	}
	lim, err := s.strategy.newLimiter(ctx.SubtaskIndex(), ctx.Parallelism(), &s.opts)
	if err != nil {
		return nil, err
	}
	inner, err := s.inner.CreateReader(ctx)
	if err != nil || inner == nil {
		return inner, err
	}
	r := &reader[T, S]{inner: inner, lim: lim, clock: s.opts.clock}
	r.out.splits = map[string]*splitOutput[T]{}
	ev, hasEv := inner.(source.ReaderEventHandler)
	pa, hasPa := inner.(source.SplitPauser)
	switch {
	case hasEv && hasPa:
		return struct {
			*reader[T, S]
			source.ReaderEventHandler
			source.SplitPauser
		}{r, ev, pa}, nil
	case hasEv:
		return struct {
			*reader[T, S]
			source.ReaderEventHandler
		}{r, ev}, nil
	case hasPa:
		return struct {
			*reader[T, S]
			source.SplitPauser
		}{r, pa}, nil
	}
	return r, nil
}

type waitKind int

const (
	notWaiting waitKind = iota
	waitInner           // the wrapped reader returned NothingAvailable
	waitTimer           // the per-second budget is spent
	waitGate            // the per-checkpoint budget is spent
)

// closedCh is ready forever.
var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// reader throttles a wrapped reader. It is used from its subtask's
// goroutine only; its timer's callback only closes a channel.
type reader[T any, S source.Split] struct {
	inner   source.Reader[T, S]
	lim     limiter
	clock   Clock
	out     output[T]
	wait    waitKind
	timerCh chan struct{} // closed by the timer
	stop    func() bool   // cancels the pending timer
	gateCh  chan struct{} // closed when a checkpoint renews the budget
}

func (r *reader[T, S]) Start(ctx context.Context) error { return r.inner.Start(ctx) }

func (r *reader[T, S]) PollNext(out source.Output[T]) (source.InputStatus, error) {
	if !r.lim.ready() {
		r.block()
		return source.NothingAvailable, nil
	}
	r.wait = notWaiting
	r.out.inner, r.out.n = out, 0
	st, err := r.inner.PollNext(&r.out)
	r.out.inner = nil
	r.lim.take(r.out.n)
	if err != nil || st == source.EndOfInput {
		return st, err
	}
	if st == source.NothingAvailable {
		r.wait = waitInner
		return st, nil
	}
	if !r.lim.ready() {
		r.block()
		return source.NothingAvailable, nil
	}
	return st, nil
}

// block prepares Available for a reader out of budget.
func (r *reader[T, S]) block() {
	d, gated := r.lim.wait()
	if gated {
		r.wait = waitGate
		if r.gateCh == nil {
			r.gateCh = make(chan struct{})
		}
		return
	}
	r.wait = waitTimer
	r.stopTimer()
	ch := make(chan struct{})
	r.timerCh = ch
	r.stop = r.clock.AfterFunc(d, func() { close(ch) })
}

func (r *reader[T, S]) stopTimer() {
	if r.stop != nil {
		r.stop()
		r.stop = nil
	}
}

func (r *reader[T, S]) Available() <-chan struct{} {
	switch r.wait {
	case waitInner:
		return r.inner.Available()
	case waitTimer:
		return r.timerCh
	case waitGate:
		if r.gateCh == nil {
			r.gateCh = make(chan struct{})
		}
		return r.gateCh
	}
	return closedCh
}

// renewed wakes a reader waiting for the gate.
func (r *reader[T, S]) renewed() {
	if r.wait == waitGate {
		r.wait = notWaiting
	}
	if r.gateCh != nil {
		close(r.gateCh)
		r.gateCh = nil
	}
}

func (r *reader[T, S]) AddSplits(splits []S) error { return r.inner.AddSplits(splits) }

func (r *reader[T, S]) NotifyNoMoreSplits() { r.inner.NotifyNoMoreSplits() }

// SnapshotState snapshots the wrapped reader; for PerCheckpoint it then
// renews the budget.
func (r *reader[T, S]) SnapshotState(checkpointID int64) ([]S, error) {
	splits, err := r.inner.SnapshotState(checkpointID)
	if err != nil {
		return nil, err
	}
	if r.lim.checkpoint(true) {
		r.renewed()
	}
	return splits, nil
}

// NotifyCheckpointComplete renews the budget of PerCompletedCheckpoint and
// tells the wrapped reader, if it listens.
func (r *reader[T, S]) NotifyCheckpointComplete(checkpointID int64) error {
	if r.lim.checkpoint(false) {
		r.renewed()
	}
	if l, ok := r.inner.(source.CheckpointListener); ok {
		return l.NotifyCheckpointComplete(checkpointID)
	}
	return nil
}

// NotifyCheckpointCommitted tells the wrapped reader, if it listens
// (source.CommitListener).
func (r *reader[T, S]) NotifyCheckpointCommitted(checkpointID int64) error {
	if l, ok := r.inner.(source.CommitListener); ok {
		return l.NotifyCheckpointCommitted(checkpointID)
	}
	return nil
}

// NotifyCheckpointAborted tells the wrapped reader, if it listens.
func (r *reader[T, S]) NotifyCheckpointAborted(checkpointID int64) error {
	if l, ok := r.inner.(source.CheckpointAbortListener); ok {
		return l.NotifyCheckpointAborted(checkpointID)
	}
	return nil
}

// Close stops the timer and closes the wrapped reader.
func (r *reader[T, S]) Close() error {
	r.stopTimer()
	return r.inner.Close()
}

// output counts the records of one PollNext, on the reader's output and on
// every per-split output.
type output[T any] struct {
	inner  source.Output[T]
	n      int
	splits map[string]*splitOutput[T]
}

func (o *output[T]) Collect(v T)             { o.n++; o.inner.Collect(v) }
func (o *output[T]) CollectAt(v T, ts int64) { o.n++; o.inner.CollectAt(v, ts) }
func (o *output[T]) EmitWatermark(ts int64)  { o.inner.EmitWatermark(ts) }
func (o *output[T]) MarkIdle()               { o.inner.MarkIdle() }

func (o *output[T]) ForSplit(id string) source.Output[T] {
	so, ok := o.splits[id]
	if !ok {
		so = &splitOutput[T]{parent: o}
		o.splits[id] = so
	}
	so.inner = o.inner.ForSplit(id)
	return so
}

func (o *output[T]) ReleaseSplit(id string) {
	delete(o.splits, id)
	o.inner.ReleaseSplit(id)
}

// splitOutput is the counting output of one split.
type splitOutput[T any] struct {
	parent *output[T]
	inner  source.Output[T]
}

func (s *splitOutput[T]) Collect(v T)                         { s.parent.n++; s.inner.Collect(v) }
func (s *splitOutput[T]) CollectAt(v T, ts int64)             { s.parent.n++; s.inner.CollectAt(v, ts) }
func (s *splitOutput[T]) EmitWatermark(ts int64)              { s.inner.EmitWatermark(ts) }
func (s *splitOutput[T]) MarkIdle()                           { s.inner.MarkIdle() }
func (s *splitOutput[T]) ForSplit(id string) source.Output[T] { return s.parent.ForSplit(id) }
func (s *splitOutput[T]) ReleaseSplit(id string)              { s.parent.ReleaseSplit(id) }
