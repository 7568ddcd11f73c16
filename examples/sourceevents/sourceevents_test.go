package sourceevents_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/examples/sourceevents"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// run executes the job: the source (wrapped by the plan, if any) into the
// two-phase test sink, checkpoints every 10 ms.
func run(t *testing.T, src *sourceevents.Source, p int, plan *faultinject.Plan) (*testsink.Store[sourceevents.Item], *stream.Result) {
	t.Helper()
	store := testsink.NewStore[sourceevents.Item]()
	env := stream.New(stream.Parallelism(p), stream.CheckpointEvery(10*time.Millisecond),
		stream.Restart(restart.FixedDelay(3, 0)), stream.Logger(stream.DiscardLogger()))
	s := stream.FromSource(env, faultinject.WrapSource(src, plan), watermark.None[sourceevents.Item](), "jobs")
	stream.SinkTo(s, testsink.NewTwoPhase(store), "sink")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := env.Execute(ctx, "source-events")
	if err != nil {
		t.Fatal(err)
	}
	return store, res
}

// checkItems asserts that got holds every item of every job once.
func checkItems(t *testing.T, got []sourceevents.Item, sizes []int) {
	t.Helper()
	seen := map[sourceevents.Item]int{}
	for _, it := range got {
		seen[it]++
	}
	want := 0
	for j, n := range sizes {
		for k := range n {
			it := sourceevents.Item{Job: fmt.Sprint("job-", j), Seq: k}
			if seen[it] != 1 {
				t.Fatalf("item %v seen %d times", it, seen[it])
			}
		}
		want += n
	}
	if len(got) != want {
		t.Fatalf("%d items, want %d", len(got), want)
	}
}

// TestProtocol: every item once; the tally of Done events equals the job
// sizes; every reader paused and was resumed; and the milestone checkpoint
// holds, for every reader, exactly the records it had emitted when it
// paused — nothing was emitted during the pause.
func TestProtocol(t *testing.T) {
	sizes := []int{500, 300, 800, 200, 600, 400, 700, 100}
	for _, p := range []int{1, 2, 3} {
		t.Run(fmt.Sprint("p=", p), func(t *testing.T) {
			src := sourceevents.New(sizes, 4)
			store, _ := run(t, src, p, nil)
			got, err := store.Final()
			if err != nil {
				t.Fatal(err)
			}
			checkItems(t, got, sizes)
			rep := src.Report()
			for j, n := range sizes {
				if id := fmt.Sprint("job-", j); rep.Tally[id] != n {
					t.Errorf("tally of %s is %d, want %d", id, rep.Tally[id], n)
				}
			}
			if !rep.Resumed || len(rep.BeforePause) != p {
				t.Fatalf("report %+v: want %d paused readers, resumed", rep, p)
			}
			upTo := map[int]int{}
			for _, tx := range store.CommittedTxns() {
				if tx.CheckpointID <= rep.Milestone {
					upTo[tx.Subtask] += len(tx.Records)
				}
			}
			for sub := range p {
				if upTo[sub] != rep.BeforePause[sub] {
					t.Errorf("reader %d: checkpoints up to the milestone %d hold %d records, it paused after %d",
						sub, rep.Milestone, upTo[sub], rep.BeforePause[sub])
				}
			}
		})
	}
}

// TestMoreReadersThanJobs: readers that never get a job end too, and
// without a milestone nothing pauses.
func TestMoreReadersThanJobs(t *testing.T) {
	sizes := []int{100, 50}
	src := sourceevents.New(sizes, 0)
	store, _ := run(t, src, 4, nil)
	got, err := store.Final()
	if err != nil {
		t.Fatal(err)
	}
	checkItems(t, got, sizes)
	if rep := src.Report(); rep.Resumed || len(rep.BeforePause) != 0 {
		t.Fatalf("paused without a milestone: %+v", rep)
	}
}

// TestFailures: a reader fails mid-job and a snapshot fails; the job
// restores splits (and, globally, enumerator state), and every item still
// arrives exactly once: events lost with a failed reader do not matter, the
// positions are in the splits. The job ends: a pause in progress is
// extended to restarted readers and ends with the next checkpoint. (The
// tally, fed by events, is not exact after failures; it is only logged.)
func TestFailures(t *testing.T) {
	sizes := []int{500, 300, 800, 200, 600, 400, 700, 100}
	plan := faultinject.NewPlan(
		faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: faultinject.AnySubtask, Records: 700},
		faultinject.Fault{Kind: faultinject.DuringSnapshot, Subtask: faultinject.AnySubtask, Checkpoint: 1},
	)
	src := sourceevents.New(sizes, 5)
	store, res := run(t, src, 2, plan)
	got, err := store.Final()
	if err != nil {
		t.Fatal(err)
	}
	checkItems(t, got, sizes)
	if len(plan.Fired()) == 0 || res.Restarts == 0 {
		t.Fatalf("no fault fired: %v", plan.Fired())
	}
	for _, f := range res.Failures {
		if !errors.Is(f, faultinject.ErrInjected) {
			t.Errorf("restart caused by %v", f)
		}
	}
	t.Logf("report after failures: %+v", src.Report())
}
