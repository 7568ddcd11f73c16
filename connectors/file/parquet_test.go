package file

import (
	"os"
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
