package file

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// readBack reads every finished file under dir with format into a sorted
// slice of strings (via str).
func readBack[T any](t *testing.T, dir string, format Format[T], str func(T) string) []string {
	t.Helper()
	store := testsink.NewStore[string]()
	env := stream.New(stream.Parallelism(2), stream.Logger(stream.DiscardLogger()))
	s := stream.FromSource(env, NewSource(format, []string{dir}), watermark.None[T](), "read")
	stream.SinkTo(stream.Map(s, str), testsink.NewTwoPhase(store), "collect")
	if _, err := env.Execute(t.Context(), "read-back"); err != nil {
		t.Fatal(err)
	}
	got := store.Committed()
	slices.Sort(got)
	return got
}

type event struct {
	ID    int     `json:"id"`
	User  string  `json:"user"`
	Score float64 `json:"score"`
}

// TestJSONLinesRoundTrip reads JSON lines (plain, gzip and zstd files),
// writes them with the JSON lines row format into date-time buckets by
// event time, and reads the output back: the same records.
func TestJSONLinesRoundTrip(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	var want []string
	for i, ext := range []string{"jsonl", "jsonl.gz", "jsonl.zst"} {
		var b strings.Builder
		for j := range 300 {
			e := event{ID: i*1000 + j, User: fmt.Sprintf("u%d", j%7), Score: float64(j) / 4}
			line, _ := json.Marshal(e)
			b.Write(line)
			b.WriteByte('\n')
			want = append(want, string(line))
		}
		if err := os.WriteFile(filepath.Join(in, "events."+ext), compress(t, strings.TrimPrefix(filepath.Ext(ext), "."), []byte(b.String())), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(want)
	sk, err := NewRowSink(out, JSONLinesFormat[event](), PartSuffix(".jsonl"),
		WithBuckets(DateTimeBuckets[event]("2006-01-02/15", time.UTC, EventTime)))
	if err != nil {
		t.Fatal(err)
	}
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(20*time.Millisecond), stream.Logger(stream.DiscardLogger()))
	ws := watermark.BoundedOutOfOrderness[event](time.Hour).WithTimestampAssigner(func(e event, _ int64) int64 { return int64(e.ID) * 3_600_000 })
	stream.SinkTo(stream.FromSource(env, NewSource(JSONLines[event](), []string{in}), ws, "events"), sk, "out")
	if _, err := env.Execute(t.Context(), "json"); err != nil {
		t.Fatal(err)
	}
	files := finishedFiles(t, out)
	if len(files) < 100 || !strings.HasPrefix(files[0], "1970-01-01"+string(filepath.Separator)+"00") {
		t.Fatalf("got %d files (first %v), want one hourly bucket per record", len(files), files[:1])
	}
	got := readBack(t, out, JSONLines[event](), func(e event) string { b, _ := json.Marshal(e); return string(b) })
	if !slices.Equal(got, want) {
		t.Fatalf("read back %d records, want %d", len(got), len(want))
	}
}

// TestBulkGzipRoundTrip writes gzip bulk part files (rolled at every
// checkpoint) under injected failures and reads them back with the
// source, which decompresses .gz.
func TestBulkGzipRoundTrip(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	want := writeInput(t, in, 10, 1000)
	slices.Sort(want)
	sk, err := NewBulkSink(out, GzipBulk(LinesFormat()), PartSuffix(".gz"), WithBuckets(BasePathBuckets[string]()))
	if err != nil {
		t.Fatal(err)
	}
	const faults = 4
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(5*time.Millisecond),
		stream.Restart(restart.FixedDelay(faults+2, 0)), stream.Logger(stream.DiscardLogger()))
	plan := faultinject.RandomPlan(7, faults, faultinject.Kinds(), 2, 4000, 6)
	stream.SinkTo(stream.FromSource(env, faultinject.WrapSource(NewSource(TextLines(), []string{in}), plan), watermark.None[string](), "files"),
		faultinject.WrapSink(sk, plan), "out")
	res, err := env.Execute(t.Context(), "bulk")
	if err != nil {
		t.Fatal(err)
	}
	files := finishedFiles(t, out)
	for _, f := range files {
		if !strings.HasSuffix(f, ".gz") {
			t.Fatalf("part file %s without the suffix", f)
		}
	}
	got := readBack(t, out, TextLines(), func(s string) string { return s })
	if !slices.Equal(got, want) {
		t.Fatalf("read back %d lines, want %d", len(got), len(want))
	}
	t.Logf("%d part files, %d checkpoints, fired %v", len(files), res.Checkpoints.Completed, plan.Fired())
}

// TestCSVRoundTrip writes CSV records with quoting and reads them back
// with a header skipped.
func TestCSVRoundTrip(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	content := "name,note\n\"a, b\",\"x\ny\"\nc,\"say \"\"hi\"\"\"\n"
	if err := os.WriteFile(filepath.Join(in, "a.csv"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	sk, err := NewRowSink(out, CSVFormat(), WithBuckets(BasePathBuckets[[]string]()))
	if err != nil {
		t.Fatal(err)
	}
	env := stream.New(stream.Logger(stream.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, NewSource(CSV(CSVHeader()), []string{in}), watermark.None[[]string](), "csv"), sink.Sink[[]string](sk), "out")
	if _, err := env.Execute(context.Background(), "csv"); err != nil {
		t.Fatal(err)
	}
	got := readBack(t, out, CSV(), func(r []string) string { return strings.Join(r, "|") })
	want := []string{"a, b|x\ny", "c|say \"hi\""}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}
