package registry

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/file"
)

func TestParsePartitionBy(t *testing.T) {
	ps, err := parsePartitionBy([]string{"country", "dt=2006-01-02@placed", "hour=15@meta.timestamp", "user.city"})
	if err != nil {
		t.Fatal(err)
	}
	want := []partSpec{{"country", "", "country"}, {"dt", "2006-01-02", "placed"}, {"hour", "15", "meta.timestamp"}, {"user.city", "", "user.city"}}
	if len(ps) != len(want) {
		t.Fatalf("got %+v", ps)
	}
	for i := range ps {
		if ps[i] != want[i] {
			t.Fatalf("item %d: %+v, want %+v", i, ps[i], want[i])
		}
	}
	for _, c := range []struct{ item, want string }{
		{"dt=2006-01-02", "the @ is missing"},
		{"dt=@ts", "layout is empty"},
		{"dt=day@ts", "no element of Go's reference time"},
		{"=2006@ts", "name is empty"},
		{"dt=2006@", "field is empty"},
		{"meta.topic", "only meta.timestamp"},
		{"meta.timestamp", "only meta.timestamp"},
		{"a/b", "path separator"},
	} {
		if _, err := parsePartitionBy([]string{c.item}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.item, err, c.want)
		}
	}
	if _, err := parsePartitionBy([]string{"a", "a"}); err == nil || !strings.Contains(err.Error(), "named twice") {
		t.Errorf("repeated partition: %v", err)
	}
}

// TestRecordPartitions: fields, times of fields and meta.timestamp name
// Hive-style directories; a missing field or timestamp is the default
// partition; undecoded records are decoded.
func TestRecordPartitions(t *testing.T) {
	ps, err := parsePartitionBy([]string{"dt=2006-01-02@meta.timestamp", "country", "h=15@placed"})
	if err != nil {
		t.Fatal(err)
	}
	a := recordPartitions(ps)
	ts := time.Date(2026, 12, 1, 7, 40, 0, 0, time.UTC)
	codecs, err := sourceCodecs(NewOptions(map[string]any{"format": "json"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		r    Record
		want string
	}{
		{NewRecord(map[string]any{"country": "FR", "placed": "2026-11-30T23:10:00Z"}).WithTimestamp(ts), "dt=2026-12-01/country=FR/h=23"},
		{NewRecord(map[string]any{"placed": int64(0)}).WithTimestamp(ts), "dt=2026-12-01/country=__HIVE_DEFAULT_PARTITION__/h=00"},
		{NewRecord(map[string]any{"country": "a/b"}), "dt=__HIVE_DEFAULT_PARTITION__/country=a%2Fb/h=__HIVE_DEFAULT_PARTITION__"},
		{RawRecord([]byte(`{"country": "DE", "placed": "2026-12-01T05:00:00+02:00"}`), codecs), "dt=__HIVE_DEFAULT_PARTITION__/country=DE/h=03"},
	} {
		got, err := a.Bucket(c.r, file.BucketContext{})
		if err != nil || got != c.want {
			t.Errorf("%v: bucket %q, %v; want %q", c.r.Value(), got, err, c.want)
		}
	}
}

// TestFileSinkStep: the step of format avro/parquet decodes, refuses a
// value that is not an object or does not fit the schema (naming the
// field), and passes the others; json without partitions has none.
func TestFileSinkStep(t *testing.T) {
	schema := `{"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]}`
	step, reads, err := fileSinkStep("out", NewOptions(map[string]any{"format": "parquet", "schema": schema, "partition-by": []string{}}))
	if err != nil || step == nil || !reads {
		t.Fatalf("step %v, reads %v, err %v", step != nil, reads, err)
	}
	if _, err := step(NewRecord(map[string]any{"id": int64(1)})); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		v    any
		want string
	}{
		{map[string]any{"id": "x"}, `option schema: file: Avro record: value does not fit the Avro schema: field id: string "x" for long`},
		{[]any{int64(1)}, "option format: the value is a list, not an object"},
	} {
		if _, err := step(NewRecord(c.v)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.v, err, c.want)
		}
	}
	step, _, err = fileSinkStep("out", NewOptions(map[string]any{"format": "json", "partition-by": []string{"dt=2006@meta.timestamp"}}))
	if err != nil || step != nil {
		t.Fatalf("json partitioned by meta.timestamp only: step %v, err %v", step != nil, err)
	}
}

func TestFileSuffixFollowsFormat(t *testing.T) {
	for f, want := range map[string]string{"json": ".jsonl", "csv": ".csv", "string": ".txt", "raw": ".txt", "avro": ".avro", "parquet": ".parquet"} {
		if got := fileSuffix(NewOptions(map[string]any{"format": f})); got != want {
			t.Errorf("%s: %q, want %q", f, got, want)
		}
	}
	if got := fileSuffix(NewOptions(map[string]any{"format": "avro", "suffix": ".bin"})); got != ".bin" {
		t.Errorf("suffix set: %q", got)
	}
}
