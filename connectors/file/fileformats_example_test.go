package file_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluice-io/sluice/connectors/file"
	"github.com/sluice-io/sluice/connectors/print"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// orderSchema is the Avro record schema of the examples; ParquetBulk
// takes the same schema language.
const orderSchema = `{"type": "record", "name": "Order", "fields": [
  {"name": "id", "type": "long"},
  {"name": "customer", "type": "string"},
  {"name": "total", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
  {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
  {"name": "coupon", "type": ["null", "string"], "default": null}
]}`

// writeOrders runs a job that reads the JSON lines under in and writes
// them with bulk into out.
func writeOrders(in, out string, bulk file.BulkFormat[map[string]any], opts ...file.SinkOption) error {
	sink, err := file.NewBulkSink(out, bulk, opts...)
	if err != nil {
		return err
	}
	env := stream.New(stream.JobID("a1b2c3d4e5f60718"))
	orders := stream.FromSource(env, file.NewSource(file.JSONLines[map[string]any](), []string{in}), watermark.None[map[string]any](), "orders")
	stream.SinkTo(orders, sink, "files")
	_, err = env.Execute(context.Background(), "write")
	return err
}

// readOrders runs a job that prints the records format reads under dir.
func readOrders(dir string, format file.Format[map[string]any]) error {
	env := stream.New()
	orders := stream.FromSource(env, file.NewSource(format, []string{dir}), watermark.None[map[string]any](), "orders")
	line := func(m map[string]any) string {
		return fmt.Sprintf("%d %s %s %s %v", m["id"], m["customer"], m["total"], m["placed"].(time.Time).Format(time.RFC3339), m["coupon"])
	}
	stream.SinkTo(stream.Map(orders, line), print.New[string](), "print")
	_, err := env.Execute(context.Background(), "read")
	return err
}

func orderInput() (string, func()) {
	in, _ := os.MkdirTemp("", "orders")
	_ = os.WriteFile(filepath.Join(in, "orders.jsonl"), []byte(
		`{"id": 1, "customer": "ada", "total": 12.50, "placed": "2026-12-01T07:00:00Z"}`+"\n"+
			`{"id": 2, "customer": "bob", "total": 3, "placed": "2026-12-01T07:05:00Z", "coupon": "XMAS"}`+"\n"), 0o644)
	return in, func() { os.RemoveAll(in) }
}

// ExampleAvroBulk writes JSON records as an Avro container file (the JSON
// numbers and RFC 3339 strings are coerced to the schema's decimal and
// timestamp) and reads it back with AvroFile.
func ExampleAvroBulk() {
	in, done := orderInput()
	defer done()
	out, _ := os.MkdirTemp("", "avro")
	defer os.RemoveAll(out)

	err := writeOrders(in, out, file.AvroBulk(orderSchema, file.AvroCodec("zstandard")),
		file.WithBuckets(file.BasePathBuckets[map[string]any]()), file.PartSuffix(".avro"))
	if err != nil {
		fmt.Println(err)
		return
	}
	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		fmt.Println(e.Name())
	}
	if err := readOrders(out, file.AvroFile("")); err != nil {
		fmt.Println(err)
	}
	// Output:
	// part-a1b2c3d4e5f60718-0-0.avro
	// 1 ada 12.50 2026-12-01T07:00:00Z <nil>
	// 2 bob 3.00 2026-12-01T07:05:00Z XMAS
}

// ExampleAvroFile reads container files through a newer reader schema: a
// field the files do not have takes its default.
func ExampleAvroFile() {
	in, done := orderInput()
	defer done()
	out, _ := os.MkdirTemp("", "avro")
	defer os.RemoveAll(out)
	if err := writeOrders(in, out, file.AvroBulk(orderSchema), file.WithBuckets(file.BasePathBuckets[map[string]any]())); err != nil {
		fmt.Println(err)
		return
	}
	v2 := `{"type": "record", "name": "Order", "fields": [
	  {"name": "id", "type": "long"},
	  {"name": "channel", "type": "string", "default": "web"}]}`
	env := stream.New()
	orders := stream.FromSource(env, file.NewSource(file.AvroFile(v2), []string{out}), watermark.None[map[string]any](), "orders")
	stream.SinkTo(orders, print.New[map[string]any](), "print")
	if _, err := env.Execute(context.Background(), "read"); err != nil {
		fmt.Println(err)
	}
	// Output:
	// map[channel:web id:1]
	// map[channel:web id:2]
}

// ExampleParquetBulk writes the records as Parquet, partitioned
// Hive-style by the day they were placed, and reads them back with
// ParquetFile.
func ExampleParquetBulk() {
	in, done := orderInput()
	defer done()
	out, _ := os.MkdirTemp("", "parquet")
	defer os.RemoveAll(out)

	err := writeOrders(in, out, file.ParquetBulk(orderSchema, file.ParquetCompression("zstd")),
		file.WithBuckets(file.HivePartitionsOf(file.HiveTime("dt", "2006-01-02", "placed"), file.HiveTime("hour", "15", "placed"))),
		file.PartSuffix(".parquet"))
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(out, p)
			fmt.Println(filepath.ToSlash(rel))
		}
		return nil
	})
	if err := readOrders(out, file.ParquetFile()); err != nil {
		fmt.Println(err)
	}
	// Output:
	// dt=2026-12-01/hour=07/part-a1b2c3d4e5f60718-0-0.parquet
	// 1 ada 12.50 2026-12-01T07:00:00Z <nil>
	// 2 bob 3.00 2026-12-01T07:05:00Z XMAS
}

// ExampleHivePartitions names each record's directory after its fields;
// a missing field is Hive's default partition.
func ExampleHivePartitions() {
	a := file.HivePartitions("country", "city")
	for _, rec := range []map[string]any{
		{"country": "FR", "city": "Paris"},
		{"country": "US", "city": "New York/Manhattan"},
		{"country": "IT"},
	} {
		dir, _ := a.Bucket(rec, file.BucketContext{})
		fmt.Println(dir)
	}
	// Output:
	// country=FR/city=Paris
	// country=US/city=New York%2FManhattan
	// country=IT/city=__HIVE_DEFAULT_PARTITION__
}

// ExampleParquetFile reads Parquet files with the source; the offsets in
// its checkpoints are row numbers.
func ExampleParquetFile() {
	in, done := orderInput()
	defer done()
	out, _ := os.MkdirTemp("", "parquet")
	defer os.RemoveAll(out)
	if err := writeOrders(in, out, file.ParquetBulk(orderSchema), file.WithBuckets(file.BasePathBuckets[map[string]any]())); err != nil {
		fmt.Println(err)
		return
	}
	env := stream.New()
	src := file.NewSource(file.ParquetFile(), []string{out},
		file.PositionAs(func(m map[string]any, p file.Position) map[string]any {
			m["row"] = p.Offset
			return m
		}))
	orders := stream.FromSource(env, src, watermark.None[map[string]any](), "orders")
	stream.SinkTo(stream.Map(orders, func(m map[string]any) string { return fmt.Sprint(m["row"], " ", m["customer"]) }), print.New[string](), "print")
	if _, err := env.Execute(context.Background(), "read"); err != nil {
		fmt.Println(err)
	}
	// Output:
	// 0 ada
	// 1 bob
}
