package faultinject_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

func ExampleRandomPlan() {
	plan := faultinject.RandomPlan(7, 3, faultinject.Kinds(), 2, 1000, 5)
	for _, f := range plan.Faults() {
		fmt.Println(f)
	}
	// Output:
	// BeforeCommit(subtask=1, checkpoint=5)
	// BeforeCommit(subtask=1, checkpoint=4)
	// AfterRecords(subtask=0, records=45)
}

// A committer that fails between prepare and commit: the job restarts from
// its last completed checkpoint, commits the restored committables again,
// and every record is committed exactly once.
func ExampleWrapSink() {
	store := testsink.NewStore[int64]()
	plan := faultinject.NewPlan(faultinject.Fault{Kind: faultinject.BeforeCommit, Subtask: 0, Checkpoint: 1})
	env := stream.New(stream.Parallelism(1), stream.CheckpointEvery(10*time.Millisecond),
		stream.Restart(restart.FixedDelay(3, 10*time.Millisecond)), stream.Logger(stream.DiscardLogger()))
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(1000), datagen.RatePerSecond(20000))
	stream.SinkTo(stream.FromSource(env, gen, watermark.None[int64](), "numbers"),
		faultinject.WrapSink(testsink.NewTwoPhase(store), plan), "out")
	res, err := env.Execute(context.Background(), "wrapped")
	if err != nil {
		fmt.Println(err)
		return
	}
	got := store.Committed()
	slices.Sort(got)
	fmt.Println(len(got), got[0], got[len(got)-1], len(slices.Compact(got)), res.Restarts > 0)
	fmt.Println(plan)
	// Output:
	// 1000 0 999 1000 true
	// faultinject.Plan{BeforeCommit(subtask=0, checkpoint=1) [fired]}
}
