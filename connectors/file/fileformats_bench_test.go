package file

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
)

// procCPU is this process's user + system CPU time (the garbage
// collector's included).
func procCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchRecordSchema is a small record: five fields, about 40 bytes of
// values.
const benchRecordSchema = `{"type":"record","name":"Click","fields":[
 {"name":"id","type":"long"},
 {"name":"user","type":"string"},
 {"name":"score","type":"double"},
 {"name":"ok","type":"boolean"},
 {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}}]}`

func benchRecord(i int) map[string]any {
	return map[string]any{
		"id":    int64(i),
		"user":  fmt.Sprintf("user-%04d", i%9973),
		"score": float64(i%1000) / 8,
		"ok":    i%3 == 0,
		"ts":    time.UnixMilli(1_796_000_000_000 + int64(i)).UTC(),
	}
}

// BenchmarkFileFormats writes and reads 1M small records (100k with
// -short) with each bulk format and its source format, in memory, and
// reports rows/s, bytes per row and (writes) CPU seconds per million
// rows; JSON lines (JSONLinesFormat and JSONLines[map[string]any]) are
// the reference in the same run.
//
//	go test -run '^$' -bench FileFormats -benchtime 3x ./connectors/file/
func BenchmarkFileFormats(b *testing.B) {
	rows := 1_000_000
	if testing.Short() {
		rows = 100_000
	}
	recs := make([]map[string]any, rows)
	for i := range recs {
		recs[i] = benchRecord(i)
	}
	type fmtCase struct {
		name string
		bulk BulkFormat[map[string]any]
		read Format[map[string]any]
	}
	cases := []fmtCase{
		{"avro-snappy", AvroBulk(benchRecordSchema), AvroFile("")},
		{"avro-null", AvroBulk(benchRecordSchema, AvroCodec("null")), AvroFile("")},
		{"avro-deflate", AvroBulk(benchRecordSchema, AvroCodec("deflate")), AvroFile("")},
		{"avro-zstandard", AvroBulk(benchRecordSchema, AvroCodec("zstandard")), AvroFile("")},
		{"parquet-snappy", ParquetBulk(benchRecordSchema), ParquetFile()},
		{"parquet-zstd", ParquetBulk(benchRecordSchema, ParquetCompression("zstd")), ParquetFile()},
		{"jsonlines", GzipBulk(JSONLinesFormat[map[string]any]()), nil},
		{"parquet-handwritten", handParquet{}, ParquetFile()},
	}
	for _, c := range cases {
		var file bytes.Buffer
		write := func() {
			file.Reset()
			var w BulkWriter[map[string]any]
			var err error
			if c.read == nil {
				w, err = rowBulk[map[string]any]{JSONLinesFormat[map[string]any]()}.NewWriter(&file)
			} else {
				w, err = c.bulk.NewWriter(&file)
			}
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range recs {
				if err := w.Write(r); err != nil {
					b.Fatal(err)
				}
			}
			if err := w.Finish(); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(c.name+"/write", func(b *testing.B) {
			cpu := procCPU()
			for b.Loop() {
				write()
			}
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
			b.ReportMetric((procCPU()-cpu).Seconds()/(float64(rows)*float64(b.N)/1e6), "cpu-s/Mrows")
			b.ReportMetric(float64(file.Len())/float64(rows), "B/row")
		})
		if file.Len() == 0 {
			write()
		}
		data := bytes.Clone(file.Bytes())
		b.Run(c.name+"/read", func(b *testing.B) {
			for b.Loop() {
				var rr RecordReader[map[string]any]
				var err error
				switch f := c.read.(type) {
				case RandomAccessFormat[map[string]any]:
					rr, err = f.NewReaderAt(bytes.NewReader(data), int64(len(data)), 0, 0)
				case nil:
					rr, err = JSONLines[map[string]any]().NewReader(bytes.NewReader(data), 0)
				}
				if err != nil {
					b.Fatal(err)
				}
				n := 0
				for {
					_, _, err := rr.Read()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						b.Fatal(err)
					}
					n++
				}
				if n != rows {
					b.Fatalf("read %d rows, want %d", n, rows)
				}
			}
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}

// rowBulk writes a row format without compression, for the JSON lines
// reference.
type rowBulk[T any] struct{ row RowFormat[T] }

func (r rowBulk[T]) NewWriter(w io.Writer) (BulkWriter[T], error) {
	return &rowBulkWriter[T]{row: r.row, w: w}, nil
}

type rowBulkWriter[T any] struct {
	row RowFormat[T]
	w   io.Writer
	buf []byte
}

func (r *rowBulkWriter[T]) Write(v T) error {
	var err error
	r.buf, err = r.row.AppendRecord(r.buf[:0], v)
	if err != nil {
		return err
	}
	_, err = r.w.Write(r.buf)
	return err
}

func (r *rowBulkWriter[T]) Finish() error { return nil }

// benchRow is the Parquet row of benchRecordSchema for the hand-written
// parquet-go baseline: the same columns, types and compression (snappy)
// as ParquetBulk(benchRecordSchema) writes.
type benchRow struct {
	ID    int64     `parquet:"id"`
	OK    bool      `parquet:"ok"`
	Score float64   `parquet:"score"`
	TS    time.Time `parquet:"ts,timestamp(millisecond)"`
	User  string    `parquet:"user"`
}

// handParquet is the baseline: what a user would write by hand with
// parquet-go for these records — a type switch per field into a struct,
// and parquet.GenericWriter[benchRow] in batches.
type handParquet struct{}

func (handParquet) NewWriter(w io.Writer) (BulkWriter[map[string]any], error) {
	return &handParquetWriter{w: parquet.NewGenericWriter[benchRow](w, parquet.Compression(&parquet.Snappy)), rows: make([]benchRow, 0, 1024)}, nil
}

type handParquetWriter struct {
	w    *parquet.GenericWriter[benchRow]
	rows []benchRow
}

func (h *handParquetWriter) Write(m map[string]any) error {
	id, _ := m["id"].(int64)
	user, _ := m["user"].(string)
	score, _ := m["score"].(float64)
	ok, _ := m["ok"].(bool)
	ts, _ := m["ts"].(time.Time)
	h.rows = append(h.rows, benchRow{ID: id, User: user, Score: score, OK: ok, TS: ts})
	if len(h.rows) == cap(h.rows) {
		return h.flush()
	}
	return nil
}

func (h *handParquetWriter) flush() error {
	_, err := h.w.Write(h.rows)
	h.rows = h.rows[:0]
	return err
}

func (h *handParquetWriter) Finish() error {
	if err := h.flush(); err != nil {
		return err
	}
	return h.w.Close()
}

// TestParquetFlatBatches writes records of a flat schema through the
// column writer in batches — strings longer than the batch's string buffer,
// nulls, a default, several row groups — and reads them back equal.
func TestParquetFlatBatches(t *testing.T) {
	const schema = `{"type":"record","name":"R","fields":[
 {"name":"id","type":"long"},
 {"name":"s","type":["null","string"]},
 {"name":"d","type":"string","default":"dflt"},
 {"name":"n","type":"int"}]}`
	var buf bytes.Buffer
	w, err := ParquetBulk(schema, ParquetRowGroupSize(50_000)).NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	const rows = 2000
	want := make([]map[string]any, rows)
	for i := range rows {
		rec := map[string]any{"id": int64(i), "n": int32(i % 7)}
		switch {
		case i%97 == 0:
			rec["s"] = strings.Repeat(string(rune('a'+i%26)), 70_000+i)
		case i%5 == 0:
			rec["s"] = nil
		default:
			rec["s"] = fmt.Sprintf("s-%d", i)
		}
		if i%3 == 0 {
			rec["d"] = fmt.Sprint("d", i)
		}
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		want[i] = rec
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	rr, err := ParquetFile().(RandomAccessFormat[map[string]any]).NewReaderAt(bytes.NewReader(buf.Bytes()), int64(buf.Len()), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		got, _, err := rr.Read()
		if errors.Is(err, io.EOF) {
			if i != rows {
				t.Fatalf("read %d rows, want %d", i, rows)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		w := want[i]
		d := "dflt"
		if x, ok := w["d"]; ok {
			d = x.(string)
		}
		if got["id"] != w["id"] || got["s"] != w["s"] || got["d"] != d || fmt.Sprint(got["n"]) != fmt.Sprint(w["n"]) {
			t.Fatalf("row %d: got id=%v n=%v d=%v s(%d)=%.20v; want id=%v n=%v d=%v s=%.20v", i, got["id"], got["n"], got["d"], len(fmt.Sprint(got["s"])), got["s"], w["id"], w["n"], d, w["s"])
		}
	}
}
