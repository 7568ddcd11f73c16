package file

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hamba/avro/v2/ocf"
	"github.com/parquet-go/parquet-go"
)

// readAll reads every record of the file at path with a random-access
// format.
func readAll(t *testing.T, path string, f Format[map[string]any]) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := f.(RandomAccessFormat[map[string]any]).NewReaderAt(bytes.NewReader(b), int64(len(b)), 0, 0)
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

// TestAvroFileReadsHambaFiles reads container files written by hamba's
// ocf encoder with every codec and several blocks.
func TestAvroFileReadsHambaFiles(t *testing.T) {
	schema := `{"type":"record","name":"R","fields":[
	 {"name":"id","type":"long"},{"name":"s","type":["null","string"]},
	 {"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},
	 {"name":"xs","type":{"type":"array","items":"int"}}]}`
	type rec struct {
		ID int64     `avro:"id"`
		S  *string   `avro:"s"`
		TS time.Time `avro:"ts"`
		XS []int     `avro:"xs"`
	}
	ts := time.Date(2026, 12, 1, 7, 0, 0, 123456000, time.UTC)
	for _, codec := range []ocf.CodecName{ocf.Null, ocf.Deflate, ocf.Snappy, ocf.ZStandard} {
		t.Run(string(codec), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "h.avro")
			f, _ := os.Create(p)
			enc, err := ocf.NewEncoder(schema, f, ocf.WithCodec(codec), ocf.WithBlockLength(7))
			if err != nil {
				t.Fatal(err)
			}
			s := "x"
			for i := range 50 {
				r := rec{ID: int64(i), TS: ts, XS: []int{i, -i}}
				if i%2 == 0 {
					r.S = &s
				}
				if err := enc.Encode(r); err != nil {
					t.Fatal(err)
				}
			}
			if err := enc.Close(); err != nil {
				t.Fatal(err)
			}
			f.Close()
			got := readAll(t, p, AvroFile(""))
			if len(got) != 50 {
				t.Fatalf("%d records, want 50", len(got))
			}
			for i, m := range got {
				var want any
				if i%2 == 0 {
					want = "x"
				}
				if m["id"] != int64(i) || m["s"] != want || !m["ts"].(time.Time).Equal(ts) ||
					canon(m["xs"]) != canon([]any{int64(i), int64(-i)}) {
					t.Fatalf("record %d: %s", i, canon(m))
				}
			}
		})
	}
}

// TestParquetFileReadsParquetGoFiles reads a file that parquet-go writes
// from Go structs — optional fields, repeated fields without a LIST
// annotation, a LIST, a MAP, a nested group, timestamps, unsigned and
// small integers, several row groups — into the value contract.
func TestParquetFileReadsParquetGoFiles(t *testing.T) {
	type inner struct {
		A int32  `parquet:"a"`
		B []byte `parquet:"b"`
	}
	type row struct {
		ID     int64            `parquet:"id"`
		Name   *string          `parquet:"name,optional"`
		Tags   []string         `parquet:"tags"`
		List   []int32          `parquet:"list,list"`
		Attrs  map[string]int64 `parquet:"attrs"`
		In     inner            `parquet:"in"`
		Opt    *inner           `parquet:"opt,optional"`
		TS     time.Time        `parquet:"ts,timestamp(microsecond)"`
		U      uint32           `parquet:"u"`
		Small  int8             `parquet:"small"`
		Ratio  float32          `parquet:"ratio"`
		Flag   bool             `parquet:"flag"`
		Inners []inner          `parquet:"inners"`
	}
	ts := time.Date(2026, 12, 1, 7, 0, 0, 5000, time.UTC)
	p := filepath.Join(t.TempDir(), "g.parquet")
	f, _ := os.Create(p)
	w := parquet.NewGenericWriter[row](f, parquet.MaxRowsPerRowGroup(7))
	n := "n"
	var rows []row
	for i := range 30 {
		r := row{ID: int64(i), Tags: []string{"a", "b"}[:i%3%2+i%3/2], List: []int32{int32(i)}, Attrs: map[string]int64{"k": int64(i)},
			In: inner{A: int32(-i), B: []byte{byte(i)}}, TS: ts, U: 4_000_000_000, Small: -3, Ratio: 0.5, Flag: i%2 == 0,
			Inners: []inner{{A: 1}, {A: 2, B: []byte("z")}}[:i%3]}
		if i%2 == 0 {
			r.Name = &n
			r.Opt = &inner{A: 9}
		}
		rows = append(rows, r)
	}
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got := readAll(t, p, ParquetFile())
	if len(got) != len(rows) {
		t.Fatalf("%d rows, want %d", len(got), len(rows))
	}
	for i, r := range rows {
		want := map[string]any{
			"id": r.ID, "name": nil, "tags": []any{}, "list": []any{int64(r.List[0])}, "attrs": map[string]any{"k": int64(i)},
			"in": map[string]any{"a": int64(r.In.A), "b": r.In.B}, "opt": nil, "ts": ts, "u": int64(4_000_000_000),
			"small": int64(-3), "ratio": 0.5, "flag": r.Flag, "inners": []any{},
		}
		for _, tag := range r.Tags {
			want["tags"] = append(want["tags"].([]any), tag)
		}
		for _, in := range r.Inners {
			b := in.B
			if b == nil {
				b = []byte{}
			}
			want["inners"] = append(want["inners"].([]any), map[string]any{"a": int64(in.A), "b": b})
		}
		if r.Name != nil {
			want["name"] = "n"
			want["opt"] = map[string]any{"a": int64(9), "b": []byte{}}
		}
		if canon(got[i]) != canon(want) {
			t.Fatalf("row %d:\n%s\nwant\n%s", i, canon(got[i]), canon(want))
		}
	}
}

// TestFileFormatsNested round-trips deeply nested values through both
// bulk formats and their source formats: lists of lists, lists of
// records with optional fields and lists, maps of lists, optional lists
// and maps, empty and null at every level.
func TestFileFormatsNested(t *testing.T) {
	schema := `{"type":"record","name":"N","fields":[
	 {"name":"ll","type":{"type":"array","items":{"type":"array","items":"long"}}},
	 {"name":"lr","type":{"type":"array","items":{"type":"record","name":"E","fields":[
	   {"name":"k","type":["null","string"]},
	   {"name":"vs","type":{"type":"array","items":["null","double"]}}]}}},
	 {"name":"ml","type":{"type":"map","values":{"type":"array","items":"string"}}},
	 {"name":"mo","type":["null",{"type":"map","values":["null","long"]}]},
	 {"name":"ol","type":["null",{"type":"array","items":"long"}]}]}`
	recs := []map[string]any{
		{"ll": []any{[]any{int64(1), int64(2)}, []any{}, []any{int64(3)}},
			"lr": []any{map[string]any{"k": "a", "vs": []any{1.5, nil}}, map[string]any{"k": nil, "vs": []any{}}},
			"ml": map[string]any{"x": []any{"p"}, "y": []any{}}, "mo": map[string]any{"a": nil, "b": int64(2)}, "ol": []any{int64(9)}},
		{"ll": []any{}, "lr": []any{}, "ml": map[string]any{}, "mo": nil, "ol": nil},
		{"ll": []any{[]any{}}, "lr": []any{map[string]any{"k": "z", "vs": []any{nil, nil}}}, "ml": map[string]any{"": []any{"", "q"}},
			"mo": map[string]any{}, "ol": []any{}},
	}
	for _, c := range []struct {
		name string
		bulk BulkFormat[map[string]any]
		read Format[map[string]any]
	}{{"avro", AvroBulk(schema), AvroFile("")}, {"parquet", ParquetBulk(schema), ParquetFile()}} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "n")
			f, _ := os.Create(p)
			w, err := c.bulk.NewWriter(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				if err := w.Write(r); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Finish(); err != nil {
				t.Fatal(err)
			}
			f.Close()
			got := readAll(t, p, c.read)
			if len(got) != len(recs) {
				t.Fatalf("%d records, want %d", len(got), len(recs))
			}
			for i := range recs {
				if canon(got[i]) != canon(recs[i]) {
					t.Errorf("record %d:\n%s\nwant\n%s", i, canon(got[i]), canon(recs[i]))
				}
			}
		})
	}
}

// FuzzFileFormatsRead reads arbitrary bytes (seeded with real files and
// damaged copies) with AvroFile and ParquetFile: reading ends with
// io.EOF or an error, never a panic or an endless loop. The seeds are
// large; fuzz with -fuzzminimizetime 1x, or minimizing them takes the
// whole run.
func FuzzFileFormatsRead(f *testing.F) {
	lines := testLines("z", 30)
	for _, bulk := range []BulkFormat[map[string]any]{AvroBulk(eventSchema, AvroBlockSize(500), AvroCodec("null")), AvroBulk(eventSchema), ParquetBulk(eventSchema)} {
		var buf bytes.Buffer
		w, err := bulk.NewWriter(&buf)
		if err != nil {
			f.Fatal(err)
		}
		for _, l := range lines {
			if err := w.Write(eventOf(l)); err != nil {
				f.Fatal(err)
			}
		}
		if err := w.Finish(); err != nil {
			f.Fatal(err)
		}
		b := buf.Bytes()
		f.Add(bytes.Clone(b))
		f.Add(bytes.Clone(b[:len(b)/2]))
		c := bytes.Clone(b)
		c[len(c)/2] ^= 0xff
		f.Add(c)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, format := range []Format[map[string]any]{AvroFile(""), ParquetFile()} {
			rr, err := format.(RandomAccessFormat[map[string]any]).NewReaderAt(bytes.NewReader(data), int64(len(data)), 0, 0)
			if err != nil {
				continue
			}
			for range len(data) + 2 {
				if _, _, err := rr.Read(); err != nil {
					break
				}
			}
		}
	})
}

// TestFloatReadsShortest reads Avro float and Parquet FLOAT values as the
// float64 of their shortest decimal form: 0.1, not 0.10000000149011612.
func TestFloatReadsShortest(t *testing.T) {
	schema := `{"type":"record","name":"F","fields":[{"name":"f","type":"float"}]}`
	for _, c := range []struct {
		bulk BulkFormat[map[string]any]
		read Format[map[string]any]
	}{{AvroBulk(schema), AvroFile("")}, {ParquetBulk(schema), ParquetFile()}} {
		p := filepath.Join(t.TempDir(), "f")
		f, _ := os.Create(p)
		w, err := c.bulk.NewWriter(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []float64{0.1, 1e-7, 3.4028234663852886e+38, -2.5} {
			if err := w.Write(map[string]any{"f": v}); err != nil {
				t.Fatal(err)
			}
		}
		_ = w.Finish()
		f.Close()
		var got []float64
		for _, m := range readAll(t, p, c.read) {
			got = append(got, m["f"].(float64))
		}
		if want := []float64{0.1, 1e-7, 3.4028235e+38, -2.5}; !slices.Equal(got, want) {
			t.Errorf("%T: read %v, want %v", c.read, got, want)
		}
	}
}

// TestFileFormatsCoercions writes values of other kinds than the schema's
// that convert without loss and reads them back converted.
func TestFileFormatsCoercions(t *testing.T) {
	schema := `{"type":"record","name":"C","fields":[
	 {"name":"i","type":"int"},{"name":"l","type":"long"},{"name":"d","type":"double"},
	 {"name":"s","type":"string"},{"name":"s2","type":"string"},{"name":"b","type":"bytes"},
	 {"name":"ts","type":{"type":"long","logicalType":"timestamp-micros"}},
	 {"name":"day","type":{"type":"int","logicalType":"date"}},
	 {"name":"dec","type":{"type":"bytes","logicalType":"decimal","precision":6,"scale":3}},
	 {"name":"def","type":"long","default":42},{"name":"opt","type":["null","string"]}]}`
	ts := time.Date(2026, 12, 1, 7, 0, 0, 1000, time.UTC)
	in := map[string]any{"i": json.Number("7"), "l": 3.0, "d": int64(2), "s": ts, "s2": json.Number("1.50"), "b": "raw",
		"ts": "2026-12-01T08:00:00.000001+01:00", "day": "2026-12-01", "dec": 1.5, "extra": "dropped"}
	want := map[string]any{"i": int64(7), "l": int64(3), "d": 2.0, "s": "2026-12-01T07:00:00.000001Z", "s2": "1.50", "b": []byte("raw"),
		"ts": ts, "day": time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), "dec": json.Number("1.500"), "def": int64(42), "opt": nil}
	for _, c := range []struct {
		bulk BulkFormat[map[string]any]
		read Format[map[string]any]
	}{{AvroBulk(schema), AvroFile("")}, {ParquetBulk(schema), ParquetFile()}} {
		p := filepath.Join(t.TempDir(), "c")
		f, _ := os.Create(p)
		w, err := c.bulk.NewWriter(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(in); err != nil {
			t.Fatal(err)
		}
		_ = w.Finish()
		f.Close()
		got := readAll(t, p, c.read)
		if len(got) != 1 || canon(got[0]) != canon(want) {
			t.Errorf("%T: read %v, want %s", c.read, got, canon(want))
		}
	}
}
