package iceberg_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/iceberg"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// A bounded stream of orders appended to an Iceberg table that the sink
// creates in a SQLite SQL catalog, partitioned by day of the event time.
func Example() {
	dir, _ := os.MkdirTemp("", "iceberg-example")
	defer os.RemoveAll(dir)
	cat := iceberg.SQLCatalog("default", filepath.Join(dir, "catalog.db"), filepath.Join(dir, "warehouse"), nil)
	cols, _ := iceberg.ParseColumns("id long not null", "customer string", "ts timestamptz")
	part, _ := iceberg.ParsePartitionSpec("day(ts)")
	type order struct {
		ID       int64
		Customer string
	}
	s, err := iceberg.NewSink(cat, []string{"shop", "orders"}, func(o order) (iceberg.Row, error) {
		return iceberg.Row{"id": o.ID, "customer": o.Customer}, nil
	}, iceberg.CreateTable(cols, part, nil), iceberg.EventTimeColumn("ts"))
	if err != nil {
		fmt.Println(err)
		return
	}
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(50*time.Millisecond), stream.Logger(stream.DiscardLogger()))
	src := datagen.New(func(k int64) order { return order{ID: k, Customer: fmt.Sprint("c", k%10)} }, datagen.Count(1000),
		datagen.Timestamps(func(k int64) int64 { return 1_780_000_000_000 + k*60_000 }))
	stream.SinkTo(stream.FromSource(env, src, watermark.None[order](), "orders"), s, "iceberg")
	if _, err := env.Execute(context.Background(), "orders-to-iceberg"); err != nil {
		fmt.Println(err)
		return
	}
	c, err := cat(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	if cl, ok := c.(interface{ Close() error }); ok {
		defer cl.Close()
	}
	tbl, _ := c.LoadTable(context.Background(), []string{"shop", "orders"})
	fmt.Println("records:", tbl.CurrentSnapshot().Summary.Properties["total-records"])
	// Output: records: 1000
}
