package faultinject

import (
	"context"
	"fmt"

	"github.com/sluice-io/sluice/internal/sinkerase"
	"github.com/sluice-io/sluice/internal/sinkrt"
	"github.com/sluice-io/sluice/sink"
)

// WrapSink returns s with the plan's sink faults injected: WriterAfterRecords,
// AfterPrepareCommit and the writer side of DuringSnapshot into its writers
// (and, in crash mode, writers abandoned without Close), BeforeCommit and
// DuringCommit into its committers. It works on the runtime's erased view
// (committables and writer states as bytes), so it wraps two-phase and
// stateful sinks built with sink.NewTwoPhase and friends as well as plain
// ones, and the runtime uses the wrapper's commits and states as the
// wrapped sink's. A global committer, if any, is s's own.
//
// An injected committer failure marks every request of the Commit call
// FailedUnknown with the injected error and returns nil, which is what a
// typed committer returning an error amounts to.
func WrapSink[T any](s sink.Sink[T], p *Plan) sink.Sink[T] {
	return &wrappedSink[T]{inner: sinkerase.Erase(s), plan: p}
}

type wrappedSink[T any] struct {
	inner sinkerase.Sink[T]
	plan  *Plan
}

var _ sinkerase.Sink[int] = (*wrappedSink[int])(nil)

func (s *wrappedSink[T]) CreateWriter(ctx context.Context, ic sink.InitContext) (sink.Writer[T], error) {
	w, _, err := s.NewWriter(ctx, ic, nil)
	return w, err
}

func (s *wrappedSink[T]) NewWriter(ctx context.Context, ic sink.InitContext, restored [][]byte) (sink.Writer[T], sinkrt.Writer, error) {
	front, w, err := s.inner.NewWriter(ctx, ic, restored)
	if err != nil {
		return nil, nil, err
	}
	sub := ic.SubtaskIndex()
	fw := &writer[T]{
		Writer:       w,
		front:        front,
		plan:         s.plan,
		subtask:      sub,
		attempt:      ic.Attempt(),
		count:        newCounter(s.plan, WriterAfterRecords, sub, ic.Attempt(), fmt.Sprintf("writer subtask %d", sub)),
		firedAtStart: s.plan.firedCount(),
	}
	return fw, fw, nil
}

func (s *wrappedSink[T]) NewCommitter(ctx context.Context, ic sink.InitContext) (sinkrt.Committer, error) {
	c, err := s.inner.NewCommitter(ctx, ic)
	if err != nil || c == nil {
		return c, err
	}
	return &committer{Committer: c, plan: s.plan, subtask: ic.SubtaskIndex(), attempt: ic.Attempt()}, nil
}

func (s *wrappedSink[T]) NewGlobalCommitter(ctx context.Context, ic sink.InitContext) (sinkrt.GlobalCommitter, error) {
	return s.inner.NewGlobalCommitter(ctx, ic)
}

func (s *wrappedSink[T]) Describe() string { return "faultinject(" + s.inner.Describe() + ")" }

// writer is used from its subtask's goroutine only. It is both the typed
// writer whose Write the runtime calls and the erased rest of it.
type writer[T any] struct {
	sinkrt.Writer
	front            sink.Writer[T]
	plan             *Plan
	subtask, attempt int
	count            *counter
	firedAtStart     int64 // faults fired before the writer was created
}

func (w *writer[T]) Write(ctx context.Context, v T, m sink.Meta) error {
	if !w.count.admit() {
		return w.count.tripped
	}
	return w.front.Write(ctx, v, m)
}

func (w *writer[T]) snapshotFault(method string, checkpointID int64) error {
	where := fmt.Sprintf("writer subtask %d %s(%d), attempt %d", w.subtask, method, checkpointID, w.attempt)
	return w.plan.fireAt(DuringSnapshot, w.subtask, checkpointID, where)
}

func (w *writer[T]) PrepareCommitRaw(ctx context.Context, checkpointID int64) ([][]byte, error) {
	if err := w.snapshotFault("PrepareCommit", checkpointID); err != nil {
		return nil, err
	}
	cs, err := w.Writer.PrepareCommitRaw(ctx, checkpointID)
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
	if w.plan.abandon(w.Writer, w.firedAtStart) {
		return nil
	}
	return w.Writer.Close()
}

func (w *writer[T]) SnapshotRaw(ctx context.Context, checkpointID int64) ([][]byte, error) {
	if err := w.snapshotFault("SnapshotState", checkpointID); err != nil {
		return nil, err
	}
	return w.Writer.SnapshotRaw(ctx, checkpointID)
}

// committer is used from its committer goroutine only.
type committer struct {
	sinkrt.Committer
	plan             *Plan
	subtask, attempt int
}

func (c *committer) Commit(ctx context.Context, reqs []*sinkrt.Request) error {
	if len(reqs) == 0 {
		return c.Committer.Commit(ctx, reqs)
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
	err := c.Committer.Commit(ctx, reqs)
	if during != nil {
		failAll(reqs, during)
		return nil
	}
	return err
}

func failAll(reqs []*sinkrt.Request, err error) {
	for _, r := range reqs {
		r.Outcome, r.Err = sinkrt.FailedUnknown, err
	}
}
