package iceberg

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/table"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/sink"
)

// rowSink writes rows through a fresh writer for checkpoint cp and
// commits them through a global committer; it returns the first error.
func rowSink(ctx context.Context, s *Sink[Row], cp int64, rows ...Row) error {
	w, err := s.CreateWriter(ctx, testInit{})
	if err != nil {
		return err
	}
	defer w.Close()
	for i, r := range rows {
		if err := w.Write(ctx, r, sink.Meta{Timestamp: failureEpoch + int64(i)*1000, HasTimestamp: true}); err != nil {
			return err
		}
	}
	cs, err := w.PrepareCommit(ctx, cp)
	if err != nil {
		return err
	}
	gc, err := s.CreateGlobalCommitter(ctx, testInit{})
	if err != nil {
		return err
	}
	defer gc.Close()
	return gc.CommitGlobal(ctx, cp, cs)
}

// scanRows reads the table's column names (schema order) and its rows as
// maps (values as Arrow gives them: strings, int64s, float64s, nulls).
func scanRows(t *testing.T, cat Catalog, ident table.Identifier) ([]string, []map[string]any) {
	t.Helper()
	ctx := t.Context()
	c, err := cat(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer closeCatalog(c)
	tbl, err := c.LoadTable(ctx, ident)
	if err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, f := range tbl.Schema().Fields() {
		cols = append(cols, f.Name+" "+f.Type.String())
	}
	at, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer at.Release()
	rdr := array.NewTableReader(at, 1024)
	defer rdr.Release()
	var rows []map[string]any
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for i := range int(rec.NumRows()) {
			m := map[string]any{}
			for j, f := range rec.Schema().Fields() {
				col := rec.Column(j)
				if col.IsNull(i) {
					m[f.Name] = nil
					continue
				}
				switch a := col.(type) {
				case *array.Int64:
					m[f.Name] = a.Value(i)
				case *array.Float64:
					m[f.Name] = a.Value(i)
				case *array.String:
					m[f.Name] = a.Value(i)
				case *array.LargeString:
					m[f.Name] = a.Value(i)
				case *array.Boolean:
					m[f.Name] = a.Value(i)
				default:
					m[f.Name] = col.ValueStr(i)
				}
			}
			rows = append(rows, m)
		}
	}
	return cols, rows
}

// TestCreateTableFromRecords: the table is created with the columns of
// the first record (types from its values, the event-time column added),
// partitioned by day of the event time; a later record that disagrees
// with it fails with an unrecoverable error naming the column.
func TestCreateTableFromRecords(t *testing.T) {
	cat, ident := sqliteBackend(t)
	part, err := ParsePartitionSpec("day(ts)")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cat, ident, func(r Row) (Row, error) { return r, nil }, CreateTableFromRecords(part, nil), EventTimeColumn("ts"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := rowSink(ctx, s, 1,
		Row{"id": float64(1), "name": "a", "amount": 1.5, "ok": true, "gone": nil},
		Row{"id": int64(2), "name": "b", "amount": float64(3)},
	); err != nil {
		t.Fatal(err)
	}
	cols, rows := scanRows(t, cat, ident)
	if want := []string{"amount double", "id long", "name string", "ok boolean", "ts timestamptz"}; !slices.Equal(cols, want) {
		t.Errorf("columns %v, want %v", cols, want)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2: %v", len(rows), rows)
	}
	for _, bad := range []struct {
		row  Row
		want string
	}{
		{Row{"id": "three"}, `column "id"`},
		{Row{"id": int64(3), "extra": "x"}, `field "extra" is not a column`},
	} {
		err := rowSink(ctx, s, 2, bad.row)
		if !errors.Is(err, ErrBadRecord) || !errors.Is(err, restart.ErrUnrecoverable) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("record %v: error %v, want an unrecoverable ErrBadRecord naming %s", bad.row, err, bad.want)
		}
	}
	// a partition field that names no column of the first record
	s2, err := New(cat, table.Identifier{"db", "other"}, func(r Row) (Row, error) { return r, nil },
		CreateTableFromRecords([]PartitionField{{Column: "region", Transform: "identity"}}, nil))
	if err != nil {
		t.Fatal(err)
	}
	err = rowSink(ctx, s2, 1, Row{"id": int64(1)})
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), `"region"`) {
		t.Errorf("partition by a missing column: error %v, want ErrInvalidConfig naming region", err)
	}
	// a first record with a nested value
	s3, err := New(cat, table.Identifier{"db", "nested"}, func(r Row) (Row, error) { return r, nil }, CreateTableFromRecords(nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	err = rowSink(ctx, s3, 1, Row{"id": int64(1), "tags": []any{"x"}})
	if !errors.Is(err, ErrBadRecord) || !strings.Contains(err.Error(), `"tags"`) {
		t.Errorf("nested first record: error %v, want ErrBadRecord naming tags", err)
	}
}

// TestAddColumns: with AddColumns, a record with a new field adds it as
// an optional column (the rows buffered before keep the old schema and
// read it as null); a second writer that still has the old schema finds
// the column on the fresh table and uses it; without AddColumns the new
// field fails the job.
func TestAddColumns(t *testing.T) {
	cat, ident := sqliteBackend(t)
	ctx := t.Context()
	id := func(r Row) (Row, error) { return r, nil }
	cols, err := ParseColumns("id long not null", "name string")
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(cat, ident, id, CreateTable(cols, nil, nil), AddColumns(true))
	if err != nil {
		t.Fatal(err)
	}
	// two writers opened on the old schema
	w1, err := s.CreateWriter(ctx, testInit{})
	if err != nil {
		t.Fatal(err)
	}
	defer w1.Close()
	w2, err := s.CreateWriter(ctx, testInit{})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	write := func(w sink.CommittingWriter[Row, committable], rows ...Row) {
		t.Helper()
		for _, r := range rows {
			if err := w.Write(ctx, r, sink.Meta{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	write(w1, Row{"id": int64(1), "name": "a"}, Row{"id": int64(2), "note": "new", "score": 2.5}, Row{"id": int64(3)})
	write(w2, Row{"id": int64(4), "note": "from w2"})
	var all []committable
	for _, w := range []sink.CommittingWriter[Row, committable]{w1, w2} {
		cs, err := w.PrepareCommit(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, cs...)
	}
	gc, err := s.CreateGlobalCommitter(ctx, testInit{})
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	if err := gc.CommitGlobal(ctx, 1, all); err != nil {
		t.Fatal(err)
	}
	names, rows := scanRows(t, cat, ident)
	if want := []string{"id long", "name string", "note string", "score double"}; !slices.Equal(names, want) {
		t.Errorf("columns %v, want %v", names, want)
	}
	byID := map[int64]map[string]any{}
	for _, r := range rows {
		byID[r["id"].(int64)] = r
	}
	if len(rows) != 4 || byID[1]["note"] != nil || byID[2]["note"] != "new" || byID[2]["score"] != 2.5 || byID[4]["note"] != "from w2" {
		t.Errorf("rows %v", rows)
	}
	// without AddColumns: an unrecoverable error naming the field
	s2, err := New(cat, ident, id)
	if err != nil {
		t.Fatal(err)
	}
	err = rowSink(ctx, s2, 2, Row{"id": int64(5), "other": "x"})
	if !errors.Is(err, ErrBadRecord) || !errors.Is(err, restart.ErrUnrecoverable) || !strings.Contains(err.Error(), `"other"`) {
		t.Errorf("new field without AddColumns: error %v", err)
	}
	_ = time.Second
}
