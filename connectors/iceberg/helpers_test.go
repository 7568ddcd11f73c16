package iceberg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
	"github.com/sluice-io/sluice/connectortest"
)

// testColumns is the schema of the tables of the package's tests.
var testColumns = []Column{
	{Name: "split", Type: "int", Required: true},
	{Name: "seq", Type: "long", Required: true},
	{Name: "payload", Type: "string"},
	{Name: "ts", Type: "timestamptz"},
}

// testRow is a conformance record as a row; its ts comes from the event
// time (EventTimeColumn) when the record has one, else from its seq.
func testRow(r connectortest.Record) (Row, error) {
	return Row{"split": int64(r.Split), "seq": r.Seq, "payload": r.Payload}, nil
}

// testCatalog is a SQLite SQL catalog with its warehouse, both in dir.
func testCatalog(dir string) Catalog {
	return SQLCatalog("default", filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"), nil)
}

// tableState is what a test reads back from a table.
type tableState struct {
	records   []connectortest.Record
	snapshots []table.Snapshot // main branch, oldest first
	files     []string         // data files referenced by the current snapshot
	location  string           // the table's location
}

// readTable reads the whole table ident through iceberg-go's scanner and
// its snapshot history; it fails if a data file is referenced twice.
func readTable(ctx context.Context, cat Catalog, ident table.Identifier) (tableState, error) {
	var st tableState
	c, err := cat(ctx)
	if err != nil {
		return st, err
	}
	defer closeCatalog(c)
	tbl, err := c.LoadTable(ctx, ident)
	if errors.Is(err, catalog.ErrNoSuchTable) || errors.Is(err, catalog.ErrNoSuchNamespace) {
		return st, nil // not created yet: empty
	}
	if err != nil {
		return st, err
	}
	meta := tbl.Metadata()
	st.location = meta.Location()
	for s := meta.CurrentSnapshot(); s != nil; {
		st.snapshots = append(st.snapshots, *s)
		if s.ParentSnapshotID == nil {
			break
		}
		s = meta.SnapshotByID(*s.ParentSnapshotID)
	}
	slices.Reverse(st.snapshots)
	if meta.CurrentSnapshot() == nil {
		return st, nil
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		return st, fmt.Errorf("plan files: %w", err)
	}
	seen := map[string]bool{}
	for _, t := range tasks {
		p := t.File.FilePath()
		if seen[p] {
			return st, fmt.Errorf("data file %s is referenced twice", p)
		}
		seen[p] = true
		st.files = append(st.files, p)
	}
	at, err := tbl.Scan(table.WithSelectedFields("split", "seq", "payload")).ToArrowTable(ctx)
	if err != nil {
		return st, fmt.Errorf("scan: %w", err)
	}
	defer at.Release()
	rdr := array.NewTableReader(at, 4096)
	defer rdr.Release()
	for rdr.Next() {
		rec := rdr.RecordBatch()
		idx := func(name string) int { return rec.Schema().FieldIndices(name)[0] }
		sp := rec.Column(idx("split")).(*array.Int32)
		sq := rec.Column(idx("seq")).(*array.Int64)
		pl := rec.Column(idx("payload"))
		for i := range int(rec.NumRows()) {
			var payload string
			switch col := pl.(type) {
			case *array.String:
				payload = col.Value(i)
			case *array.LargeString:
				payload = col.Value(i)
			default:
				return st, fmt.Errorf("payload column is %T", pl)
			}
			st.records = append(st.records, connectortest.Record{Split: int(sp.Value(i)), Seq: sq.Value(i), Payload: payload})
		}
	}
	return st, rdr.Err()
}

// localPath is the directory of a file:// location.
func localPath(t *testing.T, loc string) string {
	t.Helper()
	u, err := url.Parse(loc)
	if err != nil || u.Scheme != "file" {
		t.Fatalf("table location %q is not a file:// URL (%v)", loc, err)
	}
	return u.Path
}

// dataFilesOnDisk lists the Parquet files under dir.
func dataFilesOnDisk(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".parquet") && strings.Contains(p, "/data/") {
			out = append(out, p)
		}
		return nil
	})
	return out
}
