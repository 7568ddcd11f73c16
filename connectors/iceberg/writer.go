package iceberg

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/sink"
)

// writer buffers one subtask's rows as Arrow columns and writes them as
// Parquet data files (one per partition) when the buffer reaches the
// target size and at every checkpoint. The files are durable but not part
// of the table; PrepareCommit hands their descriptions over.
type writer[T any] struct {
	s       *Sink[T]
	subtask int
	cat     catalog.Catalog
	tbl     *table.Table
	dw      dataWriter // nil until the table is known
	pending []fileDesc // written since the last PrepareCommit
}

func newWriter[T any](ctx context.Context, s *Sink[T], ic sink.InitContext) (*writer[T], error) {
	cat, err := s.cat(ctx)
	if err != nil {
		return nil, err
	}
	tbl, err := loadOrCreate(ctx, cat, s.ident, s.cfg.create)
	if err != nil {
		_ = closeCatalog(cat)
		return nil, err
	}
	w := &writer[T]{s: s, subtask: ic.SubtaskIndex(), cat: cat}
	if tbl != nil { // else created from the first record
		if err := w.useTable(ctx, tbl); err != nil {
			_ = closeCatalog(cat)
			return nil, err
		}
	}
	return w, nil
}

func (w *writer[T]) Write(ctx context.Context, v T, m sink.Meta) error {
	r, err := w.s.row(v)
	if err != nil {
		return fmt.Errorf("iceberg sink: row of a record: %w", err)
	}
	if w.tbl == nil {
		if err := w.createFromRecord(ctx, r); err != nil {
			return markBad(fmt.Errorf("iceberg sink, table %s: create it from the first record: %w", strings.Join(w.s.ident, "."), err))
		}
	}
	if w.s.cfg.addColumns {
		if names := w.dw.newFields(r); len(names) > 0 {
			if err := w.addColumns(ctx, r, names); err != nil {
				return markBad(err)
			}
		}
	}
	if err := w.dw.add(r, m.Timestamp, m.HasTimestamp); err != nil {
		// the same record fails again after a restart
		return fmt.Errorf("iceberg sink, table %s: %w (%w)", strings.Join(w.s.ident, "."), err, restart.ErrUnrecoverable)
	}
	if w.dw.buffered() >= w.s.cfg.targetFileSize {
		return w.writeFiles(ctx)
	}
	return nil
}

// Flush does nothing: the rows are written at PrepareCommit, which follows
// every Flush.
func (w *writer[T]) Flush(context.Context, bool) error { return nil }

func (w *writer[T]) PrepareCommit(ctx context.Context, checkpointID int64) ([]committable, error) {
	if err := w.writeFiles(ctx); err != nil {
		return nil, err
	}
	if len(w.pending) == 0 {
		return nil, nil
	}
	c := committable{Checkpoint: checkpointID, Subtask: w.subtask, Files: w.pending}
	w.pending = nil
	return []committable{c}, nil
}

// writeFiles writes the buffered rows as data files, one per partition,
// under the table's data location with a fresh UUID in their names (a
// retried attempt never overwrites nor reuses a file).
func (w *writer[T]) writeFiles(ctx context.Context) error {
	if w.dw == nil {
		return nil
	}
	files, err := w.dw.write(ctx, w.subtask)
	w.pending = append(w.pending, files...)
	if err != nil {
		return fmt.Errorf("iceberg sink: write data files of table %s: %w", strings.Join(w.s.ident, "."), err)
	}
	return nil
}

func (w *writer[T]) Close() error {
	if w.dw != nil {
		w.dw.release()
	}
	return closeCatalog(w.cat)
}

// markBad marks err unrecoverable when a record or the configuration
// caused it: the same record fails again after a restart.
func markBad(err error) error {
	if errors.Is(err, ErrBadRecord) || errors.Is(err, ErrInvalidConfig) || errors.Is(err, ErrUnsupportedSchema) {
		return fmt.Errorf("%w (%w)", err, restart.ErrUnrecoverable)
	}
	return err
}
