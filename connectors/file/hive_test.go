package file

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// TestHivePartitions checks the directory names: values as text, Hive's
// escaping, the default partition for missing, null and empty values,
// nested fields, times from a field and from the event timestamp.
func TestHivePartitions(t *testing.T) {
	ts := time.Date(2026, 12, 1, 7, 30, 0, 0, time.UTC)
	ctx := BucketContext{Timestamp: ts.Add(time.Hour).UnixMilli(), HasTimestamp: true}
	cases := []struct {
		a    BucketAssigner[map[string]any]
		rec  map[string]any
		want string
	}{
		{HivePartitions("country", "city"), map[string]any{"country": "FR", "city": "Paris"}, "country=FR/city=Paris"},
		{HivePartitions("n", "x", "ok", "d"), map[string]any{"n": int64(-3), "x": 1.5, "ok": true, "d": json.Number("1.10")}, "n=-3/x=1.5/ok=true/d=1.10"},
		{HivePartitions("a", "b", "c"), map[string]any{"b": nil, "c": ""}, "a=__HIVE_DEFAULT_PARTITION__/b=__HIVE_DEFAULT_PARTITION__/c=__HIVE_DEFAULT_PARTITION__"},
		{HivePartitions("p"), map[string]any{"p": "../../etc/passwd"}, "p=..%2F..%2Fetc%2Fpasswd"},
		{HivePartitions("p"), map[string]any{"p": "a=b:c#d%e?f*g\\h\x01i j"}, "p=a%3Db%3Ac%23d%25e%3Ff%2Ag%5Ch%01i j"},
		{HivePartitions("user.country"), map[string]any{"user": map[string]any{"country": "IT"}}, "user.country=IT"},
		{HivePartitionsOf(HiveTime("dt", "2006-01-02", "ts"), HiveTime("hour", "15", "ts")), map[string]any{"ts": ts}, "dt=2026-12-01/hour=07"},
		{HivePartitionsOf(HiveTime("dt", "2006-01-02", "ts"), HiveTime("hour", "15", "ts")), map[string]any{"ts": "2026-12-01T09:00:00+02:00"}, "dt=2026-12-01/hour=07"},
		{HivePartitionsOf(HiveTime("hour", "15", "ts")), map[string]any{"ts": ts.UnixMilli()}, "hour=07"},
		{HivePartitionsOf(HiveTime("hour", "15", "")), map[string]any{}, "hour=08"},
		{HivePartitionsOf(HiveTime("dt", "2006-01-02", "ts"), HiveField("k")), map[string]any{"k": "v"}, "dt=__HIVE_DEFAULT_PARTITION__/k=v"},
	}
	for _, c := range cases {
		got, err := c.a.Bucket(c.rec, ctx)
		if err != nil || got != c.want {
			t.Errorf("%v: %q, %v; want %q", c.rec, got, err, c.want)
		}
	}
	for _, c := range []struct {
		a    BucketAssigner[map[string]any]
		rec  map[string]any
		ctx  BucketContext
		want string
	}{
		{HivePartitions("m"), map[string]any{"m": map[string]any{}}, ctx, "Hive partition m: a map[string]interface {} value"},
		{HivePartitionsOf(HiveTime("dt", "2006-01-02", "ts")), map[string]any{"ts": "soon"}, ctx, `field ts: "soon" is not an RFC 3339 time`},
		{HivePartitionsOf(HiveTime("dt", "2006-01-02", "")), map[string]any{}, BucketContext{}, "the record has no event timestamp"},
	} {
		if _, err := c.a.Bucket(c.rec, c.ctx); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one containing %q", c.rec, err, c.want)
		}
	}
}

// TestHivePartitionedParquet writes records through a job into
// dt=…/country=… directories of Parquet files and reads each directory
// back: every record is in the directory its fields name.
func TestHivePartitionedParquet(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	inputs := writeInput(t, in, 3, 300)
	sk, err := NewBulkSink(out, ParquetBulk(eventSchema), PartSuffix(".parquet"),
		WithBuckets(HivePartitionsOf(HiveTime("dt", "2006-01-02", "day"), HiveField("country"))))
	if err != nil {
		t.Fatal(err)
	}
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(10*time.Millisecond),
		stream.Restart(restart.None()), stream.Logger(stream.DiscardLogger()))
	lines := stream.FromSource(env, NewSource(TextLines(), []string{in}), watermark.None[string](), "lines")
	stream.SinkTo(stream.Map(lines, eventOf), sk, "out")
	if _, err := env.Execute(t.Context(), "hive"); err != nil {
		t.Fatal(err)
	}
	dirs := map[string]bool{}
	for _, f := range finishedFiles(t, out) {
		dirs[filepath.Dir(f)] = true
	}
	n := 0
	for _, d := range slices.Sorted(mapKeys(dirs)) {
		lineOf := func(m map[string]any) string { return m["line"].(string) }
		for _, l := range readBack(t, filepath.Join(out, d), ParquetFile(), lineOf) {
			n++
			rec := eventOf(l)
			want := filepath.Join("dt="+rec["day"].(time.Time).Format(time.DateOnly), "country="+HiveDefaultPartition)
			if c, ok := rec["country"]; ok {
				want = filepath.Join("dt="+rec["day"].(time.Time).Format(time.DateOnly), "country="+hiveEscape(c.(string)))
			}
			if d != want {
				t.Fatalf("record %s in %s, want %s", l, d, want)
			}
		}
	}
	if n != len(inputs) {
		t.Fatalf("%d records under the partitions, want %d", n, len(inputs))
	}
	if !dirs[filepath.Join("dt=2026-12-02", "country=IT%2Fx")] || !dirs[filepath.Join("dt=2026-12-20", "country=FR")] {
		t.Errorf("partition directories %v", dirs)
	}
	if _, err := os.Stat(filepath.Join(out, "dt=2026-12-02", "country=IT", "x")); err == nil {
		t.Error("a value with '/' made a directory level")
	}
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
