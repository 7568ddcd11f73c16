package iceberg

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go/table"
	"github.com/google/uuid"
)

// dataWriter buffers a writer's rows for one table schema and writes them
// as data files (one or more per partition). Two implement it: the
// parquet-go writer (pqWriter, the default) and iceberg-go's Arrow writer
// (arrowWriter), used for tables whose settings the first does not
// support (see pqUnsupported).
type dataWriter interface {
	// add buffers one row; on error nothing of it is kept.
	add(r Row, eventTime int64, hasEventTime bool) error
	// buffered is the estimated size of the buffered rows.
	buffered() int64
	// newFields are the fields of r that are not columns and have a
	// value, sorted.
	newFields(r Row) []string
	// write writes the buffered rows as data files and describes them.
	write(ctx context.Context, subtask int) ([]fileDesc, error)
	release()
}

// newFieldsOf returns the keys of r with a value that byName lacks, sorted.
func newFieldsOf(r Row, byName map[string]int) []string {
	var out []string
	for k, v := range r {
		if _, ok := byName[k]; !ok && v != nil {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// arrowWriter is the data file writer through Arrow columns and
// iceberg-go's table.WriteRecords.
type arrowWriter struct {
	tbl            *table.Table
	rb             *rowBuilder
	targetFileSize int64
}

func newArrowWriter(tbl *table.Table, eventTimeColumn string, targetFileSize int64) (*arrowWriter, error) {
	rb, err := newRowBuilder(tbl.Schema(), eventTimeColumn)
	if err != nil {
		return nil, err
	}
	return &arrowWriter{tbl: tbl, rb: rb, targetFileSize: targetFileSize}, nil
}

func (a *arrowWriter) add(r Row, eventTime int64, hasEventTime bool) error {
	return a.rb.add(r, eventTime, hasEventTime)
}

func (a *arrowWriter) buffered() int64          { return a.rb.bytes }
func (a *arrowWriter) newFields(r Row) []string { return newFieldsOf(r, a.rb.byName) }
func (a *arrowWriter) release()                 { a.rb.release() }

// write writes the buffered rows with table.WriteRecords: the table's
// partition spec fans them out into one file per partition, named with a
// fresh UUID.
func (a *arrowWriter) write(ctx context.Context, _ int) ([]fileDesc, error) {
	if a.rb.rows == 0 {
		return nil, nil
	}
	rec := a.rb.batch()
	one := func(yield func(arrow.RecordBatch, error) bool) { yield(rec, nil) }
	var seq iter.Seq2[arrow.RecordBatch, error] = one
	files := table.WriteRecords(ctx, a.tbl, a.rb.schema, seq,
		table.WithWriteUUID(uuid.New()), table.WithTargetFileSize(a.targetFileSize), table.WithMaxWriteWorkers(1))
	var out []fileDesc
	var errs []error
	for df, err := range files {
		if err != nil {
			errs = append(errs, err)
			continue
		}
		d, err := describeFile(df)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, d)
	}
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("arrow writer: %w", err)
	}
	return out, nil
}
