package sink

import (
	"context"
	"fmt"

	"github.com/sluice-io/sluice/serde"
)

// This file holds the runtime's type-erased view of sinks. Go cannot
// discover a sink's committable type C at run time, so a two-phase sink is
// passed to the stream API through NewTwoPhase (or NewStateful,
// NewStatefulTwoPhase), which knows C and S statically and presents them to
// the runtime as serialized bytes. Connector authors call those
// constructors; they never implement Erased themselves.

// Erased is a sink as the runtime sees it: committables and writer states
// are serialized (framed with serde.Marshal).
type Erased[T any] interface {
	// NewWriter creates a writer, or restores one from serialized states
	// when restored is non-nil.
	NewWriter(ctx InitContext, restored [][]byte) (ErasedWriter[T], error)
	// NewCommitter returns nil, nil for sinks that do not commit.
	NewCommitter(ctx InitContext) (ErasedCommitter, error)
	// NewGlobalCommitter returns nil, nil for sinks without a global step.
	NewGlobalCommitter(ctx InitContext) (ErasedGlobalCommitter, error)
	// Describe names what the sink implements, for messages.
	Describe() string
}

// ErasedWriter is a writer with its optional parts erased.
type ErasedWriter[T any] interface {
	Writer[T]
	// PrepareCommit returns serialized committables (nil if the sink does
	// not commit).
	PrepareCommit(checkpointID int64) ([][]byte, error)
	// SnapshotState returns serialized writer states (nil if stateless).
	SnapshotState(checkpointID int64) ([][]byte, error)
	// WriteWatermark forwards a watermark if the writer wants it.
	WriteWatermark(watermark int64) error
	// NotifyCheckpointAborted forwards the notice if the writer wants it.
	NotifyCheckpointAborted(checkpointID int64) error
	// Unwrap returns the writer whose Write the runtime calls on its hot
	// path: the connector's own writer, without an extra indirection. A
	// wrapper that embeds an ErasedWriter and overrides Write must also
	// override Unwrap to return itself, or its Write is skipped.
	Unwrap() Writer[T]
}

// Outcome is what a committer decided about one request.
type Outcome int

const (
	// Committed: done.
	Committed Outcome = iota
	// AlreadyCommitted: done by an earlier attempt.
	AlreadyCommitted
	// Retry: commit again after a backoff (Data may have been updated).
	Retry
	// FailedKnown: given up, job goes on.
	FailedKnown
	// FailedUnknown: the job fails.
	FailedUnknown
)

func (o Outcome) String() string {
	return [...]string{"committed", "already-committed", "retry", "failed-known", "failed-unknown"}[o]
}

// RawRequest is a serialized committable on its way through a committer.
type RawRequest struct {
	CheckpointID int64
	Data         []byte // serde.Marshal framing
	Retries      int
	// Set by Commit:
	Outcome Outcome
	Err     error
}

// ErasedCommitter commits serialized committables. Commit settles every
// request's Outcome (and may replace Data for Retry).
type ErasedCommitter interface {
	Commit(ctx context.Context, reqs []*RawRequest) error
	Close() error
}

// ErasedGlobalCommitter is the erased GlobalCommitter.
type ErasedGlobalCommitter interface {
	CommitGlobal(ctx context.Context, checkpointID int64, committed [][]byte) error
	Close() error
}

// Erase returns the runtime's view of s: s itself if it was built with one of
// this package's constructors, else a plain sink without commit or state.
func Erase[T any](s Sink[T]) Erased[T] {
	if e, ok := s.(Erased[T]); ok {
		return e
	}
	return &adapter[T, struct{}, struct{}]{sink: s}
}

// NewTwoPhase presents a two-phase sink to the stream API. If s also
// implements GlobalCommitting[C], its global committer runs after commits.
func NewTwoPhase[T, C any](s TwoPhase[T, C]) Sink[T] {
	return &adapter[T, C, struct{}]{sink: s, twoPhase: s}
}

// NewStateful presents a sink with stateful writers to the stream API.
func NewStateful[T, S any](s Stateful[T, S]) Sink[T] {
	return &adapter[T, struct{}, S]{sink: s, stateful: s}
}

// StatefulTwoPhase is a two-phase sink with stateful writers.
type StatefulTwoPhase[T, C, S any] interface {
	TwoPhase[T, C]
	RestoreWriter(ctx InitContext, states []S) (Writer[T], error)
	WriterStateSerializer() serde.Versioned[S]
}

// NewStatefulTwoPhase presents a two-phase sink with stateful writers to the
// stream API.
func NewStatefulTwoPhase[T, C, S any](s StatefulTwoPhase[T, C, S]) Sink[T] {
	return &adapter[T, C, S]{sink: s, twoPhase: s, stateful: s}
}

type adapter[T, C, S any] struct {
	sink     Sink[T]
	twoPhase TwoPhase[T, C]
	stateful Stateful[T, S]
}

func (a *adapter[T, C, S]) CreateWriter(ctx InitContext) (Writer[T], error) {
	return a.sink.CreateWriter(ctx)
}

func (a *adapter[T, C, S]) Describe() string {
	d := fmt.Sprintf("%T", a.sink)
	if a.twoPhase != nil {
		d += " (two-phase)"
	}
	if a.stateful != nil {
		d += " (stateful)"
	}
	return d
}

func (a *adapter[T, C, S]) NewWriter(ctx InitContext, restored [][]byte) (ErasedWriter[T], error) {
	var w Writer[T]
	var err error
	if a.stateful != nil && restored != nil {
		states, derr := serde.UnmarshalAll(a.stateful.WriterStateSerializer(), restored)
		if derr != nil {
			return nil, fmt.Errorf("restore writer state: %w", derr)
		}
		w, err = a.stateful.RestoreWriter(ctx, states)
	} else {
		w, err = a.sink.CreateWriter(ctx)
	}
	if err != nil {
		return nil, err
	}
	if w == nil {
		return nil, fmt.Errorf("%s returned a nil writer", a.Describe())
	}
	ew := &erasedWriter[T, C, S]{Writer: w}
	if a.twoPhase != nil {
		cw, ok := w.(CommittingWriter[T, C])
		if !ok {
			return nil, fmt.Errorf("%s is two-phase but its writer %T has no PrepareCommit(int64) ([]%s, error)", a.Describe(), w, typeName[C]())
		}
		ew.committing, ew.cser = cw, a.twoPhase.CommittableSerializer()
		if ew.cser == nil {
			return nil, fmt.Errorf("%s has no committable serializer", a.Describe())
		}
	}
	if a.stateful != nil {
		sw, ok := w.(StatefulWriter[T, S])
		if !ok {
			return nil, fmt.Errorf("%s is stateful but its writer %T has no SnapshotState(int64) ([]%s, error)", a.Describe(), w, typeName[S]())
		}
		ew.stateful, ew.sser = sw, a.stateful.WriterStateSerializer()
		if ew.sser == nil {
			return nil, fmt.Errorf("%s has no writer state serializer", a.Describe())
		}
	}
	ew.wm, _ = w.(WatermarkWriter)
	ew.abort, _ = w.(CheckpointAbortListener)
	return ew, nil
}

func typeName[X any]() string { var x X; return fmt.Sprintf("%T", x) }

func (a *adapter[T, C, S]) NewCommitter(ctx InitContext) (ErasedCommitter, error) {
	if a.twoPhase == nil {
		return nil, nil
	}
	c, err := a.twoPhase.CreateCommitter(ctx)
	if err != nil {
		return nil, err
	}
	return &erasedCommitter[C]{c: c, ser: a.twoPhase.CommittableSerializer()}, nil
}

func (a *adapter[T, C, S]) NewGlobalCommitter(ctx InitContext) (ErasedGlobalCommitter, error) {
	if a.twoPhase == nil {
		return nil, nil
	}
	gc, ok := a.sink.(GlobalCommitting[C])
	if !ok {
		return nil, nil
	}
	g, err := gc.CreateGlobalCommitter(ctx)
	if err != nil {
		return nil, err
	}
	return &erasedGlobal[C]{g: g, ser: a.twoPhase.CommittableSerializer()}, nil
}

type erasedWriter[T, C, S any] struct {
	Writer[T]
	committing CommittingWriter[T, C]
	cser       serde.Versioned[C]
	stateful   StatefulWriter[T, S]
	sser       serde.Versioned[S]
	wm         WatermarkWriter
	abort      CheckpointAbortListener
}

func (w *erasedWriter[T, C, S]) Unwrap() Writer[T] { return w.Writer }

func (w *erasedWriter[T, C, S]) PrepareCommit(id int64) ([][]byte, error) {
	if w.committing == nil {
		return nil, nil
	}
	cs, err := w.committing.PrepareCommit(id)
	if err != nil {
		return nil, err
	}
	return serde.MarshalAll(w.cser, cs)
}

func (w *erasedWriter[T, C, S]) SnapshotState(id int64) ([][]byte, error) {
	if w.stateful == nil {
		return nil, nil
	}
	ss, err := w.stateful.SnapshotState(id)
	if err != nil {
		return nil, err
	}
	return serde.MarshalAll(w.sser, ss)
}

func (w *erasedWriter[T, C, S]) WriteWatermark(wm int64) error {
	if w.wm == nil {
		return nil
	}
	return w.wm.WriteWatermark(wm)
}

func (w *erasedWriter[T, C, S]) NotifyCheckpointAborted(id int64) error {
	if w.abort == nil {
		return nil
	}
	return w.abort.NotifyCheckpointAborted(id)
}

type erasedCommitter[C any] struct {
	c   Committer[C]
	ser serde.Versioned[C]
}

func (e *erasedCommitter[C]) Close() error { return e.c.Close() }

func (e *erasedCommitter[C]) Commit(ctx context.Context, raws []*RawRequest) error {
	reqs := make([]CommitRequest[C], 0, len(raws))
	typed := make([]*request[C], 0, len(raws))
	for _, r := range raws {
		c, err := serde.Unmarshal(e.ser, r.Data)
		if err != nil {
			r.Outcome, r.Err = FailedUnknown, fmt.Errorf("deserialize committable of checkpoint %d: %w", r.CheckpointID, err)
			continue
		}
		q := &request[C]{raw: r, c: c}
		reqs = append(reqs, q)
		typed = append(typed, q)
	}
	var err error
	if len(reqs) > 0 {
		err = e.c.Commit(ctx, reqs)
	}
	for _, q := range typed {
		switch {
		case !q.settled && err != nil:
			q.raw.Outcome, q.raw.Err = FailedUnknown, err
		case !q.settled:
			q.raw.Outcome = Committed
		case q.raw.Outcome == Retry && q.updated:
			b, merr := serde.Marshal(e.ser, q.c)
			if merr != nil {
				q.raw.Outcome, q.raw.Err = FailedUnknown, fmt.Errorf("serialize updated committable: %w", merr)
			} else {
				q.raw.Data = b
			}
		}
	}
	return nil
}

type request[C any] struct {
	raw     *RawRequest
	c       C
	settled bool
	updated bool
}

func (r *request[C]) Committable() C      { return r.c }
func (r *request[C]) CheckpointID() int64 { return r.raw.CheckpointID }
func (r *request[C]) Retries() int        { return r.raw.Retries }
func (r *request[C]) settle(o Outcome, err error) {
	r.settled, r.raw.Outcome, r.raw.Err = true, o, err
}
func (r *request[C]) RetryLater()             { r.settle(Retry, nil) }
func (r *request[C]) UpdateAndRetryLater(c C) { r.c, r.updated = c, true; r.settle(Retry, nil) }
func (r *request[C]) SignalAlreadyCommitted() { r.settle(AlreadyCommitted, nil) }
func (r *request[C]) SignalFailedWithKnownReason(err error) {
	r.settle(FailedKnown, err)
}
func (r *request[C]) SignalFailedWithUnknownReason(err error) {
	r.settle(FailedUnknown, err)
}

type erasedGlobal[C any] struct {
	g   GlobalCommitter[C]
	ser serde.Versioned[C]
}

func (e *erasedGlobal[C]) Close() error { return e.g.Close() }

func (e *erasedGlobal[C]) CommitGlobal(ctx context.Context, id int64, raw [][]byte) error {
	cs, err := serde.UnmarshalAll(e.ser, raw)
	if err != nil {
		return fmt.Errorf("deserialize committables of checkpoint %d: %w", id, err)
	}
	return e.g.CommitGlobal(ctx, id, cs)
}
