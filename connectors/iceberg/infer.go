package iceberg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// inferType is the column type of a record field's value, for tables
// created from the first records ([CreateTableFromRecords]) and columns
// added by [AddColumns]: bool → boolean, an integer (int, int32, int64, a
// float64 or json.Number without fraction) → long, another number →
// double, string → string, []byte → binary, time.Time → timestamptz.
// Null, nested and other values have no column type.
func inferType(v any) (string, error) {
	switch x := v.(type) {
	case bool:
		return "boolean", nil
	case int, int32, int64:
		return "long", nil
	case float32:
		return "double", nil
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return "long", nil
		}
		return "double", nil
	case json.Number:
		if strings.ContainsAny(string(x), ".eE") {
			return "double", nil
		}
		return "long", nil
	case string:
		return "string", nil
	case []byte:
		return "binary", nil
	case time.Time:
		return "timestamptz", nil
	case nil:
		return "", errors.New("the value is null, so its type is unknown")
	}
	return "", fmt.Errorf("a %T value has no column type (nested values are not supported)", v)
}

// inferColumns are the columns of a table created from row: every
// non-null field, by name, all optional; the event-time column (when set
// and not in the row) as timestamptz.
func inferColumns(r Row, eventTimeColumn string) ([]Column, error) {
	names := make([]string, 0, len(r))
	for k, v := range r {
		if v != nil {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	cols := make([]Column, 0, len(names)+1)
	for _, n := range names {
		t, err := inferType(r[n])
		if err != nil {
			return nil, fmt.Errorf("%w: field %q of the first record: %w", ErrBadRecord, n, err)
		}
		cols = append(cols, Column{Name: n, Type: t})
	}
	if eventTimeColumn != "" && r[eventTimeColumn] == nil {
		cols = append(cols, Column{Name: eventTimeColumn, Type: "timestamptz"})
	}
	if len(cols) == 0 {
		return nil, fmt.Errorf("%w: the first record has no non-null field to make a column of", ErrBadRecord)
	}
	return cols, nil
}

// createFromRecord creates the table (or loads it, if another writer
// created it first) with the columns inferred from the writer's first
// record.
func (w *writer[T]) createFromRecord(ctx context.Context, r Row) error {
	cols, err := inferColumns(r, w.s.cfg.eventTimeColumn)
	if err != nil {
		return err
	}
	spec := *w.s.cfg.create
	spec.columns = cols
	tbl, err := loadOrCreate(ctx, w.cat, w.s.ident, &spec)
	if err != nil {
		return err
	}
	return w.useTable(ctx, tbl)
}

// useTable makes tbl's schema the one rows are built for, with the
// parquet-go data file writer unless the table has a setting it does not
// support (see pqUnsupported): then with iceberg-go's Arrow writer.
func (w *writer[T]) useTable(ctx context.Context, tbl *table.Table) error {
	var dw dataWriter
	why := pqUnsupported(tbl)
	if w.s.cfg.arrowWriter {
		why = "forced by a test"
	}
	if why == "" {
		p, err := newPQPlan(ctx, tbl, w.s.cfg.eventTimeColumn)
		if err != nil {
			return fmt.Errorf("table %s: %w", strings.Join(w.s.ident, "."), err)
		}
		dw = newPQWriter(p, w.subtask)
	} else {
		a, err := newArrowWriter(tbl, w.s.cfg.eventTimeColumn, w.s.cfg.targetFileSize)
		if err != nil {
			return fmt.Errorf("table %s: %w", strings.Join(w.s.ident, "."), err)
		}
		if w.dw == nil && w.subtask == 0 {
			w.s.cfg.logger.Info("iceberg sink: data files written by iceberg-go's Arrow writer", "table", strings.Join(w.s.ident, "."), "reason", why)
		}
		dw = a
	}
	if w.dw != nil {
		w.dw.release()
	}
	w.tbl, w.dw = tbl, dw
	return nil
}

// addColumns adds the fields of r named by names as optional columns
// (types from their values), after writing the rows buffered with the
// old schema. Another writer may add the same column meanwhile: a column
// that exists on the fresh table is used as it is (a value that does not
// fit it fails like any other). A schema commit that conflicts is retried
// on fresh metadata.
func (w *writer[T]) addColumns(ctx context.Context, r Row, names []string) error {
	if err := w.writeFiles(ctx); err != nil {
		return err
	}
	ident := strings.Join(w.s.ident, ".")
	wait := w.s.cfg.commitRetryWait
	for attempt := 0; ; attempt++ {
		tbl, err := w.cat.LoadTable(ctx, w.s.ident)
		if err != nil {
			return fmt.Errorf("iceberg sink: load table %s to add columns: %w", ident, err)
		}
		tx := tbl.NewTransaction()
		us := tx.UpdateSchema(true, false)
		var added []string
		for _, n := range names {
			if _, ok := tbl.Schema().FindFieldByName(n); ok {
				continue
			}
			t, err := inferType(r[n])
			var it iceberg.Type
			if err == nil {
				it, err = columnType(t)
			}
			if err != nil {
				return fmt.Errorf("%w: new field %q: %w", ErrBadRecord, n, err)
			}
			us.AddColumn([]string{n}, it, "", false, nil)
			added = append(added, n+" "+t)
		}
		if len(added) == 0 {
			return w.useTable(ctx, tbl)
		}
		if err := us.Commit(); err != nil {
			return fmt.Errorf("iceberg sink: add columns %v to table %s: %w", added, ident, err)
		}
		fresh, err := tx.Commit(ctx)
		if err == nil {
			w.s.cfg.logger.Info("added columns to the table", "table", ident, "columns", added)
			return w.useTable(ctx, fresh)
		}
		if !errors.Is(err, table.ErrCommitFailed) || attempt >= w.s.cfg.commitRetries {
			return fmt.Errorf("iceberg sink: add columns %v to table %s: %w", added, ident, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		case <-t.C:
		}
		wait = min(wait*2, defaultCommitRetryMaxWait)
	}
}
