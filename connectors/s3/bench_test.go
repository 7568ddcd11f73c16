package s3

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/parquet-go/parquet-go"
	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/file"
	"github.com/sluice-io/sluice/connectors/iceberg"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// benchSchema is the Avro schema of the benchmark's records: five fields,
// about 40 bytes of values.
const benchSchema = `{"type":"record","name":"Click","fields":[
 {"name":"id","type":"long"},
 {"name":"user","type":"string"},
 {"name":"score","type":"double"},
 {"name":"ok","type":"boolean"},
 {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}}]}`

// click is the same record for the hand-written parquet-go writer.
type click struct {
	ID    int64     `parquet:"id"`
	User  string    `parquet:"user"`
	Score float64   `parquet:"score"`
	OK    bool      `parquet:"ok"`
	TS    time.Time `parquet:"ts,timestamp(millisecond)"`
}

func benchClick(i int) click {
	return click{ID: int64(i), User: fmt.Sprintf("user-%04d", i%9973), Score: float64(i%1000) / 8, OK: i%3 == 0,
		TS: time.UnixMilli(1_796_000_000_000 + int64(i)).UTC()}
}

func (c click) record() map[string]any {
	return map[string]any{"id": c.ID, "user": c.User, "score": c.Score, "ok": c.OK, "ts": c.TS}
}

// cpuTime is the process's user + system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkParquetWrite writes one Parquet file of 1M records (200k with
// -short), snappy, 128 MiB row groups: with the file sink (a bounded job
// at parallelism 1 from an in-memory generator of map records) to a local
// directory and to s3:// (multipart uploads of 5 MiB parts, the test
// client's PartSize), and with a hand-written parquet-go GenericWriter of
// structs of the same file to a local file (fsync and rename) and to S3
// (the file built in memory, one PutObject) — from structs made
// beforehand, and (parquet-go-maps) from the same map records as the
// sink's, converted by a type switch per field — and, as a further
// reference, a hand-written parquet-go writer of the map records
// (converted to parquet.Row by hand) into memory. It reports rows/s and
// this process's CPU time per file and per million rows (the S3 server's
// is not counted). local/iceberg writes the same records with the Iceberg
// sink (connectors/iceberg: Arrow columns, written by iceberg-go and
// arrow-go's Parquet writer) into a new table of a SQLite catalog with a
// local warehouse, one snapshot at the end. memory/sluice-writer
// (ParquetBulk's writer alone) against
// memory/parquet-go-structs-from-maps, and local/sluice-discard (the job
// into a bulk format that drops the records), split the pipeline's cost.
// Interleave rounds with -count.
//
//	SLUICE_S3_ENDPOINT=… go test -run '^$' -bench ParquetWrite -benchtime 3x -count 3 ./connectors/s3/
func BenchmarkParquetWrite(b *testing.B) {
	rows := 1_000_000
	if testing.Short() {
		rows = 200_000
	}
	clicks := make([]click, rows)
	recs := make([]map[string]any, rows)
	for i := range clicks {
		clicks[i] = benchClick(i)
		recs[i] = clicks[i].record()
	}
	var c *Client
	var bucket string
	if os.Getenv("SLUICE_S3_ENDPOINT") != "" {
		c, bucket = testClient(b)
	}
	report := func(b *testing.B, cpu time.Duration) {
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
		b.ReportMetric(cpu.Seconds()/(float64(rows)*float64(b.N)/1e6), "cpu-s/Mrows")
	}
	sluice := func(b *testing.B, dir string, opts ...file.SinkOption) {
		env := stream.New(stream.Parallelism(1), stream.Logger(stream.DiscardLogger()))
		gen := datagen.New(func(i int64) map[string]any { return recs[i] }, datagen.Count(int64(rows)))
		snk, err := file.NewBulkSink(dir, file.ParquetBulk(benchSchema), append(opts, file.PartSuffix(".parquet"),
			file.WithBuckets(file.BasePathBuckets[map[string]any]()))...)
		if err != nil {
			b.Fatal(err)
		}
		stream.SinkTo(stream.FromSource(env, gen, watermark.None[map[string]any](), "gen"), snk, "write")
		if _, err := env.Execute(context.Background(), "bench-parquet"); err != nil {
			b.Fatal(err)
		}
	}
	// handWritten writes the file with parquet-go's struct writer: from
	// the structs made beforehand, or (fromMaps) from the same map records
	// as the sink's, each converted with a type switch per field into a
	// struct, 1024 at a time (connectors/file's parquet-handwritten case).
	handWritten := func(b *testing.B, w *bytes.Buffer, fromMaps bool) {
		pw := parquet.NewGenericWriter[click](w, parquet.Compression(&parquet.Snappy))
		if !fromMaps {
			if _, err := pw.Write(clicks); err != nil {
				b.Fatal(err)
			}
		} else {
			batch := make([]click, 0, 1024)
			for i, m := range recs {
				id, _ := m["id"].(int64)
				user, _ := m["user"].(string)
				score, _ := m["score"].(float64)
				ok, _ := m["ok"].(bool)
				ts, _ := m["ts"].(time.Time)
				batch = append(batch, click{ID: id, User: user, Score: score, OK: ok, TS: ts})
				if len(batch) == cap(batch) || i == len(recs)-1 {
					if _, err := pw.Write(batch); err != nil {
						b.Fatal(err)
					}
					batch = batch[:0]
				}
			}
		}
		if err := pw.Close(); err != nil {
			b.Fatal(err)
		}
	}
	local := func(b *testing.B, fromMaps bool) {
		cpu := cpuTime()
		var buf bytes.Buffer
		for b.Loop() {
			dir := b.TempDir()
			f, err := os.Create(filepath.Join(dir, ".part.parquet.inprogress"))
			if err != nil {
				b.Fatal(err)
			}
			buf.Reset()
			handWritten(b, &buf, fromMaps)
			if _, err := f.Write(buf.Bytes()); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
			f.Close()
			if err := os.Rename(f.Name(), filepath.Join(dir, "part.parquet")); err != nil {
				b.Fatal(err)
			}
		}
		report(b, cpuTime()-cpu)
		b.ReportMetric(float64(buf.Len()), "bytes/file")
	}
	// rowsWritten is a hand-written writer of the map records: each
	// converted to a parquet.Row by hand (what the sink must do, without
	// its schema coercion), written with parquet-go's untyped writer.
	schema := parquet.SchemaOf(click{})
	rowsWritten := func(b *testing.B, w *bytes.Buffer) {
		pw := parquet.NewWriter(w, schema, parquet.Compression(&parquet.Snappy))
		batch := make([]parquet.Row, 0, 1024)
		for i, r := range recs {
			batch = append(batch, parquet.Row{
				parquet.Int64Value(r["id"].(int64)).Level(0, 0, 0),
				parquet.ByteArrayValue([]byte(r["user"].(string))).Level(0, 0, 1),
				parquet.DoubleValue(r["score"].(float64)).Level(0, 0, 2),
				parquet.BooleanValue(r["ok"].(bool)).Level(0, 0, 3),
				parquet.Int64Value(r["ts"].(time.Time).UnixMilli()).Level(0, 0, 4),
			})
			if len(batch) == cap(batch) || i == len(recs)-1 {
				if _, err := pw.WriteRows(batch); err != nil {
					b.Fatal(err)
				}
				batch = batch[:0]
			}
		}
		if err := pw.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("memory/parquet-go-maps", func(b *testing.B) {
		cpu := cpuTime()
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			rowsWritten(b, &buf)
		}
		report(b, cpuTime()-cpu)
	})
	// memory/parquet-go-structs-from-maps is the hand-written writer of the
	// map records into memory, and memory/sluice-writer the file sink's
	// Parquet writer (ParquetBulk) alone on the same records into memory:
	// the writer's share of the pipeline's cost.
	b.Run("memory/parquet-go-structs-from-maps", func(b *testing.B) {
		cpu := cpuTime()
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			handWritten(b, &buf, true)
		}
		report(b, cpuTime()-cpu)
	})
	b.Run("memory/sluice-writer", func(b *testing.B) {
		cpu := cpuTime()
		var buf bytes.Buffer
		for b.Loop() {
			buf.Reset()
			w, err := file.ParquetBulk(benchSchema).NewWriter(&buf)
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
		report(b, cpuTime()-cpu)
	})
	// local/sluice-discard is the pipeline into a bulk format that drops
	// the records: the job runtime's and the file sink's share.
	b.Run("local/sluice-discard", func(b *testing.B) {
		cpu := cpuTime()
		for b.Loop() {
			env := stream.New(stream.Parallelism(1), stream.Logger(stream.DiscardLogger()))
			gen := datagen.New(func(i int64) map[string]any { return recs[i] }, datagen.Count(int64(rows)))
			snk, err := file.NewBulkSink(b.TempDir(), discardBulk{}, file.PartSuffix(".discard"),
				file.WithBuckets(file.BasePathBuckets[map[string]any]()))
			if err != nil {
				b.Fatal(err)
			}
			stream.SinkTo(stream.FromSource(env, gen, watermark.None[map[string]any](), "gen"), snk, "write")
			if _, err := env.Execute(context.Background(), "bench-discard"); err != nil {
				b.Fatal(err)
			}
		}
		report(b, cpuTime()-cpu)
	})
	b.Run("local/sluice", func(b *testing.B) {
		cpu := cpuTime()
		var size int64
		for b.Loop() {
			dir := b.TempDir()
			sluice(b, dir)
			size = fileBytes(b, dir)
		}
		report(b, cpuTime()-cpu)
		// The same file as the hand-written writer's, give or take the
		// schema's column order and name: compare bytes/file.
		b.ReportMetric(float64(size), "bytes/file")
	})
	b.Run("local/parquet-go", func(b *testing.B) { local(b, false) })
	b.Run("local/parquet-go-maps", func(b *testing.B) { local(b, true) })
	b.Run("local/iceberg", func(b *testing.B) {
		cols, err := iceberg.ParseColumns("id long not null", "user string not null", "score double not null", "ok boolean not null", "ts timestamptz not null")
		if err != nil {
			b.Fatal(err)
		}
		cpu := cpuTime()
		for b.Loop() {
			dir := b.TempDir()
			cat := iceberg.SQLCatalog("bench", filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"), nil)
			snk, err := iceberg.NewSink(cat, []string{"bench", "clicks"}, func(m map[string]any) (iceberg.Row, error) { return m, nil },
				iceberg.CreateTable(cols, nil, nil))
			if err != nil {
				b.Fatal(err)
			}
			env := stream.New(stream.Parallelism(1), stream.Logger(stream.DiscardLogger()))
			gen := datagen.New(func(i int64) map[string]any { return recs[i] }, datagen.Count(int64(rows)))
			stream.SinkTo(stream.FromSource(env, gen, watermark.None[map[string]any](), "gen"), snk, "write")
			if _, err := env.Execute(context.Background(), "bench-iceberg"); err != nil {
				b.Fatal(err)
			}
		}
		report(b, cpuTime()-cpu)
	})
	if c == nil {
		b.Log("SLUICE_S3_ENDPOINT is not set: the s3 cases are skipped")
		return
	}
	n := 0
	b.Run("s3/sluice", func(b *testing.B) {
		cpu := cpuTime()
		for b.Loop() {
			n++
			sluice(b, fmt.Sprintf("sluice-%d", n), file.WithObjectStore(c.Store(bucket)))
		}
		report(b, cpuTime()-cpu)
	})
	put := func(b *testing.B, fromMaps bool) {
		cpu := cpuTime()
		var buf bytes.Buffer
		for b.Loop() {
			n++
			buf.Reset()
			handWritten(b, &buf, fromMaps)
			_, err := c.api.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(fmt.Sprintf("hand-%d/part.parquet", n)),
				Body: bytes.NewReader(buf.Bytes()), ContentLength: aws.Int64(int64(buf.Len()))})
			if err != nil {
				b.Fatal(err)
			}
		}
		report(b, cpuTime()-cpu)
	}
	b.Run("s3/parquet-go", func(b *testing.B) { put(b, false) })
	b.Run("s3/parquet-go-maps", func(b *testing.B) { put(b, true) })
}

// fileBytes is the size of the one .parquet file the sink wrote in dir.
func fileBytes(b *testing.B, dir string) int64 {
	b.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.parquet"))
	if err != nil || len(m) != 1 {
		b.Fatalf("want one part file in %s, found %v (%v)", dir, m, err)
	}
	fi, err := os.Stat(m[0])
	if err != nil {
		b.Fatal(err)
	}
	return fi.Size()
}

// discardBulk is a bulk format that drops every record.
type discardBulk struct{}

func (discardBulk) NewWriter(io.Writer) (file.BulkWriter[map[string]any], error) {
	return discardBulk{}, nil
}
func (discardBulk) Write(map[string]any) error { return nil }
func (discardBulk) Finish() error              { return nil }
