package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/internal/engine"
)

// TestRecentCheckpoints: CheckpointStats.Recent lists every completed
// checkpoint and savepoint as it completed (not what a poller happened to
// see): consecutive ids, the intermediate and the stop savepoint marked as
// savepoints, completion times in order, durations and sizes set.
func TestRecentCheckpoints(t *testing.T) {
	store := testsink.NewStore[int64]()
	h := savepointJob(t, store, 2, 2, 20*time.Millisecond, nil)
	for i := 0; i < 1000 && h.Status().Checkpoints.Completed < 3; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sp, err := h.TriggerSavepoint(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	stop, res, err := h.StopWithSavepoint(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cs := res.Checkpoints
	recent := cs.Recent
	total := cs.Completed + cs.Savepoints
	if cs.Failed != 0 || total < 5 || len(recent) != min(total, engine.RecentCheckpoints) {
		t.Fatalf("got %d recent of %d completed + %d savepoints (%d failed): %+v", len(recent), cs.Completed, cs.Savepoints, cs.Failed, recent)
	}
	kinds := map[int64]checkpoint.Kind{}
	for i, c := range recent {
		kinds[c.ID] = c.Kind
		if c.Size <= 0 || c.Duration <= 0 || c.Completed.IsZero() {
			t.Errorf("recent[%d] = %+v: want size, duration and completion time", i, c)
		}
		if i > 0 && (c.ID != recent[i-1].ID+1 || c.Completed.Before(recent[i-1].Completed)) {
			t.Errorf("recent[%d] = %+v after %+v: want the next id, completed no earlier", i, c, recent[i-1])
		}
	}
	if k, ok := kinds[sp.ID]; !ok || k != checkpoint.Savepoint {
		t.Errorf("intermediate savepoint %d: in recent %v, kind %s", sp.ID, ok, k)
	}
	if last := recent[len(recent)-1]; last.ID != stop.ID || last.Kind != checkpoint.Savepoint || last.ID != cs.LastID {
		t.Errorf("last recent %+v, want the stop savepoint %d (LastID %d)", last, stop.ID, cs.LastID)
	}
	n := 0
	for _, k := range kinds {
		if k == checkpoint.Savepoint {
			n++
		}
	}
	if n != 2 {
		t.Errorf("got %d savepoints in recent, want 2: %+v", n, recent)
	}
}
