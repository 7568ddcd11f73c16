package faultinject

import (
	"context"
	"fmt"

	"github.com/sluice-io/sluice/sink"
)

// WrapSink returns s with the plan's sink faults injected: WriterAfterRecords,
// AfterPrepareCommit and the writer side of DuringSnapshot into its writers
// (and, in crash mode, writers abandoned without Close), BeforeCommit and
// DuringCommit into its committers. It works on the runtime's erased view
// (sink.Erase(s)), so it wraps two-phase and stateful sinks built with
// sink.NewTwoPhase and friends as well as plain ones; the result implements
// both sink.Sink[T] and sink.Erased[T], and the runtime's sink.Erase returns
// it unchanged. A global committer, if any, is s's own.
//
// An injected committer failure marks every request of the Commit call
// FailedUnknown with the injected error and returns nil, which is what a
// typed committer returning an error amounts to.
func WrapSink[T any](s sink.Sink[T], p *Plan) sink.Sink[T] {
	return &wrappedSink[T]{inner: sink.Erase(s), plan: p}
}

type wrappedSink[T any] struct {
	inner sink.Erased[T]
	plan  *Plan
}

var _ sink.Erased[int] = (*wrappedSink[int])(nil)

func (s *wrappedSink[T]) CreateWriter(ctx sink.InitContext) (sink.Writer[T], error) {
	return s.NewWriter(ctx, nil)
}

func (s *wrappedSink[T]) NewWriter(ctx sink.InitContext, restored [][]byte) (sink.ErasedWriter[T], error) {
	w, err := s.inner.NewWriter(ctx, restored)
	if err != nil || w == nil {
		return w, err
	}
	sub := ctx.SubtaskIndex()
	return &writer[T]{
		ErasedWriter: w,
		plan:         s.plan,
		subtask:      sub,
		attempt:      ctx.Attempt(),
		count:        newCounter(s.plan, WriterAfterRecords, sub, ctx.Attempt(), fmt.Sprintf("writer subtask %d", sub)),
		firedAtStart: s.plan.firedCount(),
	}, nil
}

func (s *wrappedSink[T]) NewCommitter(ctx sink.InitContext) (sink.ErasedCommitter, error) {
	c, err := s.inner.NewCommitter(ctx)
	if err != nil || c == nil {
		return c, err
	}
	return &committer{ErasedCommitter: c, plan: s.plan, subtask: ctx.SubtaskIndex(), attempt: ctx.Attempt()}, nil
}

func (s *wrappedSink[T]) NewGlobalCommitter(ctx sink.InitContext) (sink.ErasedGlobalCommitter, error) {
	return s.inner.NewGlobalCommitter(ctx)
}

func (s *wrappedSink[T]) Describe() string { return "faultinject(" + s.inner.Describe() + ")" }

// writer is used from its subtask's goroutine only.
type writer[T any] struct {
	sink.ErasedWriter[T]
	plan             *Plan
	subtask, attempt int
	count            *counter
	firedAtStart     int64 // faults fired before the writer was created
}

// Unwrap returns the wrapper itself: the runtime calls Write on what Unwrap
// returns, and the promoted Unwrap of the inner writer would skip the fault.
func (w *writer[T]) Unwrap() sink.Writer[T] { return w }

func (w *writer[T]) Write(v T, c sink.Context) error {
	if !w.count.admit() {
		return w.count.tripped
	}
	return w.ErasedWriter.Write(v, c)
}

func (w *writer[T]) snapshotFault(method string, checkpointID int64) error {
	where := fmt.Sprintf("writer subtask %d %s(%d), attempt %d", w.subtask, method, checkpointID, w.attempt)
	return w.plan.fireAt(DuringSnapshot, w.subtask, checkpointID, where)
}

func (w *writer[T]) PrepareCommit(checkpointID int64) ([][]byte, error) {
	if err := w.snapshotFault("PrepareCommit", checkpointID); err != nil {
		return nil, err
	}
	cs, err := w.ErasedWriter.PrepareCommit(checkpointID)
	if err != nil || len(cs) == 0 {
		return cs, err // nothing prepared: nothing to leave behind
	}
	where := fmt.Sprintf("writer subtask %d after PrepareCommit(%d) prepared %d committable(s), attempt %d", w.subtask, checkpointID, len(cs), w.attempt)
	if err := w.plan.fireAt(AfterPrepareCommit, w.subtask, checkpointID, where); err != nil {
		return nil, err
	}
	return cs, nil
}

// Close closes the wrapped writer, unless crash mode abandons it (see
// [Plan.Crash]).
func (w *writer[T]) Close() error {
	if w.plan.abandon(w.ErasedWriter, w.firedAtStart) {
		return nil
	}
	return w.ErasedWriter.Close()
}

func (w *writer[T]) SnapshotState(checkpointID int64) ([][]byte, error) {
	if err := w.snapshotFault("SnapshotState", checkpointID); err != nil {
		return nil, err
	}
	return w.ErasedWriter.SnapshotState(checkpointID)
}

// committer is used from its committer goroutine only.
type committer struct {
	sink.ErasedCommitter
	plan             *Plan
	subtask, attempt int
}

func (c *committer) Commit(ctx context.Context, reqs []*sink.RawRequest) error {
	if len(reqs) == 0 {
		return c.ErasedCommitter.Commit(ctx, reqs)
	}
	id := reqs[0].CheckpointID
	for _, r := range reqs {
		id = max(id, r.CheckpointID)
	}
	where := func(what string) string {
		return fmt.Sprintf("committer subtask %d %s checkpoint %d (%d requests), attempt %d", c.subtask, what, id, len(reqs), c.attempt)
	}
	if err := c.plan.fireAt(BeforeCommit, c.subtask, id, where("before committing")); err != nil {
		failAll(reqs, err)
		return nil
	}
	during := c.plan.fireAt(DuringCommit, c.subtask, id, where("after committing"))
	err := c.ErasedCommitter.Commit(ctx, reqs)
	if during != nil {
		failAll(reqs, during)
		return nil
	}
	return err
}

func failAll(reqs []*sink.RawRequest, err error) {
	for _, r := range reqs {
		r.Outcome, r.Err = sink.FailedUnknown, err
	}
}
