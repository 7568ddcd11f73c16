package file

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// TestParquetRollsBySize writes records with ParquetBulk through the sink
// with a rolling policy by size and no checkpoint before the end: the
// part files roll as row groups reach the file (a Parquet file grows by
// whole row groups), none is much larger than the part size, and
// together they hold every record once (read with parquet-go's reader).
func TestParquetRollsBySize(t *testing.T) {
	const (
		rowGroup = 16 << 10
		partSize = 64 << 10
	)
	in, out := t.TempDir(), t.TempDir()
	inputs := writeInput(t, in, 2, 3000)
	sk, err := NewBulkSink(out, ParquetBulk(eventSchema, ParquetRowGroupSize(rowGroup)), PartSuffix(".parquet"),
		WithBuckets(BasePathBuckets[map[string]any]()), Rolling(DefaultRollingPolicy{PartSize: partSize}))
	if err != nil {
		t.Fatal(err)
	}
	env := stream.New(stream.Parallelism(1), stream.Logger(stream.DiscardLogger()))
	lines := stream.FromSource(env, NewSource(TextLines(), []string{in}), watermark.None[string](), "lines")
	stream.SinkTo(stream.Map(lines, eventOf), sk, "out")
	if _, err := env.Execute(t.Context(), "parquet-roll"); err != nil {
		t.Fatal(err)
	}
	files := finishedFiles(t, out)
	got := map[string][]string{}
	for _, f := range files {
		p := filepath.Join(out, f)
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		// A file rolls once it reached partSize: one more row group (its
		// encoded size near rowGroup bytes of values) and the footer
		// (column chunk metadata of every row group) past it at most.
		if st.Size() > 2*partSize {
			t.Errorf("%s: %d bytes, part size %d, row groups of %d", f, st.Size(), partSize, rowGroup)
		}
		got[f] = parquetLines(t, p)
	}
	if len(files) < 3 {
		t.Fatalf("%d part files: the sink did not roll by size", len(files))
	}
	checkExactlyOnce(t, inputs, got, true)
	t.Logf("%d part files", len(files))
}

// pyArrowRead reads two Parquet files with PyArrow, flattens one level of
// structs ("r.ol"), and prints whether the tables are equal, the rows,
// every column's type, and the sum and null count of one column.
const pyArrowRead = `
import json, sys
import pyarrow.compute as pc
import pyarrow.parquet as pq
a, b = pq.read_table(sys.argv[1]), pq.read_table(sys.argv[2])
fa = a.flatten()
col = fa.column(sys.argv[3])
print(json.dumps({"equal": a.equals(b), "rows": a.num_rows,
    "types": {f.name: str(f.type) for f in fa.schema},
    "sum": pc.sum(col).as_py(), "nulls": col.null_count}))
`

// TestParquetReadByPyArrow reads the files of TestParquetColumnsMatchRowPath
// (the column writer's and the row path's, flat and nested) with PyArrow,
// an independent reader (the venv of scripts/pyiceberg.sh, given by
// SLUICE_PYICEBERG): the two are equal tables, with the rows written, the
// Arrow types of the Avro → Parquet mapping, and the sum and null count of
// an optional long column equal to the input's.
func TestParquetReadByPyArrow(t *testing.T) {
	py := os.Getenv("SLUICE_PYICEBERG")
	if py == "" {
		t.Skip("SLUICE_PYICEBERG is not set (scripts/pyiceberg.sh setup): no PyArrow to read Parquet files with")
	}
	for _, c := range matchCases() {
		t.Run(c.name, func(t *testing.T) {
			f := ParquetBulk(c.schema, ParquetRowGroupSize(300_000))
			cols, rows, want := writeColumnsAndRows(t, f, c.rec, c.name == "nested", 2000)
			dir := t.TempDir()
			a, b := filepath.Join(dir, "cols.parquet"), filepath.Join(dir, "rows.parquet")
			if err := os.WriteFile(a, cols, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(b, rows, 0o600); err != nil {
				t.Fatal(err)
			}
			prefix := ""
			if c.name == "nested" {
				prefix = "r."
			}
			out, err := exec.CommandContext(t.Context(), py, "-c", pyArrowRead, a, b, prefix+"ol").Output()
			if err != nil {
				t.Fatalf("pyarrow: %v\n%s", err, out)
			}
			var got struct {
				Equal bool              `json:"equal"`
				Rows  int               `json:"rows"`
				Types map[string]string `json:"types"`
				Sum   int64             `json:"sum"`
				Nulls int               `json:"nulls"`
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("pyarrow output %q: %v", out, err)
			}
			var sum int64
			var nulls int
			for _, r := range want {
				if c.name == "nested" {
					r = r["r"].(map[string]any)
				}
				if v, ok := r["ol"].(int64); ok {
					sum += v
				} else {
					nulls++
				}
			}
			if !got.Equal || got.Rows != len(want) || got.Sum != sum || got.Nulls != nulls {
				t.Errorf("pyarrow: equal %t, %d rows, sum %d, %d nulls; want equal, %d rows, sum %d, %d nulls", got.Equal, got.Rows, got.Sum, got.Nulls, len(want), sum, nulls)
			}
			for col, typ := range map[string]string{
				"b": "bool", "i": "int32", "l": "int64", "f": "float", "d": "double", "s": "string", "e": "string",
				"by": "binary", "fx": "fixed_size_binary[4]", "uu": "string",
				"tsm": "timestamp[ms, tz=UTC]", "tsu": "timestamp[us, tz=UTC]", "ltsm": "timestamp[ms]", "ltsu": "timestamp[us]",
				"day": "date32[day]", "tm": "time32[ms]", "tu": "time64[us]",
				"dec6": "decimal128(6, 2)", "dec15": "decimal128(15, 3)", "dec30": "decimal128(30, 4)",
			} {
				if g := got.Types[prefix+col]; g != typ {
					t.Errorf("column %s%s: pyarrow type %q, want %q", prefix, col, g, typ)
				}
			}
		})
	}
}
