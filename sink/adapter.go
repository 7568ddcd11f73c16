package sink

import (
	"context"
	"fmt"

	"github.com/sluice-io/sluice/internal/sinkrt"
	"github.com/sluice-io/sluice/serde"
)

// This file holds the bridge to the runtime's type-erased view of sinks. Go
// cannot discover a sink's committable type C at run time, so a two-phase
// sink is passed to the stream API through NewTwoPhase (or NewStateful,
// NewStatefulTwoPhase), which knows C and S statically and presents them to
// the runtime as serialized bytes. The adapter's exported methods implement
// the runtime's interfaces (internal/sinkrt, internal/sinkerase); the type
// itself is unexported, so none of this is part of the API.

// NewTwoPhase presents a two-phase sink to the stream API. If s also
// implements [GlobalCommitting][C], its global committer runs after
// commits. Go does not infer T and C from a value that implements
// TwoPhase[T, C]; give them: sink.NewTwoPhase[string, Txn](s).
func NewTwoPhase[T, C any](s TwoPhase[T, C]) Sink[T] {
	return &adapter[T, C, struct{}]{
		inner: s, twoPhase: true, cser: s.CommittableSerializer(),
		create: func(ctx context.Context, ic InitContext) (parts[T, C, struct{}], error) {
			w, err := s.CreateWriter(ctx, ic)
			if err != nil || w == nil {
				return parts[T, C, struct{}]{}, err
			}
			return parts[T, C, struct{}]{w: w, prepare: w.PrepareCommit}, nil
		},
		committer: s.CreateCommitter,
	}
}

// NewStateful presents a sink with stateful writers to the stream API.
func NewStateful[T, S any](s Stateful[T, S]) Sink[T] {
	return &adapter[T, struct{}, S]{
		inner: s, sser: s.WriterStateSerializer(),
		create: func(ctx context.Context, ic InitContext) (parts[T, struct{}, S], error) {
			w, err := s.CreateWriter(ctx, ic)
			if err != nil || w == nil {
				return parts[T, struct{}, S]{}, err
			}
			return parts[T, struct{}, S]{w: w, snapshot: w.SnapshotState}, nil
		},
		restore: func(ctx context.Context, ic InitContext, states []S) (parts[T, struct{}, S], error) {
			w, err := s.RestoreWriter(ctx, ic, states)
			if err != nil || w == nil {
				return parts[T, struct{}, S]{}, err
			}
			return parts[T, struct{}, S]{w: w, snapshot: w.SnapshotState}, nil
		},
	}
}

// NewStatefulTwoPhase presents a two-phase sink with stateful writers to the
// stream API. If s also implements [GlobalCommitting][C], its global
// committer runs after commits.
func NewStatefulTwoPhase[T, C, S any](s StatefulTwoPhase[T, C, S]) Sink[T] {
	wrap := func(w StatefulCommittingWriter[T, C, S], err error) (parts[T, C, S], error) {
		if err != nil || w == nil {
			return parts[T, C, S]{}, err
		}
		return parts[T, C, S]{w: w, prepare: w.PrepareCommit, snapshot: w.SnapshotState}, nil
	}
	return &adapter[T, C, S]{
		inner: s, twoPhase: true, cser: s.CommittableSerializer(), sser: s.WriterStateSerializer(),
		create: func(ctx context.Context, ic InitContext) (parts[T, C, S], error) {
			return wrap(s.CreateWriter(ctx, ic))
		},
		restore: func(ctx context.Context, ic InitContext, states []S) (parts[T, C, S], error) {
			return wrap(s.RestoreWriter(ctx, ic, states))
		},
		committer: s.CreateCommitter,
	}
}

// parts is a writer with its typed optional methods.
type parts[T, C, S any] struct {
	w        Writer[T]
	prepare  func(context.Context, int64) ([]C, error)
	snapshot func(context.Context, int64) ([]S, error)
}

type adapter[T, C, S any] struct {
	inner     any // the connector's sink, for Describe and GlobalCommitting
	twoPhase  bool
	cser      serde.Versioned[C]
	sser      serde.Versioned[S]
	create    func(context.Context, InitContext) (parts[T, C, S], error)
	restore   func(context.Context, InitContext, []S) (parts[T, C, S], error) // nil: not stateful
	committer func(context.Context, InitContext) (Committer[C], error)        // nil: not two-phase
}

// CreateWriter makes a typed writer, for callers that use the adapter as a
// plain Sink (the runtime calls NewWriter).
func (a *adapter[T, C, S]) CreateWriter(ctx context.Context, ic InitContext) (Writer[T], error) {
	p, err := a.create(ctx, ic)
	if err != nil {
		return nil, err
	}
	if p.w == nil {
		return nil, fmt.Errorf("%s returned a nil writer", a.Describe())
	}
	return p.w, nil
}

// Describe names what the sink implements, for messages.
func (a *adapter[T, C, S]) Describe() string {
	d := fmt.Sprintf("%T", a.inner)
	if a.twoPhase {
		d += " (two-phase)"
	}
	if a.restore != nil {
		d += " (stateful)"
	}
	return d
}

// NewWriter creates a writer, or restores one from serialized states when
// restored is non-nil. It returns the connector's own writer (whose Write
// the runtime calls on its hot path) and the erased rest of it.
func (a *adapter[T, C, S]) NewWriter(ctx context.Context, ic InitContext, restored [][]byte) (Writer[T], sinkrt.Writer, error) {
	var p parts[T, C, S]
	var err error
	if a.restore != nil && restored != nil {
		if a.sser == nil {
			return nil, nil, fmt.Errorf("%s has no writer state serializer", a.Describe())
		}
		states, derr := serde.UnmarshalAll(a.sser, restored)
		if derr != nil {
			return nil, nil, fmt.Errorf("restore writer state: %w", derr)
		}
		p, err = a.restore(ctx, ic, states)
	} else {
		p, err = a.create(ctx, ic)
	}
	if err != nil {
		return nil, nil, err
	}
	if p.w == nil {
		return nil, nil, fmt.Errorf("%s returned a nil writer", a.Describe())
	}
	if a.twoPhase && a.cser == nil {
		_ = p.w.Close()
		return nil, nil, fmt.Errorf("%s has no committable serializer", a.Describe())
	}
	if a.restore != nil && a.sser == nil {
		_ = p.w.Close()
		return nil, nil, fmt.Errorf("%s has no writer state serializer", a.Describe())
	}
	ew := &erasedWriter[T, C, S]{parts: p, cser: a.cser, sser: a.sser}
	ew.wm, _ = p.w.(WatermarkWriter)
	ew.abort, _ = p.w.(CheckpointAbortListener)
	return p.w, ew, nil
}

// NewCommitter returns nil, nil for sinks that do not commit.
func (a *adapter[T, C, S]) NewCommitter(ctx context.Context, ic InitContext) (sinkrt.Committer, error) {
	if a.committer == nil {
		return nil, nil
	}
	c, err := a.committer(ctx, ic)
	if err != nil {
		return nil, err
	}
	if c == nil {
		return nil, fmt.Errorf("%s returned a nil committer", a.Describe())
	}
	return &erasedCommitter[C]{c: c, ser: a.cser}, nil
}

// NewGlobalCommitter returns nil, nil for sinks without a global step.
func (a *adapter[T, C, S]) NewGlobalCommitter(ctx context.Context, ic InitContext) (sinkrt.GlobalCommitter, error) {
	if !a.twoPhase {
		return nil, nil
	}
	gc, ok := a.inner.(GlobalCommitting[C])
	if !ok {
		return nil, nil
	}
	g, err := gc.CreateGlobalCommitter(ctx, ic)
	if err != nil {
		return nil, err
	}
	if g == nil {
		return nil, fmt.Errorf("%s returned a nil global committer", a.Describe())
	}
	return &erasedGlobal[C]{g: g, ser: a.cser}, nil
}

type erasedWriter[T, C, S any] struct {
	parts[T, C, S]
	cser  serde.Versioned[C]
	sser  serde.Versioned[S]
	wm    WatermarkWriter
	abort CheckpointAbortListener
}

func (w *erasedWriter[T, C, S]) Flush(ctx context.Context, endOfInput bool) error {
	return w.w.Flush(ctx, endOfInput)
}

func (w *erasedWriter[T, C, S]) Close() error { return w.w.Close() }

func (w *erasedWriter[T, C, S]) PrepareCommitRaw(ctx context.Context, id int64) ([][]byte, error) {
	if w.prepare == nil {
		return nil, nil
	}
	cs, err := w.prepare(ctx, id)
	if err != nil {
		return nil, err
	}
	return serde.MarshalAll(w.cser, cs)
}

func (w *erasedWriter[T, C, S]) SnapshotRaw(ctx context.Context, id int64) ([][]byte, error) {
	if w.snapshot == nil {
		return nil, nil
	}
	ss, err := w.snapshot(ctx, id)
	if err != nil {
		return nil, err
	}
	return serde.MarshalAll(w.sser, ss)
}

func (w *erasedWriter[T, C, S]) WriteWatermark(ctx context.Context, wm int64) error {
	if w.wm == nil {
		return nil
	}
	return w.wm.WriteWatermark(ctx, wm)
}

func (w *erasedWriter[T, C, S]) NotifyCheckpointAborted(ctx context.Context, id int64) error {
	if w.abort == nil {
		return nil
	}
	return w.abort.NotifyCheckpointAborted(ctx, id)
}

type erasedCommitter[C any] struct {
	c   Committer[C]
	ser serde.Versioned[C]
}

func (e *erasedCommitter[C]) Close() error { return e.c.Close() }

func (e *erasedCommitter[C]) Commit(ctx context.Context, raws []*sinkrt.Request) error {
	reqs := make([]CommitRequest[C], 0, len(raws))
	typed := make([]*request[C], 0, len(raws))
	for _, r := range raws {
		c, err := serde.Unmarshal(e.ser, r.Data)
		if err != nil {
			r.Outcome, r.Err = sinkrt.FailedUnknown, fmt.Errorf("deserialize committable of checkpoint %d: %w", r.CheckpointID, err)
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
			q.raw.Outcome, q.raw.Err = sinkrt.FailedUnknown, err
		case !q.settled:
			q.raw.Outcome = sinkrt.Committed
		case q.raw.Outcome == sinkrt.Retry && q.updated:
			b, merr := serde.Marshal(e.ser, q.c)
			if merr != nil {
				q.raw.Outcome, q.raw.Err = sinkrt.FailedUnknown, fmt.Errorf("serialize updated committable: %w", merr)
			} else {
				q.raw.Data = b
			}
		}
	}
	return nil
}

type request[C any] struct {
	raw     *sinkrt.Request
	c       C
	settled bool
	updated bool
}

func (r *request[C]) Committable() C      { return r.c }
func (r *request[C]) CheckpointID() int64 { return r.raw.CheckpointID }
func (r *request[C]) Retries() int        { return r.raw.Retries }
func (r *request[C]) settle(o sinkrt.Outcome, err error) {
	r.settled, r.raw.Outcome, r.raw.Err = true, o, err
}
func (r *request[C]) RetryLater()             { r.settle(sinkrt.Retry, nil) }
func (r *request[C]) UpdateAndRetryLater(c C) { r.c, r.updated = c, true; r.settle(sinkrt.Retry, nil) }
func (r *request[C]) SignalAlreadyCommitted() { r.settle(sinkrt.AlreadyCommitted, nil) }
func (r *request[C]) SignalFailedWithKnownReason(err error) {
	r.settle(sinkrt.FailedKnown, err)
}
func (r *request[C]) SignalFailedWithUnknownReason(err error) {
	r.settle(sinkrt.FailedUnknown, err)
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
