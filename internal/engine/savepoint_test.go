package engine_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

const savepointSplits = 8

// savepointJob starts unbounded datagen (savepointSplits splits) → the
// two-phase test sink, with the given source and sink parallelism, resumed
// from restore if not nil.
func savepointJob(t *testing.T, store *testsink.Store[int64], srcPar, sinkPar int, interval time.Duration, restore *checkpoint.Snapshot) *engine.Handle {
	t.Helper()
	opts := []stream.Option{stream.Parallelism(srcPar), stream.CheckpointEvery(interval), stream.Logger(engine.DiscardLogger())}
	if restore != nil {
		opts = append(opts, stream.RestoreFrom(restore))
	}
	env := stream.New(opts...)
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Splits(savepointSplits), datagen.RatePerSecond(40_000))
	s := stream.FromSource(env, gen, watermark.None[int64](), "gen")
	stream.SinkTo(stream.Rebalance(s), testsink.NewTwoPhase(store), "sink", stream.WithParallelism(sinkPar))
	h, err := env.Start(t.Context(), "savepoint")
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// stopWithSavepoint stops h with a savepoint into a fresh directory, moves
// that savepoint somewhere else (savepoints are relocatable) and loads it.
func stopWithSavepoint(t *testing.T, h *engine.Handle) *checkpoint.Snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	info, res, err := h.StopWithSavepoint(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !res.Stopped || res.State != engine.Finished {
		t.Fatalf("got state %s, stopped %v; want FINISHED, stopped", res.State, res.Stopped)
	}
	if info.Kind != checkpoint.Savepoint || info.Path == "" {
		t.Fatalf("savepoint info %+v", info)
	}
	moved := filepath.Join(t.TempDir(), "moved")
	if err := os.Rename(info.Path, moved); err != nil {
		t.Fatal(err)
	}
	snap, _, err := checkpoint.Load(ctx, moved)
	if err != nil {
		t.Fatalf("load moved savepoint: %v", err)
	}
	if snap.Kind != checkpoint.Savepoint || snap.ID != info.ID {
		t.Fatalf("loaded %s %d, want savepoint %d", snap.Kind, snap.ID, info.ID)
	}
	return snap
}

// checkPrefixes checks that the committed records of each split form a
// gap-free, duplicate-free prefix of the split, longer than before, and
// that nothing is left staged.
func checkPrefixes(t *testing.T, store *testsink.Store[int64], before int) int {
	t.Helper()
	got := store.Committed()
	if len(got) <= before {
		t.Fatalf("committed %d records, %d before; want growth", len(got), before)
	}
	checkSplitPrefixes(t, store, savepointSplits)
	return len(got)
}

// checkSplitPrefixes checks that the committed records of each of the n
// interleaved splits of an unbounded datagen (index k in split k%n) form a
// gap-free, duplicate-free prefix of the split, and that nothing is left
// staged.
func checkSplitPrefixes(t *testing.T, store *testsink.Store[int64], n int64) {
	t.Helper()
	bySplit := map[int64][]int64{}
	for _, v := range store.Committed() {
		bySplit[v%n] = append(bySplit[v%n], v)
	}
	for s, vs := range bySplit {
		slices.Sort(vs)
		for i, v := range vs {
			if want := s + int64(i)*n; v != want {
				t.Fatalf("split %d: record %d is %d, want %d (a gap or a duplicate)", s, i, v, want)
			}
		}
	}
	if staged := store.Staged(); len(staged) > 0 {
		t.Errorf("transactions left staged: %v", staged)
	}
}

// TestStopWithSavepointAndRescale follows Flink's source test suite
// (savepoint, scale up, scale down) for datagen and its sink-side
// counterpart for the two-phase test sink: stop with a savepoint at one
// parallelism, move the savepoint, resume at another, read what is
// produced after the resume too, and stop again. Every split's committed
// records are a gap-free, duplicate-free prefix.
func TestStopWithSavepointAndRescale(t *testing.T) {
	cases := []struct {
		name        string
		src1, sink1 int
		src2, sink2 int
		src3, sink3 int // a third run, back again
	}{
		{"source 4 to 4", 4, 4, 4, 4, 4, 4},
		{"source scale up 2 to 4", 2, 2, 4, 2, 2, 2},
		{"source scale down 4 to 2", 4, 2, 2, 2, 4, 2},
		{"sink 2 to 4", 2, 2, 2, 4, 2, 2},
		{"sink 2 to 1", 2, 2, 2, 1, 2, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			store := testsink.NewStore[int64]()
			h := savepointJob(t, store, c.src1, c.sink1, 20*time.Millisecond, nil)
			waitCheckpoints(t, h, 2)
			snap := stopWithSavepoint(t, h)
			n := checkPrefixes(t, store, 0)

			h = savepointJob(t, store, c.src2, c.sink2, 20*time.Millisecond, snap)
			waitCheckpoints(t, h, 2)
			snap = stopWithSavepoint(t, h)
			n = checkPrefixes(t, store, n)

			h = savepointJob(t, store, c.src3, c.sink3, 20*time.Millisecond, snap)
			waitCheckpoints(t, h, 1)
			stopWithSavepoint(t, h)
			checkPrefixes(t, store, n)
		})
	}
}

// TestIntermediateSavepoint: a savepoint of a running job does not commit
// (the job has no periodic checkpoints here, so nothing is committed before
// the cancel); resuming from it, moved elsewhere, commits what it prepared
// and continues without gaps or duplicates.
func TestIntermediateSavepoint(t *testing.T) {
	store := testsink.NewStore[int64]()
	h := savepointJob(t, store, 2, 2, 0, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// Let some records through first (bounded wait).
	for i := 0; i < 500 && h.Metrics().Sum("numRecordsIn", "operator", "gen") < 2000; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	var infos []checkpoint.Info
	for range 2 {
		info, err := h.TriggerSavepoint(ctx, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		infos = append(infos, info)
	}
	if infos[1].ID <= infos[0].ID {
		t.Fatalf("savepoint ids %d then %d; want growing", infos[0].ID, infos[1].ID)
	}
	if st := h.Status(); st.Checkpoints.Savepoints != 2 || st.Checkpoints.Completed != 0 {
		t.Fatalf("checkpoint stats %+v; want 2 savepoints, 0 completed checkpoints", st.Checkpoints)
	}
	if got := store.Committed(); len(got) != 0 {
		t.Fatalf("an intermediate savepoint committed %d records", len(got))
	}
	h.Cancel()
	if _, err := h.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want cancelled", err)
	}
	if _, err := h.TriggerSavepoint(ctx, t.TempDir()); !errors.Is(err, engine.ErrNotRunning) {
		t.Fatalf("savepoint of an ended job = %v, want ErrNotRunning", err)
	}
	moved := filepath.Join(t.TempDir(), "sp")
	if err := os.Rename(infos[1].Path, moved); err != nil {
		t.Fatal(err)
	}
	snap, _, err := checkpoint.Load(ctx, moved)
	if err != nil {
		t.Fatal(err)
	}
	h = savepointJob(t, store, 2, 2, 20*time.Millisecond, snap)
	waitCheckpoints(t, h, 2)
	stopWithSavepoint(t, h)
	checkPrefixes(t, store, 0)
}

// TestSavepointFailureKeepsJobRunning: a savepoint into a directory that
// cannot be created fails with an error naming it, does not count as a
// failed checkpoint and leaves the job running; a failed stop with
// savepoint fails over and the job runs on.
func TestSavepointFailureKeepsJobRunning(t *testing.T) {
	store := testsink.NewStore[int64]()
	h := savepointJob(t, store, 2, 2, 20*time.Millisecond, nil)
	waitCheckpoints(t, h, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(file, "sub")
	if _, err := h.TriggerSavepoint(ctx, bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Fatalf("savepoint into %s = %v, want an error naming it", bad, err)
	}
	if st := h.Status(); st.State != engine.Running || st.Checkpoints.Failed != 0 {
		t.Fatalf("after a failed savepoint: %+v; want RUNNING and no failed checkpoint", st)
	}
	if _, _, err := h.StopWithSavepoint(ctx, bad); err == nil {
		t.Fatal("stop with savepoint into a bad directory succeeded")
	}
	before := h.Status().Checkpoints.Completed
	waitCheckpoints(t, h, before+2) // it runs on
	stopWithSavepoint(t, h)
	checkPrefixes(t, store, 0)
}
