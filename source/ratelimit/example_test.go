package ratelimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/source/ratelimit"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// Throttle any source: here 2,000 generated records to 20,000 records per
// second over two readers (10,000 each), so the job takes about 0.1 s
// instead of microseconds. The enumerator, splits and checkpoints are the
// generator's own.
func Example() {
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(2000), datagen.Splits(2))
	throttled := ratelimit.Wrap(gen, ratelimit.PerSecond(20_000))

	store := testsink.NewStore[int64]()
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(20*time.Millisecond), stream.Logger(stream.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, throttled, watermark.None[int64](), "gen"), testsink.NewTwoPhase(store), "sink")
	if _, err := env.Execute(context.Background(), "throttled"); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(store.Committed()), "records, limited by", throttled.Strategy())
	// Output:
	// 2000 records, limited by PerSecond(20000)
}

// A per-checkpoint limit: every checkpoint interval holds at most 4096
// records of the source, 2048 per reader — two polls of the generator,
// which emits 1024 records per poll, so the limit is exact.
func ExamplePerCheckpoint() {
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(20_000), datagen.Splits(2))
	throttled := ratelimit.Wrap(gen, ratelimit.PerCheckpoint(4096))

	store := testsink.NewStore[int64]()
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(5*time.Millisecond), stream.Logger(stream.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, throttled, watermark.None[int64](), "gen"), testsink.NewTwoPhase(store), "sink")
	if _, err := env.Execute(context.Background(), "per-checkpoint"); err != nil {
		fmt.Println(err)
		return
	}
	largest := 0
	for _, tx := range store.CommittedTxns() {
		largest = max(largest, len(tx.Records))
	}
	fmt.Println(len(store.Committed()), "records; largest checkpoint of a reader:", largest)
	// Output:
	// 20000 records; largest checkpoint of a reader: 2048
}
