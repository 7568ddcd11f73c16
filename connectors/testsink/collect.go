package testsink

import (
	"context"
	"strconv"

	"github.com/sluice-io/sluice/sink"
)

// NewCollect returns an at-least-once sink into store without commits:
// writers buffer records and Flush appends the buffer to the store's
// committed log (at every checkpoint and at the end of input). After a
// failure, records flushed since the restored checkpoint appear again.
// Close drops an unflushed buffer.
func NewCollect[T any](store *Store[T]) sink.Sink[T] { return &collect[T]{store: store} }

type collect[T any] struct{ store *Store[T] }

func (s *collect[T]) CreateWriter(ctx context.Context, ic sink.InitContext) (sink.Writer[T], error) {
	return &collectWriter[T]{
		store: s.store,
		txn: Txn[T]{
			ID:           ic.JobName() + "/" + ic.OperatorName() + "/" + strconv.Itoa(ic.SubtaskIndex()) + "/flush",
			Job:          ic.JobName(),
			Operator:     ic.OperatorName(),
			Subtask:      ic.SubtaskIndex(),
			CheckpointID: -1,
		},
	}, nil
}

// collectWriter is used from its subtask's goroutine only.
type collectWriter[T any] struct {
	store *Store[T]
	txn   Txn[T] // template
	buf   []T
}

func (w *collectWriter[T]) Write(ctx context.Context, v T, _ sink.Meta) error {
	w.buf = append(w.buf, v)
	return nil
}

func (w *collectWriter[T]) Flush(context.Context, bool) error {
	if len(w.buf) == 0 {
		return nil
	}
	t := w.txn
	t.Records = w.buf
	w.store.appendCommitted(&t)
	w.buf = nil
	return nil
}

func (w *collectWriter[T]) Close() error {
	w.buf = nil
	return nil
}
