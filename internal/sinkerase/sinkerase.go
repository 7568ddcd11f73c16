// Package sinkerase gives the runtime (and the wrappers that inject faults or
// watch commits) the type-erased view of a sink.Sink: committables and
// writer states as bytes (see internal/sinkrt). A sink built with
// sink.NewTwoPhase, NewStateful or NewStatefulTwoPhase implements [Sink]
// itself, through exported methods of an unexported type; a plain sink is
// wrapped here.
package sinkerase

import (
	"context"
	"fmt"

	"github.com/sluice-io/sluice/internal/sinkrt"
	"github.com/sluice-io/sluice/sink"
)

// Sink is a sink as the runtime sees it.
type Sink[T any] interface {
	// NewWriter creates a writer, or restores one from serialized states
	// when restored is non-nil. It returns the writer whose Write the
	// runtime calls (the connector's own, on the hot path) and the erased
	// rest of it. A wrapper that overrides Write returns itself first.
	NewWriter(ctx context.Context, ic sink.InitContext, restored [][]byte) (sink.Writer[T], sinkrt.Writer, error)
	// NewCommitter returns nil, nil for sinks that do not commit.
	NewCommitter(ctx context.Context, ic sink.InitContext) (sinkrt.Committer, error)
	// NewGlobalCommitter returns nil, nil for sinks without a global step.
	NewGlobalCommitter(ctx context.Context, ic sink.InitContext) (sinkrt.GlobalCommitter, error)
	// Describe names what the sink implements, for messages.
	Describe() string
}

// Erase returns the runtime's view of s: s itself if it has one (a sink
// built with one of package sink's constructors, or a wrapper of one), else
// a plain sink without commit or state.
func Erase[T any](s sink.Sink[T]) Sink[T] {
	if e, ok := s.(Sink[T]); ok {
		return e
	}
	return plain[T]{s}
}

type plain[T any] struct{ s sink.Sink[T] }

func (p plain[T]) Describe() string { return fmt.Sprintf("%T", p.s) }

func (p plain[T]) NewWriter(ctx context.Context, ic sink.InitContext, _ [][]byte) (sink.Writer[T], sinkrt.Writer, error) {
	w, err := p.s.CreateWriter(ctx, ic)
	if err != nil {
		return nil, nil, err
	}
	if w == nil {
		return nil, nil, fmt.Errorf("%s returned a nil writer", p.Describe())
	}
	pw := plainWriter[T]{w}
	return w, pw, nil
}

func (plain[T]) NewCommitter(context.Context, sink.InitContext) (sinkrt.Committer, error) {
	return nil, nil
}

func (plain[T]) NewGlobalCommitter(context.Context, sink.InitContext) (sinkrt.GlobalCommitter, error) {
	return nil, nil
}

type plainWriter[T any] struct{ w sink.Writer[T] }

func (p plainWriter[T]) Flush(ctx context.Context, end bool) error { return p.w.Flush(ctx, end) }
func (p plainWriter[T]) Close() error                              { return p.w.Close() }

func (plainWriter[T]) PrepareCommitRaw(context.Context, int64) ([][]byte, error) { return nil, nil }
func (plainWriter[T]) SnapshotRaw(context.Context, int64) ([][]byte, error)      { return nil, nil }

func (p plainWriter[T]) WriteWatermark(ctx context.Context, wm int64) error {
	if w, ok := p.w.(sink.WatermarkWriter); ok {
		return w.WriteWatermark(ctx, wm)
	}
	return nil
}

func (p plainWriter[T]) NotifyCheckpointAborted(ctx context.Context, id int64) error {
	if w, ok := p.w.(sink.CheckpointAbortListener); ok {
		return w.NotifyCheckpointAborted(ctx, id)
	}
	return nil
}

// Writer is both halves of an erased writer in one value, for tests and
// tools that drive a sink by hand: Write goes to the typed writer, the
// rest to the erased one. PrepareCommit and SnapshotState return the
// serialized committables and states.
type Writer[T any] struct {
	sinkrt.Writer
	Front sink.Writer[T]
}

// Open makes a writer of s with NewWriter.
func Open[T any](ctx context.Context, s Sink[T], ic sink.InitContext, restored [][]byte) (*Writer[T], error) {
	front, w, err := s.NewWriter(ctx, ic, restored)
	if err != nil {
		return nil, err
	}
	return &Writer[T]{Writer: w, Front: front}, nil
}

// Write writes through the typed writer.
func (w *Writer[T]) Write(ctx context.Context, v T, m sink.Meta) error {
	return w.Front.Write(ctx, v, m)
}

// PrepareCommit is PrepareCommitRaw.
func (w *Writer[T]) PrepareCommit(ctx context.Context, id int64) ([][]byte, error) {
	return w.PrepareCommitRaw(ctx, id)
}

// SnapshotState is SnapshotRaw.
func (w *Writer[T]) SnapshotState(ctx context.Context, id int64) ([][]byte, error) {
	return w.SnapshotRaw(ctx, id)
}
