package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// TestSplitsInTransit checks the seeds' picture of splits "in transit"
// across the checkpoint line: split A is assigned just before the
// enumerator's snapshot of checkpoint 1 (so it belongs to the reader's
// snapshot), split B just after it (so it belongs to the enumerator's
// snapshot and reaches its reader after the reader's snapshot). The reader
// of B fails before checkpoint 2; after recovery from checkpoint 1 both
// splits are read exactly once.
func TestSplitsInTransit(t *testing.T) {
	splits := []rangeSplit{{ID: "A", End: 300}, {ID: "B", End: 300}}
	src := &scriptSource{
		splits:  splits,
		perPoll: 10,
		// B is read only once checkpoint 1 completed, so the failure
		// below restores from checkpoint 1 (whose enumerator snapshot
		// still holds B).
		holdUntil: map[string]int64{"B": 1},
		beforeTrigger: func(id int64, e *scriptEnum) {
			if id == 1 {
				e.assign("A", 0)
			}
		},
		onSnapshot: func(id int64, e *scriptEnum) {
			if id == 1 {
				e.assign("B", 1)
				e.finish()
			}
		},
		onRestore: func(e *scriptEnum) {
			for len(e.pending) > 0 {
				e.assign(e.pending[0].ID, 0)
			}
			e.finish()
		},
		failAt: func(attempt int, r rec) bool { return attempt == 0 && r.Split == "B" && r.Pos == 50 },
	}
	store := testsink.NewStore[rec]()
	// Global failover: the restored enumerator hands B out again.
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(100*time.Millisecond), stream.Failover(engine.FailoverFull),
		stream.Restart(restart.FixedDelay(3, 0)), stream.Logger(engine.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, src, watermark.None[rec](), "script"), testsink.NewTwoPhase(store), "sink")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	job, err := env.Build("transit")
	if err != nil {
		t.Fatal(err)
	}
	engine.SetBeforeTrigger(job, func(id int64) { src.beforeTrigger(id, src.enum) })
	res, err := job.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Restarts != 1 {
		t.Errorf("got %d restarts, want 1 (failures: %v)", res.Restarts, res.Failures)
	}
	expectExactlyOnce(t, splits, store.Committed())
	if staged := store.Staged(); len(staged) > 0 {
		t.Errorf("transactions left staged: %v", staged)
	}
}
