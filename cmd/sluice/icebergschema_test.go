package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// icebergSchemaPipeline is a file → iceberg pipeline whose table is
// created from the first records (auto-create without schema).
const icebergSchemaPipeline = `name: iceberg-schema
parallelism: 2
delivery: exactly-once
checkpoint:
  interval: 500ms
  dir: ${CHECKPOINTS}
source:
  type: file
  name: in
  options:
    paths: ["${IN}"]
sink:
  type: iceberg
  options:
    catalog: sql
    uri: ${ICEBERG_CATALOG}
    warehouse: ${ICEBERG_WAREHOUSE}
    table: shop.orders
    auto-create: true
    partition: ["bucket(2, id)"]
    add-columns: ${ADD_COLUMNS}
    compaction: 2
    file-size: 4096
`

// TestIcebergSchemaFromRecords drives the binary with a table created from
// the first records' fields (auto-create without schema), schema
// evolution (add-columns) and compaction every 2 checkpoints: 200 orders {id, customer}, then 200 with a new
// field note. PyIceberg reads every order once, with note null in the
// first 200. Then, without add-columns, a record whose id is a string and
// one with another new field fail the job with errors naming the column.
func TestIcebergSchemaFromRecords(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	py := icebergPython(t)
	work := t.TempDir()
	pipe := filepath.Join(work, "pipeline.yaml")
	if err := os.WriteFile(pipe, []byte(icebergSchemaPipeline), 0o600); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := range 400 {
		if i < 200 {
			fmt.Fprintf(&b, `{"id": %d, "customer": "c%d"}`+"\n", i, i%10)
		} else {
			fmt.Fprintf(&b, `{"id": %d, "customer": "c%d", "note": "n%d"}`+"\n", i, i%10, i)
		}
	}
	in := filepath.Join(work, "in.jsonl")
	if err := os.WriteFile(in, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	catalogFile, warehouse := filepath.Join(work, "catalog.db"), filepath.Join(work, "warehouse")
	env := func(in, ckpt, add string) []string {
		return []string{"IN=" + in, "CHECKPOINTS=" + filepath.Join(work, ckpt), "ICEBERG_CATALOG=" + catalogFile,
			"ICEBERG_WAREHOUSE=" + warehouse, "ADD_COLUMNS=" + add}
	}
	r := run(t, env(in, "ck1", "true"), "run", "--progress", "off", pipe)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	tbl := icebergRead(t, py, catalogFile, "file://"+warehouse, "shop.orders")
	col := map[string]int{}
	for i, c := range tbl.Columns {
		col[c] = i
	}
	if _, ok := col["note"]; !ok || len(tbl.Columns) != 3 {
		t.Fatalf("columns %v, want id, customer, note", tbl.Columns)
	}
	seen := map[int]int{}
	for _, row := range tbl.Rows {
		id := int(row[col["id"]].(float64))
		seen[id]++
		note := row[col["note"]]
		if (id < 200 && note != nil) || (id >= 200 && note != fmt.Sprintf("n%d", id)) || row[col["customer"]] != fmt.Sprintf("c%d", id%10) {
			t.Errorf("row %v", row)
		}
	}
	if len(seen) != 400 || len(tbl.Rows) != 400 {
		t.Errorf("%d rows, %d distinct ids, want 400 once each", len(tbl.Rows), len(seen))
	}
	var ops []string
	for _, s := range tbl.Snapshots {
		ops = append(ops, s.Operation+" "+s.Props["sluice.compacted-checkpoints"])
	}
	t.Logf("snapshots: %v; %d data files", ops, len(tbl.Files))
	for _, bad := range []struct{ line, want string }{
		{`{"id": "x1", "customer": "c"}`, `column "id"`},
		{`{"id": 1000, "region": "eu"}`, `field "region" is not a column`},
	} {
		f := filepath.Join(work, "bad.jsonl")
		if err := os.WriteFile(f, []byte(bad.line+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		r := run(t, env(f, "ck-bad-"+bad.want[:5], "false"), "run", "--progress", "off", pipe)
		if r.code == 0 || !strings.Contains(r.stderr, bad.want) {
			t.Errorf("record %s: exit %d, want a failure naming %s\n%s", bad.line, r.code, bad.want, r.stderr)
		}
	}
}
