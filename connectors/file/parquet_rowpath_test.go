package file

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
)

// rowPathParquet is the writer ParquetBulk had before it wrote columns
// directly (session 9): each record shredded into one parquet.Row through
// the generic coercions (leafValue, no per-type fast path), and the rows
// written with parquet-go's row path (GenericWriter.WriteRows), row
// groups ended at the same size. TestParquetColumnsMatchRowPath compares
// the column writer's files with its files.
type rowPathParquet struct{ f *ParquetBulkFormat }

func (r rowPathParquet) NewWriter(w io.Writer) (BulkWriter[map[string]any], error) {
	if r.f.err != nil {
		return nil, r.f.err
	}
	return &rowPathWriter{
		f:    r.f,
		w:    parquet.NewGenericWriter[any](w, r.f.schema, parquet.Compression(r.f.cfg.codec)),
		conv: &parquetWriter{f: r.f},
		cols: make([][]parquet.Value, r.f.numCols),
	}, nil
}

type rowPathWriter struct {
	f    *ParquetBulkFormat
	w    *parquet.GenericWriter[any]
	conv *parquetWriter // for leafValue and its byte buffer only
	cols [][]parquet.Value
	size int64
}

func (r *rowPathWriter) Write(v map[string]any) error {
	for i := range r.cols {
		r.cols[i] = r.cols[i][:0]
	}
	if err := r.shred(r.f.root, v, 0, 0, 0, ""); err != nil {
		return fmt.Errorf("file: Parquet record: %w", err)
	}
	var row parquet.Row
	for _, c := range r.cols {
		row = append(row, c...)
	}
	for _, v := range row {
		r.size += int64(valueSize(v))
	}
	if _, err := r.w.WriteRows([]parquet.Row{row}); err != nil {
		return err
	}
	r.conv.strs = r.conv.strs[:0]
	if r.size >= r.f.cfg.rowGroupSize {
		r.size = 0
		return r.w.Flush()
	}
	return nil
}

func (r *rowPathWriter) Finish() error { return r.w.Close() }

func (r *rowPathWriter) nulls(n *pqNode, rep, def int) {
	for _, c := range n.leaves {
		r.cols[c] = append(r.cols[c], parquet.NullValue().Level(rep, def, c))
	}
}

// shred is parquetWriter.shred of session 9, with every leaf coerced by
// leafValue.
func (r *rowPathWriter) shred(n *pqNode, v any, rep, def, depth int, path string) error {
	e := &r.conv.enc
	if v == nil {
		if n.optional {
			r.nulls(n, rep, def)
			return nil
		}
		return e.fail(path, "null for a required column")
	}
	if n.optional {
		def++
	}
	switch n.kind {
	case pqGroup:
		m, ok := v.(map[string]any)
		if !ok {
			return e.fail(path, "%s for a record", describe(v))
		}
		for _, f := range n.fields {
			fp := fieldPath(path, f.name)
			fv, ok := m[f.name]
			if !ok && f.field != nil && f.field.HasDefault() {
				d, err := avroDefault(f.field)
				if err != nil {
					return e.fail(fp, "default: %v", err)
				}
				fv, ok = d, true
			}
			if !ok && !f.optional {
				return e.fail(fp, "missing, and the schema gives no default")
			}
			if err := r.shred(f, fv, rep, def, depth, fp); err != nil {
				return err
			}
		}
		return nil
	case pqList:
		list, ok := v.([]any)
		if !ok {
			return e.fail(path, "%s for an array", describe(v))
		}
		if len(list) == 0 {
			r.nulls(n, rep, def)
			return nil
		}
		for i, el := range list {
			rp := rep
			if i > 0 {
				rp = depth + 1
			}
			if err := r.shred(n.elem, el, rp, def+1, depth+1, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	case pqMap:
		m, ok := v.(map[string]any)
		if !ok {
			return e.fail(path, "%s for a map", describe(v))
		}
		if len(m) == 0 {
			r.nulls(n, rep, def)
			return nil
		}
		for i, k := range slices.Sorted(maps.Keys(m)) {
			rp := rep
			if i > 0 {
				rp = depth + 1
			}
			if err := r.shred(n.key, k, rp, def+1, depth+1, path); err != nil {
				return err
			}
			if err := r.shred(n.elem, m[k], rp, def+1, depth+1, fmt.Sprintf("%s[%q]", path, k)); err != nil {
				return err
			}
		}
		return nil
	}
	pv, err := r.conv.leafValue(n.avro, v, path)
	if err != nil {
		return err
	}
	r.cols[n.col] = append(r.cols[n.col], pv.Level(rep, def, n.col))
	return nil
}

// leafFields are fields of every leaf type, each required and optional,
// with every logical type, and defaults.
const leafFields = `
 {"name":"b","type":"boolean"},{"name":"ob","type":["null","boolean"]},
 {"name":"i","type":"int"},{"name":"oi","type":["null","int"]},
 {"name":"l","type":"long"},{"name":"ol","type":["null","long"]},
 {"name":"f","type":"float"},{"name":"of","type":["null","float"]},
 {"name":"d","type":"double"},{"name":"od","type":["null","double"]},
 {"name":"s","type":"string"},{"name":"os","type":["null","string"]},
 {"name":"e","type":{"type":"enum","name":"Color","symbols":["RED","GREEN","BLUE"]}},
 {"name":"oe","type":["null",{"type":"enum","name":"Shade","symbols":["DARK","LIGHT"]}]},
 {"name":"by","type":"bytes"},{"name":"oby","type":["null","bytes"]},
 {"name":"fx","type":{"type":"fixed","name":"F4","size":4}},
 {"name":"ofx","type":["null",{"type":"fixed","name":"F2","size":2}]},
 {"name":"uu","type":{"type":"string","logicalType":"uuid"}},
 {"name":"tsm","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"otsm","type":["null",{"type":"long","logicalType":"timestamp-millis"}]},
 {"name":"tsu","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"otsu","type":["null",{"type":"long","logicalType":"timestamp-micros"}]},
 {"name":"ltsm","type":{"type":"long","logicalType":"local-timestamp-millis"}},
 {"name":"ltsu","type":["null",{"type":"long","logicalType":"local-timestamp-micros"}]},
 {"name":"day","type":{"type":"int","logicalType":"date"}},
 {"name":"oday","type":["null",{"type":"int","logicalType":"date"}]},
 {"name":"tm","type":{"type":"int","logicalType":"time-millis"}},
 {"name":"tu","type":["null",{"type":"long","logicalType":"time-micros"}]},
 {"name":"dec6","type":{"type":"bytes","logicalType":"decimal","precision":6,"scale":2}},
 {"name":"dec15","type":["null",{"type":"bytes","logicalType":"decimal","precision":15,"scale":3}]},
 {"name":"dec30","type":{"type":"fixed","name":"D30","size":13,"logicalType":"decimal","precision":30,"scale":4}},
 {"name":"dl","type":"long","default":42},
 {"name":"ds","type":["null","string"],"default":null},
 {"name":"dstr","type":"string","default":"dflt"}`

// typedLeafRecord is leafRecord(i), except that in runs of 700 records
// (every other run) the required boolean, long, double and timestamp
// fields all hold the Go type of the value contract, so that whole
// batches of those columns take the writer's typed path (a column buffer
// written with one typed call, see flatStage.writeTyped) and others mix
// it with values of other Go types, defaults and invalid records.
func typedLeafRecord(i int) map[string]any {
	m := leafRecord(i)
	if i/700%2 == 0 {
		ts := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC).Add(time.Duration(i) * 1_234_567 * time.Microsecond)
		m["b"], m["l"], m["d"], m["dl"] = i%3 == 0, int64(i)<<33-int64(i), float64(i)/3-7, int64(-i)
		m["tsm"], m["tsu"], m["ltsm"] = ts, ts.Add(time.Microsecond), ts.Add(-time.Hour)
	}
	return m
}

// leafRecord is record i of leafFields: each field takes, by turns, each
// Go type it accepts (the value contract's and the coercions'), nulls,
// and missing fields.
func leafRecord(i int) map[string]any {
	ts := time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC).Add(time.Duration(i) * 1_234_567 * time.Microsecond)
	pick := func(vs ...any) any { return vs[i%len(vs)] }
	opt := func(v any) any {
		if i%4 == 1 {
			return nil
		}
		return v
	}
	s := fmt.Sprintf("v-%d", i)
	if i%37 == 0 {
		s = strings.Repeat("x", 3000+i) // a few long values: batches bounded by bytes
	}
	m := map[string]any{
		"b": i%2 == 0, "ob": opt(i%3 == 0),
		"i": pick(int64(i-500), int(i), int32(-i), float64(i), json.Number(fmt.Sprint(i*3))), "oi": opt(int64(i * 7)),
		"l": pick(int64(i)<<33, int(-i), float64(i*1000), json.Number("-9007199254740993")), "ol": opt(int64(-i)),
		"f": pick(float64(i)/3, float32(i)/7, int64(i), json.Number("2.5")), "of": opt(float64(i) * 1e30),
		"d": pick(float64(i)/3, float32(i)/7, int64(-i), json.Number("1e-300")), "od": opt(float64(i) / 1e9),
		"s":   pick(s, json.Number("12.50"), ts, s),
		"os":  opt(pick("", s)),
		"e":   pick("RED", "GREEN", "BLUE"),
		"oe":  opt(pick("DARK", "LIGHT")),
		"by":  pick([]byte(s), s, []byte{}),
		"oby": opt([]byte{byte(i), 0, 255}),
		"fx":  pick([]byte{1, 2, 3, byte(i)}, "abcd"),
		"ofx": opt(pick([]byte{9, byte(i)}, "zz")),
		"uu":  fmt.Sprintf("00000000-0000-4000-8000-%012d", i),
		"tsm": pick(ts, ts.Format(time.RFC3339Nano), ts.UnixMilli(), ts.In(time.FixedZone("x", 3600))), "otsm": opt(ts),
		"tsu": pick(ts, ts.Format(time.RFC3339Nano), ts.UnixMicro()), "otsu": opt(pick(ts, ts.UnixMicro())),
		"ltsm": pick(ts, ts.UnixMilli()), "ltsu": opt(ts),
		"day": pick(ts, "2026-12-02", int64(i)), "oday": opt(ts.Format(time.RFC3339)),
		"tm": pick(int64(i*1000), int32(i)), "tu": opt(int64(i) * 1_000_001),
		"dec6":  pick(json.Number(fmt.Sprintf("%d.%02d", i, i%100)), float64(i)/4, int64(-i)),
		"dec15": opt(pick(json.Number(fmt.Sprintf("-%d.125", i)), "1.5")),
		"dec30": pick(json.Number(fmt.Sprintf("12345678901234567890.%04d", i%10000)), int64(i)),
	}
	if i%5 != 0 {
		m["dl"] = int64(i)
	}
	if i%6 == 0 {
		m["ds"] = s
	}
	if i%7 != 0 {
		m["dstr"] = pick("a", "")
	}
	return m
}

// badRecord is record i made invalid in a field late in the schema (the
// earlier fields already converted), or, for a nested schema, deep in a
// list.
func badRecord(i int, nested bool) map[string]any {
	m := leafRecord(i)
	switch i % 4 {
	case 0:
		m["dec30"] = "not a number"
	case 1:
		m["dstr"] = int64(3)
	case 2:
		delete(m, "uu")
	case 3:
		m["e"] = "PURPLE"
	}
	if nested && i%2 == 0 {
		m = map[string]any{"r": leafRecord(i), "xs": []any{int64(1), "two"}, "kv": map[string]any{}}
	}
	return m
}

// TestParquetColumnsMatchRowPath writes the same records — every leaf
// type, required and optional, every logical type, each Go type a field
// accepts, nulls, missing fields with defaults, long strings, and invalid
// records in between (rejected by both) — with ParquetBulk and with the
// row path it replaced, flat and nested, and checks that the two files
// hold the same schema, row groups of the same sizes, the same rows
// (physical values and levels), and decode to the same records.
func TestParquetColumnsMatchRowPath(t *testing.T) {
	for _, c := range matchCases() {
		for _, codec := range []string{"snappy", "uncompressed"} {
			t.Run(c.name+"/"+codec, func(t *testing.T) {
				f := ParquetBulk(c.schema, ParquetCompression(codec), ParquetRowGroupSize(300_000))
				if c.name != "nested" && !f.flat {
					t.Fatal("the flat schema is not flat")
				}
				cols, rows, want := writeColumnsAndRows(t, f, c.rec, c.name == "nested", 5000)
				comparePhysical(t, cols, rows, len(want))
				got, exp := readParquetBytes(t, cols), readParquetBytes(t, rows)
				if len(got) != len(want) || len(exp) != len(want) {
					t.Fatalf("decoded %d and %d records, want %d", len(got), len(exp), len(want))
				}
				for i := range got {
					if g, e := canon(got[i]), canon(exp[i]); g != e {
						t.Fatalf("record %d decodes to\n%s\nrow path:\n%s", i, g, e)
					}
				}
			})
		}
	}
}

type matchCase struct {
	name   string
	schema string
	rec    func(i int) map[string]any
}

// matchCases are a flat schema of leafFields and a nested one (the same
// leaves in a record and an optional record, lists, a map of lists).
func matchCases() []matchCase {
	flat := `{"type":"record","name":"Flat","fields":[` + leafFields + `]}`
	nested := `{"type":"record","name":"Nested","fields":[
	 {"name":"r","type":{"type":"record","name":"Leaves","fields":[` + leafFields + `]}},
	 {"name":"or","type":["null","Leaves"]},
	 {"name":"xs","type":{"type":"array","items":"long"}},
	 {"name":"oxs","type":["null",{"type":"array","items":["null","string"]}]},
	 {"name":"kv","type":{"type":"map","values":{"type":"array","items":"double"}}},
	 {"name":"id","type":"long"}]}`
	return []matchCase{
		{"flat", flat, leafRecord},
		{"flat-typed", flat, typedLeafRecord},
		{"nested", nested, func(i int) map[string]any {
			m := map[string]any{"r": leafRecord(i), "id": int64(i),
				"xs": []any{int64(i), int64(-i)}[:i%3%2+i%3/2], "kv": map[string]any{}}
			if i%3 == 0 {
				m["or"] = leafRecord(i + 1)
				m["oxs"] = []any{nil, fmt.Sprint(i)}
				m["kv"] = map[string]any{"a": []any{1.5}, "b": []any{}}
			}
			return m
		}},
	}
}

// writeColumnsAndRows writes n records of rec, every 101st made invalid
// by badRecord, with f and with rowPathParquet{f}; both must accept and
// reject the same records with the same errors. It returns both files
// and the records accepted.
func writeColumnsAndRows(t *testing.T, f *ParquetBulkFormat, rec func(int) map[string]any, nested bool, n int) (cols, rows []byte, want []map[string]any) {
	t.Helper()
	if err := f.Err(); err != nil {
		t.Fatal(err)
	}
	var cb, rb bytes.Buffer
	cw, err := f.NewWriter(&cb)
	if err != nil {
		t.Fatal(err)
	}
	rw, err := rowPathParquet{f}.NewWriter(&rb)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		r := rec(i)
		bad := i%101 == 50
		if bad {
			r = badRecord(i, nested)
		}
		e1, e2 := cw.Write(r), rw.Write(r)
		if (e1 == nil) != (e2 == nil) || e1 != nil && e1.Error() != e2.Error() {
			t.Fatalf("record %d: column writer: %v; row path: %v", i, e1, e2)
		}
		if bad != (e1 != nil) {
			t.Fatalf("record %d (invalid: %t): %v", i, bad, e1)
		}
		if e1 == nil {
			want = append(want, r)
		}
	}
	if err := cw.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := rw.Finish(); err != nil {
		t.Fatal(err)
	}
	return cb.Bytes(), rb.Bytes(), want
}

// comparePhysical checks that two Parquet files have the same schema, row
// groups of the same sizes, and the same rows.
func comparePhysical(t *testing.T, a, b []byte, rows int) {
	t.Helper()
	fa, err := parquet.OpenFile(bytes.NewReader(a), int64(len(a)))
	if err != nil {
		t.Fatal(err)
	}
	fb, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	if sa, sb := fa.Schema().String(), fb.Schema().String(); sa != sb {
		t.Fatalf("schema\n%s\nrow path's\n%s", sa, sb)
	}
	if fa.NumRows() != int64(rows) || fb.NumRows() != int64(rows) {
		t.Fatalf("%d and %d rows, want %d", fa.NumRows(), fb.NumRows(), rows)
	}
	ga, gb := fa.RowGroups(), fb.RowGroups()
	if len(ga) < 2 {
		t.Fatalf("%d row groups: the test wants several", len(ga))
	}
	if len(ga) != len(gb) {
		t.Fatalf("%d row groups, row path %d", len(ga), len(gb))
	}
	for i := range ga {
		if ga[i].NumRows() != gb[i].NumRows() {
			t.Fatalf("row group %d: %d rows, row path %d", i, ga[i].NumRows(), gb[i].NumRows())
		}
	}
	ra, rb := parquet.NewReader(bytes.NewReader(a)), parquet.NewReader(bytes.NewReader(b))
	defer ra.Close()
	defer rb.Close()
	bufA, bufB := make([]parquet.Row, 64), make([]parquet.Row, 64)
	for n := 0; n < rows; {
		na, errA := ra.ReadRows(bufA)
		nb, errB := rb.ReadRows(bufB[:na])
		if na == 0 || na != nb {
			t.Fatalf("row %d: read %d (%v) and %d (%v) rows", n, na, errA, nb, errB)
		}
		for i := range na {
			if !bufA[i].Equal(bufB[i]) {
				t.Fatalf("row %d:\n%v\nrow path:\n%v", n+i, bufA[i], bufB[i])
			}
		}
		n += na
		if (errA != nil && !errors.Is(errA, io.EOF)) || (errB != nil && !errors.Is(errB, io.EOF)) {
			t.Fatalf("row %d: %v, %v", n, errA, errB)
		}
	}
}

func readParquetBytes(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	rr, err := ParquetFile().(RandomAccessFormat[map[string]any]).NewReaderAt(bytes.NewReader(b), int64(len(b)), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for range 1 << 20 {
		v, _, err := rr.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	t.Fatal("no end")
	return nil
}
