package faultinject

import (
	"context"
	"fmt"

	"github.com/sluice-io/sluice/source"
)

// WrapSource returns src with the plan's reader faults (AfterRecords and
// the reader side of DuringSnapshot) injected into its readers. The
// enumerator, serializers and boundedness are src's own. Wrapped readers
// implement source.ReaderEventHandler and source.SplitPauser exactly when
// the wrapped reader does, and always forward checkpoint-complete,
// checkpoint-committed and checkpoint-aborted notices to a reader that
// wants them.
func WrapSource[T any, S source.Split, E any](src source.Source[T, S, E], p *Plan) source.Source[T, S, E] {
	return &wrappedSource[T, S, E]{Source: src, plan: p}
}

type wrappedSource[T any, S source.Split, E any] struct {
	source.Source[T, S, E]
	plan *Plan
}

func (s *wrappedSource[T, S, E]) CreateReader(ctx source.ReaderContext) (source.Reader[T, S], error) {
	r, err := s.Source.CreateReader(ctx)
	if err != nil || r == nil {
		return r, err
	}
	sub := ctx.SubtaskIndex()
	w := &reader[T, S]{
		Reader:  r,
		plan:    s.plan,
		subtask: sub,
		attempt: ctx.Attempt(),
		count:   newCounter(s.plan, AfterRecords, sub, ctx.Attempt(), fmt.Sprintf("reader subtask %d", sub)),
	}
	w.out.all = &outputs[T]{count: w.count, splits: map[string]*output[T]{}}
	ev, hasEv := r.(source.ReaderEventHandler)
	pa, hasPa := r.(source.SplitPauser)
	switch {
	case hasEv && hasPa:
		return struct {
			*reader[T, S]
			source.ReaderEventHandler
			source.SplitPauser
		}{w, ev, pa}, nil
	case hasEv:
		return struct {
			*reader[T, S]
			source.ReaderEventHandler
		}{w, ev}, nil
	case hasPa:
		return struct {
			*reader[T, S]
			source.SplitPauser
		}{w, pa}, nil
	}
	return w, nil
}

// reader is used from its subtask's goroutine only.
type reader[T any, S source.Split] struct {
	source.Reader[T, S]
	plan             *Plan
	subtask, attempt int
	count            *counter
	out              output[T] // wraps the Output of the current PollNext
}

func (r *reader[T, S]) PollNext(out source.Output[T]) (source.InputStatus, error) {
	if r.count.count >= r.count.next {
		r.count.check() // Records = 0, or faults that fired elsewhere
	}
	if err := r.count.tripped; err != nil {
		return source.NothingAvailable, err
	}
	r.out.inner = out
	st, err := r.Reader.PollNext(&r.out)
	if terr := r.count.tripped; terr != nil {
		return st, terr
	}
	return st, err
}

func (r *reader[T, S]) SnapshotState(checkpointID int64) ([]S, error) {
	where := fmt.Sprintf("reader subtask %d SnapshotState(%d), attempt %d", r.subtask, checkpointID, r.attempt)
	if err := r.plan.fireAt(DuringSnapshot, r.subtask, checkpointID, where); err != nil {
		return nil, err
	}
	return r.Reader.SnapshotState(checkpointID)
}

func (r *reader[T, S]) NotifyCheckpointComplete(checkpointID int64) error {
	if l, ok := r.Reader.(source.CheckpointListener); ok {
		return l.NotifyCheckpointComplete(checkpointID)
	}
	return nil
}

// NotifyCheckpointCommitted forwards commit notices to a reader that
// wants them (source.CommitListener).
func (r *reader[T, S]) NotifyCheckpointCommitted(checkpointID int64) error {
	if l, ok := r.Reader.(source.CommitListener); ok {
		return l.NotifyCheckpointCommitted(checkpointID)
	}
	return nil
}

func (r *reader[T, S]) NotifyCheckpointAborted(checkpointID int64) error {
	if l, ok := r.Reader.(source.CheckpointAbortListener); ok {
		return l.NotifyCheckpointAborted(checkpointID)
	}
	return nil
}

// Start is forwarded explicitly so that the wrapper's method set is obvious.
func (r *reader[T, S]) Start(ctx context.Context) error { return r.Reader.Start(ctx) }

// outputs holds the counting outputs of one reader.
type outputs[T any] struct {
	count  *counter
	splits map[string]*output[T] // wrapped per-split outputs
}

// output counts the records of one reader, on its main output and on every
// per-split output, and withholds them once a fault fired.
type output[T any] struct {
	all   *outputs[T]
	inner source.Output[T]
}

func (o *output[T]) Collect(v T) {
	if o.all.count.admit() {
		o.inner.Collect(v)
	}
}

func (o *output[T]) CollectAt(v T, ts int64) {
	if o.all.count.admit() {
		o.inner.CollectAt(v, ts)
	}
}

func (o *output[T]) EmitWatermark(ts int64) { o.inner.EmitWatermark(ts) }
func (o *output[T]) MarkIdle()              { o.inner.MarkIdle() }

func (o *output[T]) ForSplit(id string) source.Output[T] {
	inner := o.inner.ForSplit(id)
	so, ok := o.all.splits[id]
	if !ok {
		so = &output[T]{all: o.all}
		o.all.splits[id] = so
	}
	so.inner = inner
	return so
}

func (o *output[T]) ReleaseSplit(id string) {
	delete(o.all.splits, id)
	o.inner.ReleaseSplit(id)
}
