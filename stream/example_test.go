package stream_test

import (
	"context"
	"fmt"
	"os"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/print"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

func Example() {
	env := stream.New(stream.Logger(stream.DiscardLogger()))
	numbers := stream.FromSource(env, datagen.New(func(i int64) int64 { return i }, datagen.Count(6)), watermark.None[int64](), "numbers")
	odd := stream.Filter(numbers, func(v int64) bool { return v%2 == 1 }, stream.Name("odd"))
	squares := stream.Map(odd, func(v int64) string { return fmt.Sprint(v * v) }, stream.Name("square"))
	stream.SinkTo(squares, print.New[string](print.To(os.Stdout)), "print")
	if _, err := env.Execute(context.Background(), "odd-squares"); err != nil {
		fmt.Println(err)
	}
	// Output:
	// 1
	// 9
	// 25
}

// A job at parallelism 4 with checkpoints, writing exactly once into a
// two-phase sink; the result carries the job's metrics.
func Example_exactlyOnce() {
	store := testsink.NewStore[int64]()
	env := stream.New(stream.Parallelism(4), stream.Logger(stream.DiscardLogger()))
	src := datagen.New(func(i int64) int64 { return i }, datagen.Count(10_000), datagen.Splits(8))
	doubled := stream.Map(stream.FromSource(env, src, watermark.None[int64](), "gen"), func(v int64) int64 { return 2 * v }, stream.Name("double"))
	stream.SinkTo(stream.Rebalance(doubled), testsink.NewTwoPhase(store), "sink")
	res, err := env.Execute(context.Background(), "double")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(len(store.Committed()), res.Counter(metrics.NumRecordsIn, "operator", "gen"), res.Counter(metrics.NumRecordsSend))
	// Output: 10000 10000 10000
}
