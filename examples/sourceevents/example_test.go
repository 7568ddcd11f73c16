package sourceevents_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/examples/sourceevents"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// Six jobs on two readers. Readers ask for work and report finished jobs
// with events; after three jobs the enumerator pauses both readers until a
// checkpoint has captured the work so far, then resumes them.
func Example() {
	sizes := []int{500, 300, 800, 200, 600, 400}
	src := sourceevents.New(sizes, 3)

	store := testsink.NewStore[sourceevents.Item]()
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(10*time.Millisecond), stream.Logger(stream.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, src, watermark.None[sourceevents.Item](), "jobs"), testsink.NewTwoPhase(store), "sink")
	if _, err := env.Execute(context.Background(), "source-events"); err != nil {
		fmt.Println(err)
		return
	}

	rep := src.Report()
	total, tallied := 0, 0
	for i, n := range sizes {
		total += n
		tallied += rep.Tally[fmt.Sprint("job-", i)]
	}
	seen := map[sourceevents.Item]bool{}
	for _, it := range store.Committed() {
		seen[it] = true
	}
	beforePause, upToMilestone := 0, 0
	for _, n := range rep.BeforePause {
		beforePause += n
	}
	for _, tx := range store.CommittedTxns() {
		if tx.CheckpointID <= rep.Milestone {
			upToMilestone += len(tx.Records)
		}
	}
	fmt.Println("items:", len(store.Committed()), "distinct:", len(seen), "want:", total)
	fmt.Println("tally of Done events:", tallied)
	fmt.Println("readers paused:", len(rep.BeforePause), "resumed:", rep.Resumed)
	fmt.Println("milestone checkpoint holds the work before the pause:", upToMilestone == beforePause)
	// Output:
	// items: 2800 distinct: 2800 want: 2800
	// tally of Done events: 2800
	// readers paused: 2 resumed: true
	// milestone checkpoint holds the work before the pause: true
}
