package testsink_test

import (
	"context"
	"fmt"
	"slices"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// A job writes into the two-phase test sink: each writer stages one
// transaction per checkpoint, committed once the checkpoint completed.
// When the job ends, everything is committed and nothing is left staged.
func ExampleNewTwoPhase() {
	store := testsink.NewStore[int64]()
	env := stream.New(stream.Parallelism(2), stream.Logger(stream.DiscardLogger()))
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(100), datagen.Splits(2))
	stream.SinkTo(stream.FromSource(env, gen, watermark.None[int64](), "numbers"), testsink.NewTwoPhase(store), "out")
	if _, err := env.Execute(context.Background(), "orders"); err != nil {
		fmt.Println(err)
		return
	}
	got := store.Committed()
	slices.Sort(got)
	fmt.Println(len(got), got[0], got[99], "staged:", store.Staged())
	// Output: 100 0 99 staged: []
}
