package file

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2/ocf"
	"github.com/parquet-go/parquet-go"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// eventSchema covers every type the formats map: primitives, logical
// types, an optional field, an array, a map, an enum and a nested
// optional record.
const eventSchema = `{"type":"record","name":"Event","namespace":"test","fields":[
 {"name":"line","type":"string"},
 {"name":"file","type":"string"},
 {"name":"n","type":"long"},
 {"name":"small","type":"int"},
 {"name":"score","type":"double"},
 {"name":"ratio","type":"float"},
 {"name":"ok","type":"boolean"},
 {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"tsu","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"day","type":{"type":"int","logicalType":"date"}},
 {"name":"amount","type":{"type":"bytes","logicalType":"decimal","precision":12,"scale":2}},
 {"name":"big","type":{"type":"fixed","name":"Big","size":16,"logicalType":"decimal","precision":30,"scale":4}},
 {"name":"raw","type":"bytes"},
 {"name":"id","type":{"type":"fixed","name":"ID","size":4}},
 {"name":"kind","type":{"type":"enum","name":"Kind","symbols":["A","B","C"]}},
 {"name":"opt","type":["null","string"],"default":null},
 {"name":"tags","type":{"type":"array","items":"string"}},
 {"name":"nums","type":{"type":"array","items":["null","long"]}},
 {"name":"attrs","type":{"type":"map","values":"long"}},
 {"name":"sub","type":["null",{"type":"record","name":"Sub","fields":[
   {"name":"x","type":"double"},
   {"name":"names","type":{"type":"array","items":"string"}}]}],"default":null},
 {"name":"country","type":"string","default":"FR"}
]}`

// eventOf makes the record of an input line "f003:17".
func eventOf(line string) map[string]any {
	file, idx, _ := strings.Cut(line, ":")
	n, _ := strconv.ParseInt(idx, 10, 64)
	ts := time.UnixMilli(1_796_000_000_000 + n*61_000).UTC()
	m := map[string]any{
		"line":   line,
		"file":   file,
		"n":      n,
		"small":  int64(n % 1000),
		"score":  float64(n) / 4,
		"ratio":  float64(n%7) / 2,
		"ok":     n%2 == 0,
		"ts":     ts,
		"tsu":    ts.Add(time.Duration(n%1000) * time.Microsecond),
		"day":    time.Date(2026, 12, 1+int(n%20), 0, 0, 0, 0, time.UTC),
		"amount": json.Number(fmt.Sprintf("%d.%02d", n-500, n%100)),
		"big":    json.Number(fmt.Sprintf("-12345678901234567890.%04d", n%10000)),
		"raw":    []byte{byte(n), byte(n >> 8), 0},
		"id":     []byte{1, 2, 3, byte(n)},
		"kind":   []string{"A", "B", "C"}[n%3],
		"opt":    nil,
		"tags":   []any{},
		"nums":   []any{n, nil, int64(-1)},
		"attrs":  map[string]any{},
		"sub":    nil,
	}
	if n%3 == 0 {
		m["opt"] = "o" + idx
		m["tags"] = []any{"a", file}
		m["attrs"] = map[string]any{"k": n, "z": int64(0)}
		m["sub"] = map[string]any{"x": 0.5, "names": []any{"p", "q"}}
	}
	if n%5 != 0 {
		m["country"] = []string{"DE", "FR", "IT/x"}[n%3]
	}
	return m
}

// canon writes v with the type of every value, maps sorted by key, so
// that two values print the same only if they are equal in the value
// contract.
func canon(v any) string {
	switch x := v.(type) {
	case map[string]any:
		var b strings.Builder
		b.WriteString("{")
		for _, k := range slices.Sorted(maps.Keys(x)) {
			fmt.Fprintf(&b, "%s:%s,", k, canon(x[k]))
		}
		return b.String() + "}"
	case []any:
		var b strings.Builder
		b.WriteString("[")
		for _, e := range x {
			b.WriteString(canon(e) + ",")
		}
		return b.String() + "]"
	case time.Time:
		return "time:" + x.Format(time.RFC3339Nano) + "@" + x.Location().String()
	case nil:
		return "nil"
	}
	return fmt.Sprintf("%T:%v", v, v)
}

// wantEvent is what reading eventOf(line) back gives: a missing field
// takes its default.
func wantEvent(line string) string {
	m := eventOf(line)
	if _, ok := m["country"]; !ok {
		m["country"] = "FR"
	}
	return canon(m)
}

type bulkCase struct {
	name   string
	bulk   func() BulkFormat[map[string]any]
	read   Format[map[string]any]
	suffix string
	// lines reads the "line" field of every record of a file with an
	// independent reader.
	lines func(t *testing.T, path string) []string
}

func bulkCases() []bulkCase {
	return []bulkCase{
		{name: "avro", bulk: func() BulkFormat[map[string]any] { return AvroBulk(eventSchema, AvroBlockSize(2000)) },
			read: AvroFile(""), suffix: ".avro", lines: ocfLines},
		{name: "avro-deflate", bulk: func() BulkFormat[map[string]any] {
			return AvroBulk(eventSchema, AvroCodec("deflate"), AvroBlockSize(3000))
		}, read: AvroFile(""), suffix: ".avro", lines: ocfLines},
		{name: "avro-zstandard", bulk: func() BulkFormat[map[string]any] {
			return AvroBulk(eventSchema, AvroCodec("zstandard"), AvroBlockSize(3000))
		}, read: AvroFile(""), suffix: ".avro", lines: ocfLines},
		{name: "parquet", bulk: func() BulkFormat[map[string]any] { return ParquetBulk(eventSchema, ParquetRowGroupSize(20000)) },
			read: ParquetFile(), suffix: ".parquet", lines: parquetLines},
		{name: "parquet-zstd", bulk: func() BulkFormat[map[string]any] {
			return ParquetBulk(eventSchema, ParquetCompression("zstd"))
		}, read: ParquetFile(), suffix: ".parquet", lines: parquetLines},
	}
}

// ocfLines reads a container file with hamba's ocf decoder.
func ocfLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec, err := ocf.NewDecoder(f)
	if err != nil {
		t.Fatalf("%s: hamba ocf: %v", path, err)
	}
	var out []string
	for dec.HasNext() {
		var rec struct {
			Line string `avro:"line"`
			N    int64  `avro:"n"`
		}
		if err := dec.Decode(&rec); err != nil {
			t.Fatalf("%s: hamba ocf decode: %v", path, err)
		}
		out = append(out, rec.Line)
	}
	if err := dec.Error(); err != nil {
		t.Fatalf("%s: hamba ocf: %v", path, err)
	}
	return out
}

// parquetLines reads a Parquet file with parquet-go's generic reader.
func parquetLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	type row struct {
		Line string `parquet:"line"`
		N    int64  `parquet:"n"`
	}
	r := parquet.NewGenericReader[row](f)
	defer r.Close()
	rows := make([]row, r.NumRows())
	n, err := r.Read(rows)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("%s: parquet-go: %v", path, err)
	}
	var out []string
	for _, x := range rows[:n] {
		out = append(out, x.Line)
	}
	return out
}

// TestBulkFormatsExactlyOnce writes records of every type with AvroBulk
// and ParquetBulk through an exactly-once job with injected failures of
// every kind (reader, snapshot, writer, between prepare and commit,
// commit), then checks the output three ways: every visible part file
// read with an independent reader (hamba's ocf decoder, parquet-go's
// reader) holds the input lines exactly once, in order per input file; no
// in-progress file is left; and reading the directory with AvroFile or
// ParquetFile gives records equal to the input in the value contract.
func TestBulkFormatsExactlyOnce(t *testing.T) {
	for i, c := range bulkCases() {
		t.Run(c.name, func(t *testing.T) {
			in, out := t.TempDir(), t.TempDir()
			inputs := writeInput(t, in, 6, 700)
			sk, err := NewBulkSink(out, c.bulk(), PartSuffix(c.suffix), WithBuckets(BasePathBuckets[map[string]any]()))
			if err != nil {
				t.Fatal(err)
			}
			const faults = 5
			env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(10*time.Millisecond),
				stream.Restart(restart.FixedDelay(faults+2, 0)), stream.Logger(stream.DiscardLogger()))
			plan := faultinject.RandomPlan(int64(40+i), faults, faultinject.Kinds(), 2, 1500, 6)
			lines := stream.FromSource(env, faultinject.WrapSource(NewSource(TextLines(), []string{in}, ReadBatchSize(50)), plan), watermark.None[string](), "lines")
			stream.SinkTo(stream.Map(lines, eventOf), faultinject.WrapSink(sk, plan), "out")
			res, err := env.Execute(t.Context(), "bulk-"+c.name)
			if err != nil {
				t.Fatalf("job: %v (fired %v)", err, plan.Fired())
			}
			if h := hiddenFiles(t, out); len(h) > 0 {
				t.Errorf("in-progress files left behind: %v", h)
			}
			files := finishedFiles(t, out)
			got := map[string][]string{}
			for _, f := range files {
				if !strings.HasSuffix(f, c.suffix) {
					t.Fatalf("part file %s without the suffix %s", f, c.suffix)
				}
				got[f] = c.lines(t, filepath.Join(out, f))
			}
			checkExactlyOnce(t, inputs, got, true)

			want := make([]string, len(inputs))
			for i, l := range inputs {
				want[i] = wantEvent(l)
			}
			slices.Sort(want)
			back := readBack(t, out, c.read, canonMap)
			if len(back) != len(want) {
				t.Fatalf("read back %d records, want %d", len(back), len(want))
			}
			for i := range want {
				if back[i] != want[i] {
					t.Fatalf("record %d read back:\n%s\nwant\n%s", i, back[i], want[i])
				}
			}
			t.Logf("%d part files, %d checkpoints, %d restarts, fired %v", len(files), res.Checkpoints.Completed, res.Restarts, plan.Fired())
			if len(plan.Fired()) == 0 {
				t.Error("no injected failure fired")
			}
		})
	}
}

// writeEvents writes the records of lines into one file with bulk and
// returns its path.
func writeEvents(t testing.TB, dir, name string, bulk BulkFormat[map[string]any], lines []string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w, err := bulk.NewWriter(f)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lines {
		if err := w.Write(eventOf(l)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

func testLines(file string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s:%d", file, i)
	}
	return out
}

// TestFileFormatsResumeEverywhere reads a file with several blocks (row
// groups) up to every record, takes the split's position there (offset
// and records to skip), opens the file again at it, and reads the rest:
// the two parts are the file's records, each once, in order.
func TestFileFormatsResumeEverywhere(t *testing.T) {
	for _, c := range bulkCases() {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			lines := testLines("r", 120)
			var bulk BulkFormat[map[string]any]
			switch c.name {
			case "avro", "avro-deflate", "avro-zstandard":
				bulk = AvroBulk(eventSchema, AvroBlockSize(1500)) // ~5 records a block
			default:
				bulk = ParquetBulk(eventSchema, ParquetRowGroupSize(4000))
			}
			path := writeEvents(t, dir, "x"+c.suffix, bulk, lines)
			cfg := defaultSourceConfig()
			offsets := map[[2]int64]bool{}
			for k := 0; k <= len(lines); k++ {
				sr := newSplitReader(c.read, &cfg, new(metrics.Counter))
				o, err := sr.open(t.Context(), Split{Path: path, End: -1})
				if err != nil {
					t.Fatal(err)
				}
				var got []string
				for range k {
					v, next, err := o.rr.Read()
					if err != nil {
						t.Fatalf("record %d: %v", len(got), err)
					}
					o.advance(next)
					got = append(got, v["line"].(string))
				}
				pos := Split{Path: path, End: -1, Offset: o.off, Skip: o.skip}
				offsets[[2]int64{o.off, o.skip}] = true
				o.close()
				o, err = sr.open(t.Context(), pos)
				if err != nil {
					t.Fatalf("resume at %+v: %v", pos, err)
				}
				for range len(lines) + 1 {
					v, next, err := o.rr.Read()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatalf("after resume at %+v: %v", pos, err)
					}
					o.advance(next)
					got = append(got, v["line"].(string))
				}
				o.close()
				if !slices.Equal(got, lines) {
					t.Fatalf("resumed after %d records at offset %d skip %d: got %d records %v…, want %d", k, pos.Offset, pos.Skip, len(got), got[:min(len(got), 8)], len(lines))
				}
			}
			if len(offsets) != len(lines)+1 {
				t.Errorf("%d distinct positions for %d records", len(offsets), len(lines))
			}
		})
	}
}

// TestFileFormatsSourceResumeUnderFailures reads Avro and Parquet files
// with the source (small fetch batches, so checkpoints fall inside files
// and blocks) through a job with injected failures into a text-line
// sink: every record once.
func TestFileFormatsSourceResumeUnderFailures(t *testing.T) {
	for i, c := range bulkCases()[:4] {
		t.Run(c.name, func(t *testing.T) {
			in, out := t.TempDir(), t.TempDir()
			var want []string
			for f := range 4 {
				lines := testLines(fmt.Sprintf("g%03d", f), 600)
				want = append(want, lines...)
				bulk := c.bulk()
				if c.suffix == ".parquet" {
					bulk = ParquetBulk(eventSchema, ParquetRowGroupSize(30000))
				}
				writeEvents(t, in, fmt.Sprintf("in-%d%s", f, c.suffix), bulk, lines)
			}
			plan := faultinject.RandomPlan(int64(60+i), 5, faultinject.Kinds(), 2, 600, 8)
			sk, err := NewRowSink(out, LinesFormat(), WithBuckets(BasePathBuckets[string]()))
			if err != nil {
				t.Fatal(err)
			}
			env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(5*time.Millisecond),
				stream.Restart(restart.FixedDelay(7, 0)), stream.Logger(stream.DiscardLogger()))
			recs := stream.FromSource(env, faultinject.WrapSource(NewSource(c.read, []string{in}, ReadBatchSize(7)), plan), watermark.None[map[string]any](), "read")
			stream.SinkTo(stream.Map(recs, func(m map[string]any) string { return m["line"].(string) }), faultinject.WrapSink(sk, plan), "out")
			res, err := env.Execute(t.Context(), "read-"+c.name)
			if err != nil {
				t.Fatalf("job: %v (fired %v)", err, plan.Fired())
			}
			checkExactlyOnce(t, want, readOutput(t, out), true)
			t.Logf("%d checkpoints, %d restarts, fired %v", res.Checkpoints.Completed, res.Restarts, plan.Fired())
			if len(plan.Fired()) == 0 {
				t.Error("no injected failure fired")
			}
		})
	}
}

// TestFileFormatsCoercionErrors writes records that do not fit the schema:
// every error names the field.
func TestFileFormatsCoercionErrors(t *testing.T) {
	base := func() map[string]any { return eventOf("f:3") }
	with := func(k string, v any) map[string]any {
		m := base()
		m[k] = v
		return m
	}
	without := func(k string) map[string]any {
		m := base()
		delete(m, k)
		return m
	}
	cases := []struct {
		rec  map[string]any
		want string
	}{
		{with("small", int64(1)<<40), "field small: 1099511627776 does not fit"},
		{with("small", 1.5), "field small: 1.5 is not an integer"},
		{with("n", "x"), `field n: string "x" for long`},
		{with("n", json.Number("1e400")), "field n: 1e400 is not a 64-bit integer"},
		{with("ts", "yesterday"), `field ts: "yesterday" is not an RFC 3339 timestamp`},
		{with("day", "12/01/2026"), `field day: "12/01/2026" is not a date`},
		{with("amount", json.Number("1.234")), "field amount: 1.234 has more than 2 decimal places"},
		{with("amount", json.Number("12345678901.5")), "field amount: 12345678901.5 has more than 12 digits"},
		{with("kind", "D"), `field kind: "D" is not a symbol of enum`},
		{with("id", []byte{1}), "field id: 1 bytes for fixed(4)"},
		{with("ok", "yes"), `field ok: string "yes" for boolean`},
		{with("tags", []any{"a", int64(2)}), "field tags[1]: int64 2 for string"},
		{with("attrs", map[string]any{"k": "v"}), `field attrs["k"]: string "v" for long`},
		{with("sub", map[string]any{"x": "no", "names": []any{}}), `field sub`},
		{with("sub", map[string]any{"names": []any{}}), "field sub.x: missing"},
		{without("n"), "field n: missing, and the schema gives no default"},
		{with("line", nil), "field line: null"},
	}
	for _, c := range bulkCases()[:4:4] {
		if c.name == "avro-deflate" || c.name == "avro-zstandard" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			w, err := c.bulk().NewWriter(io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range cases {
				err := w.Write(tc.rec)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %v, want one containing %q", err, tc.want)
				}
			}
			// The writer is still usable: a good record after bad ones.
			if err := w.Write(base()); err != nil {
				t.Fatal(err)
			}
			if err := w.Finish(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestFileFormatsConfigErrors checks that a bad schema or option is an
// ErrInvalidConfig naming it.
func TestFileFormatsConfigErrors(t *testing.T) {
	for _, c := range []struct {
		f    BulkFormat[map[string]any]
		want string
	}{
		{AvroBulk(`{"type":"record"`), "AvroBulk schema"},
		{AvroBulk(`"string"`), "want a record"},
		{AvroBulk(eventSchema, AvroCodec("lzo")), `AvroCodec "lzo"`},
		{AvroBulk(eventSchema, AvroBlockSize(0)), "AvroBlockSize 0"},
		{ParquetBulk(`{"type":"record","name":"R","fields":[{"name":"u","type":["string","long"]}]}`), "field u: a union other than"},
		{ParquetBulk(eventSchema, ParquetCompression("lzo")), `ParquetCompression "lzo"`},
		{ParquetBulk(eventSchema, ParquetRowGroupSize(-1)), "ParquetRowGroupSize -1"},
	} {
		_, err := c.f.NewWriter(io.Discard)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want ErrInvalidConfig containing %q", err, c.want)
		}
		if e := c.f.(interface{ Err() error }).Err(); e == nil || e.Error() != err.Error() {
			t.Errorf("Err() = %v, want %v", e, err)
		}
	}
	for _, f := range []interface{ Err() error }{AvroBulk(eventSchema), ParquetBulk(eventSchema), AvroFile(eventSchema), AvroFile("")} {
		if err := f.Err(); err != nil {
			t.Errorf("%T: Err() = %v for a valid configuration", f, err)
		}
	}
	if _, err := AvroFile(`{"type":"record"`).NewReader(strings.NewReader(""), 0); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("AvroFile with a bad reader schema: %v", err)
	}
	if err := AvroFile(`"long"`).Err(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "want a record") {
		t.Errorf("AvroFile with a non-record reader schema: Err() = %v", err)
	}
}

// TestAvroSchemaEvolution reads files written with an old schema through
// a newer reader schema: a field added with a default gets it, a dropped
// field is gone, an int is promoted to a double.
func TestAvroSchemaEvolution(t *testing.T) {
	dir := t.TempDir()
	v1 := `{"type":"record","name":"U","fields":[{"name":"id","type":"long"},{"name":"age","type":"int"},{"name":"old","type":"string"}]}`
	v2 := `{"type":"record","name":"U","fields":[{"name":"id","type":"long"},{"name":"age","type":"double"},
	  {"name":"email","type":["null","string"],"default":null},{"name":"plan","type":"string","default":"free"}]}`
	p := filepath.Join(dir, "u.avro")
	f, _ := os.Create(p)
	w, err := AvroBulk(v1).NewWriter(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(map[string]any{"id": int64(7), "age": int64(30), "old": "x"}); err != nil {
		t.Fatal(err)
	}
	if err := w.Finish(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got := readBack(t, dir, AvroFile(v2), canonMap)
	want := canon(map[string]any{"id": int64(7), "age": 30.0, "email": nil, "plan": "free"})
	if len(got) != 1 || got[0] != want {
		t.Fatalf("read %v, want %s", got, want)
	}
	// A reader schema the file cannot be resolved against names the file.
	bad := `{"type":"record","name":"U","fields":[{"name":"id","type":"string"}]}`
	err = readErr(t, dir, AvroFile(bad))
	if err == nil || !strings.Contains(err.Error(), p) {
		t.Fatalf("incompatible reader schema: %v, want an error naming %s", err, p)
	}
}

// readErr runs a job that reads dir with format and returns its error.
func readErr(t *testing.T, dir string, format Format[map[string]any]) error {
	t.Helper()
	env := stream.New(stream.Restart(restart.None()), stream.Logger(stream.DiscardLogger()))
	s := stream.FromSource(env, NewSource(format, []string{dir}), watermark.None[map[string]any](), "read")
	stream.SinkTo(stream.Map(s, canonMap), must(NewRowSink(t.TempDir(), LinesFormat())), "out")
	_, err := env.Execute(t.Context(), "read")
	return err
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestFileFormatsCorruptFile reads damaged files: the error names the
// file and where in it.
func TestFileFormatsCorruptFile(t *testing.T) {
	lines := testLines("c", 200)
	t.Run("avro-truncated", func(t *testing.T) {
		dir := t.TempDir()
		p := writeEvents(t, dir, "x.avro", AvroBulk(eventSchema, AvroBlockSize(2000)), lines)
		st, _ := os.Stat(p)
		if err := os.Truncate(p, st.Size()-7); err != nil {
			t.Fatal(err)
		}
		checkCorrupt(t, dir, p, AvroFile(""), "corrupt block at offset")
	})
	t.Run("avro-garbage", func(t *testing.T) {
		dir := t.TempDir()
		p := writeEvents(t, dir, "x.avro", AvroBulk(eventSchema, AvroBlockSize(2000), AvroCodec("null")), lines)
		b, _ := os.ReadFile(p)
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range 64 {
			b[len(b)/2+i] = byte(rng.Uint32())
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		checkCorrupt(t, dir, p, AvroFile(""), "corrupt block at offset")
	})
	t.Run("avro-not-avro", func(t *testing.T) {
		dir := t.TempDir()
		p := filepath.Join(dir, "x.avro")
		_ = os.WriteFile(p, []byte("hello, world\n"), 0o644)
		checkCorrupt(t, dir, p, AvroFile(""), "not an Avro container file")
	})
	t.Run("parquet-truncated", func(t *testing.T) {
		dir := t.TempDir()
		p := writeEvents(t, dir, "x.parquet", ParquetBulk(eventSchema), lines)
		st, _ := os.Stat(p)
		if err := os.Truncate(p, st.Size()-3); err != nil {
			t.Fatal(err)
		}
		checkCorrupt(t, dir, p, ParquetFile(), "not a readable Parquet file")
	})
	t.Run("parquet-footer-length", func(t *testing.T) {
		// A footer length beyond the file: refused before parquet-go
		// allocates it (it allocated 4 GiB).
		dir := t.TempDir()
		p := writeEvents(t, dir, "x.parquet", ParquetBulk(eventSchema), lines)
		b, _ := os.ReadFile(p)
		binary.LittleEndian.PutUint32(b[len(b)-8:], 0xfffffff0)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		_, err := ParquetFile().(RandomAccessFormat[map[string]any]).NewReaderAt(bytes.NewReader(b), int64(len(b)), 0, 0)
		runtime.ReadMemStats(&m1)
		if err == nil || !strings.Contains(err.Error(), "a footer of 4294967280 bytes") {
			t.Fatalf("error %v", err)
		}
		if a := m1.TotalAlloc - m0.TotalAlloc; a > 64<<20 {
			t.Fatalf("allocated %d MiB", a>>20)
		}
		checkCorrupt(t, dir, p, ParquetFile(), "a footer of")
	})
	t.Run("avro-decimal-length", func(t *testing.T) {
		// A decimal's length far beyond its precision is corrupt (its
		// conversion to text took half a second).
		schema := `{"type":"record","name":"D","fields":[{"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}}]}`
		dir := t.TempDir()
		p := filepath.Join(dir, "d.avro")
		f, _ := os.Create(p)
		w, _ := AvroBulk(schema, AvroCodec("null")).NewWriter(f)
		if err := w.Write(map[string]any{"d": json.Number("1.25")}); err != nil {
			t.Fatal(err)
		}
		_ = w.Finish()
		f.Close()
		// Rewrite the block: one record whose bytes are 1000 long.
		b, _ := os.ReadFile(p)
		hdrEnd := bytes.LastIndex(b[:len(b)-16], b[len(b)-16:])
		rec := appendBytes(nil, bytes.Repeat([]byte{0x7f}, 1000))
		blk := appendLong(appendLong(nil, 1), int64(len(rec)))
		blk = append(append(blk, rec...), b[len(b)-16:]...)
		b = append(b[:hdrEnd+16], blk...)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		checkCorrupt(t, dir, p, AvroFile(""), "a decimal(9,2) of 1000 bytes")
	})
	t.Run("parquet-garbage", func(t *testing.T) {
		dir := t.TempDir()
		p := writeEvents(t, dir, "x.parquet", ParquetBulk(eventSchema), lines)
		b, _ := os.ReadFile(p)
		for i := 4; i < len(b)/3; i++ {
			b[i] ^= 0x5a
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		checkCorrupt(t, dir, p, ParquetFile(), "Parquet")
	})
}

func checkCorrupt(t *testing.T, dir, path string, format Format[map[string]any], want string) {
	t.Helper()
	err := readErr(t, dir, format)
	re, ok := errors.AsType[*RecordError](err)
	if !ok {
		t.Fatalf("error %v, want a *RecordError", err)
	}
	if re.File != path || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "offset") {
		t.Fatalf("error %q (file %s offset %d), want one naming %s, an offset and %q", err, re.File, re.Offset, path, want)
	}
	t.Logf("%v", err)
}

// TestFileFormatsCompressedWhole reads a gzipped Avro container file as a
// stream, also resuming inside it (position 0 and the records read); a
// gzipped Parquet file is refused with an error that says why.
func TestFileFormatsCompressedWhole(t *testing.T) {
	dir := t.TempDir()
	lines := testLines("z", 50)
	p := writeEvents(t, dir, "x.avro", AvroBulk(eventSchema), lines)
	b, _ := os.ReadFile(p)
	_ = os.WriteFile(p+".gz", gzipBytes(t, b), 0o644)
	_ = os.Remove(p)
	// Resume inside the gzipped file: position 0 and a count.
	cfg := defaultSourceConfig()
	for _, k := range []int{0, 1, 17, 49, 50} {
		sr := newSplitReader(AvroFile(""), &cfg, new(metrics.Counter))
		o, err := sr.open(t.Context(), Split{Path: p + ".gz", End: -1})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for range k {
			v, next, err := o.rr.Read()
			if err != nil {
				t.Fatal(err)
			}
			o.advance(next)
			got = append(got, v["line"].(string))
		}
		pos := Split{Path: p + ".gz", End: -1, Offset: o.off, Skip: o.skip}
		o.close()
		if o, err = sr.open(t.Context(), pos); err != nil {
			t.Fatalf("resume at %+v: %v", pos, err)
		}
		for range 100 {
			v, next, err := o.rr.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			o.advance(next)
			got = append(got, v["line"].(string))
		}
		o.close()
		if !slices.Equal(got, lines) || pos.Offset != 0 || pos.Skip != int64(k) {
			t.Fatalf("resumed after %d records at %+v: got %d records", k, pos, len(got))
		}
	}
	got := readBack(t, dir, AvroFile(""), func(m map[string]any) string { return m["line"].(string) })
	want := slices.Clone(lines)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("read %d records from the gzipped file, want %d", len(got), len(want))
	}
	q := writeEvents(t, dir, "y.parquet", ParquetBulk(eventSchema), lines)
	b, _ = os.ReadFile(q)
	_ = os.Remove(p + ".gz")
	_ = os.WriteFile(q+".gz", gzipBytes(t, b), 0o644)
	_ = os.Remove(q)
	if err := readErr(t, dir, ParquetFile()); err == nil || !strings.Contains(err.Error(), "must not be compressed as a whole") {
		t.Fatalf("gzipped Parquet: %v", err)
	}
}

func gzipBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func canonMap(m map[string]any) string { return canon(m) }

// TestAvroHeaderKeepsSchema checks that the header holds the schema as
// given, defaults and docs included (the canonical form drops them), so
// that other readers can resolve against it.
func TestAvroHeaderKeepsSchema(t *testing.T) {
	dir := t.TempDir()
	p := writeEvents(t, dir, "x.avro", AvroBulk(eventSchema), testLines("h", 3))
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec, err := ocf.NewDecoder(f)
	if err != nil {
		t.Fatal(err)
	}
	md := dec.Metadata()
	if s := string(md["avro.schema"]); !strings.Contains(s, `"default":"FR"`) || !strings.Contains(s, `"logicalType":"timestamp-millis"`) {
		t.Errorf("header schema %s", s)
	}
	if c := string(md["avro.codec"]); c != "snappy" {
		t.Errorf("codec %q, want the default snappy", c)
	}
}
