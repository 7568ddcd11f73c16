package testsink

import (
	"context"
	"fmt"

	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/sink"
)

// committable names one staged transaction of a Store.
type committable struct {
	TxnID string `json:"txn"`
}

// Option configures NewTwoPhase.
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(c *options) { f(c) }

type options struct{ global bool }

// WithGlobalCommit makes the sink implement sink.GlobalCommitting: after the
// committers of a checkpoint have committed, its global committer records
// the checkpoint's transaction ids in the store (see
// [Store.GlobalCommits]), idempotently. It fails if one of them is not
// committed. Off by default.
func WithGlobalCommit() Option { return optionFunc(func(o *options) { o.global = true }) }

// NewTwoPhase returns an exactly-once sink into store, already wrapped with
// sink.NewTwoPhase (its committable type is committable, serialized as
// JSON version 1).
//
// Writers buffer records. PrepareCommit(n) moves the buffer into the store's
// staging area under the transaction id TxnID(job, operator, subtask, n)
// and returns its committable; an empty buffer prepares nothing. Nothing is
// visible in [Store.Committed] before a committer commits the transaction,
// atomically. Committing a committed transaction signals
// SignalAlreadyCommitted; one that is neither staged nor committed fails
// with an unknown reason (an error wrapping [ErrTxnUnknown]).
//
// A writer created in a restarted attempt (Attempt() > 0) or restored from
// checkpoint r aborts the staged transactions of its own subtask prepared at
// checkpoints after r (all of them when nothing was restored), and keeps
// those at or before r: the restored committables commit them. Subtask 0
// also aborts those of subtasks ≥ the current parallelism, so scaling down
// leaves nothing behind.
func NewTwoPhase[T any](store *Store[T], opts ...Option) sink.Sink[T] {
	var o options
	for _, fn := range opts {
		fn.apply(&o)
	}
	tp := &twoPhase[T]{store: store}
	if o.global {
		return sink.NewTwoPhase[T, committable](&globalTwoPhase[T]{tp})
	}
	return sink.NewTwoPhase[T, committable](tp)
}

var committableSerde = serde.JSON[committable](1)

type twoPhase[T any] struct{ store *Store[T] }

var (
	_ sink.TwoPhase[int, committable]         = (*twoPhase[int])(nil)
	_ sink.GlobalCommitting[committable]      = (*globalTwoPhase[int])(nil)
	_ sink.CommittingWriter[int, committable] = (*twoPhaseWriter[int])(nil)
)

func (s *twoPhase[T]) CreateWriter(_ context.Context, ic sink.InitContext) (sink.CommittingWriter[T, committable], error) {
	w := &twoPhaseWriter[T]{
		store: s.store,
		job:   ic.JobName(),
		op:    ic.OperatorName(),
		sub:   ic.SubtaskIndex(),
	}
	restored, ok := ic.RestoredCheckpointID()
	if ic.Attempt() > 0 || ok {
		p := ic.Parallelism()
		s.store.abortWhere(func(t *Txn[T]) bool {
			mine := t.Subtask == w.sub || (w.sub == 0 && t.Subtask >= p)
			return t.Job == w.job && t.Operator == w.op && t.CheckpointID >= 0 && mine &&
				(!ok || t.CheckpointID > restored)
		})
	}
	return w, nil
}

func (s *twoPhase[T]) CreateCommitter(context.Context, sink.InitContext) (sink.Committer[committable], error) {
	return &committer[T]{store: s.store}, nil
}

func (s *twoPhase[T]) CommittableSerializer() serde.Versioned[committable] {
	return committableSerde
}

type globalTwoPhase[T any] struct{ *twoPhase[T] }

func (s *globalTwoPhase[T]) CreateGlobalCommitter(context.Context, sink.InitContext) (sink.GlobalCommitter[committable], error) {
	return &globalCommitter[T]{store: s.store}, nil
}

// twoPhaseWriter is used from its subtask's goroutine only.
type twoPhaseWriter[T any] struct {
	store   *Store[T]
	job, op string
	sub     int
	buf     []T
}

func (w *twoPhaseWriter[T]) Write(ctx context.Context, v T, _ sink.Meta) error {
	w.buf = append(w.buf, v)
	return nil
}

// Flush keeps the buffer: it goes to the store at PrepareCommit.
func (w *twoPhaseWriter[T]) Flush(context.Context, bool) error { return nil }

func (w *twoPhaseWriter[T]) PrepareCommit(ctx context.Context, checkpointID int64) ([]committable, error) {
	if len(w.buf) == 0 {
		return nil, nil
	}
	id := TxnID(w.job, w.op, w.sub, checkpointID)
	err := w.store.stage(&Txn[T]{ID: id, Job: w.job, Operator: w.op, Subtask: w.sub, CheckpointID: checkpointID, Records: w.buf})
	if err != nil {
		return nil, err
	}
	w.buf = nil
	return []committable{{TxnID: id}}, nil
}

// Close drops the buffer: unprepared records never become visible.
func (w *twoPhaseWriter[T]) Close() error {
	w.buf = nil
	return nil
}

type committer[T any] struct{ store *Store[T] }

func (c *committer[T]) Commit(_ context.Context, reqs []sink.CommitRequest[committable]) error {
	for _, r := range reqs {
		id := r.Committable().TxnID
		switch c.store.commit(id) {
		case commitAlready:
			r.SignalAlreadyCommitted()
		case commitUnknown:
			r.SignalFailedWithUnknownReason(fmt.Errorf("%w: %q (checkpoint %d); was it aborted?", ErrTxnUnknown, id, r.CheckpointID()))
		}
	}
	return nil
}

func (c *committer[T]) Close() error { return nil }

type globalCommitter[T any] struct{ store *Store[T] }

func (g *globalCommitter[T]) CommitGlobal(_ context.Context, checkpointID int64, committed []committable) error {
	ids := make([]string, len(committed))
	for i, c := range committed {
		ids[i] = c.TxnID
	}
	return g.store.commitGlobal(checkpointID, ids)
}

func (g *globalCommitter[T]) Close() error { return nil }
