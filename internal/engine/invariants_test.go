package engine_test

// Tests of protocol invariants stated in docs/design.md that no other test
// checks directly. Each test names the invariant(s) it proves.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// errStoreRefused is what watchedStorage answers for the checkpoints it is
// told to refuse.
var errStoreRefused = errors.New("injected: the storage refuses this checkpoint")

// watchedStorage is a checkpoint storage that checks, each time the runtime
// stores a checkpoint, what the sink has committed so far; it refuses to
// store the checkpoints refuse selects.
type watchedStorage struct {
	checkpoint.Storage
	sink   *testsink.Store[int64]
	refuse func(id int64) bool

	mu         sync.Mutex
	last       int64 // highest id passed to Save
	stored     int64 // highest id stored successfully
	ok, failed int
	violations []string
}

func (w *watchedStorage) Save(ctx context.Context, s *checkpoint.Snapshot) (checkpoint.Info, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s.ID <= w.last {
		w.violations = append(w.violations, fmt.Sprintf("checkpoint id %d stored after id %d: ids must grow", s.ID, w.last))
	}
	w.last = max(w.last, s.ID)
	w.checkCommitted(fmt.Sprintf("when checkpoint %d was about to be stored", s.ID))
	if w.refuse(s.ID) {
		w.failed++
		return checkpoint.Info{}, fmt.Errorf("checkpoint %d: %w", s.ID, errStoreRefused)
	}
	info, err := w.Storage.Save(ctx, s)
	if err == nil {
		w.ok++
		w.stored = max(w.stored, s.ID)
	}
	return info, err
}

// checkCommitted records a violation for every committed transaction of a
// checkpoint that has not been stored yet (called with w.mu held).
func (w *watchedStorage) checkCommitted(when string) {
	for _, txn := range w.sink.CommittedTxns() {
		if txn.CheckpointID > w.stored {
			w.violations = append(w.violations, fmt.Sprintf("%s: transaction %s is committed, but the newest stored checkpoint is %d",
				when, txn.ID, w.stored))
		}
	}
}

// TestInvariantCommitAfterStore proves, for docs/design.md:
//
//   - I3: a checkpoint completes, and its committables are committed, only
//     after its metadata was stored; a checkpoint whose store fails never
//     completes;
//   - I4: checkpoint ids grow strictly within a run, across restarts;
//   - I6: with tolerated failures, the committables of a checkpoint that
//     failed stay pending and are committed with the next completed one;
//   - I9: one sink subtask commits in checkpoint order.
//
// A bounded datagen → two-phase test sink job runs with checkpoints every
// 20 ms; the storage refuses every third checkpoint (tolerated) and the
// readers fail twice, so the job restarts (regionally, then, in the second
// case, globally) from a stored checkpoint. Each time a checkpoint is about
// to be stored, no transaction of a checkpoint newer than the newest stored
// one may be committed. At the end the output equals the input and nothing
// is left staged.
func TestInvariantCommitAfterStore(t *testing.T) {
	for _, failover := range []stream.FailoverMode{stream.FailoverRegion, stream.FailoverFull} {
		t.Run(fmt.Sprintf("failover=%v", failover), func(t *testing.T) { commitAfterStore(t, failover) })
	}
}

func commitAfterStore(t *testing.T, failover stream.FailoverMode) {
	const n, parallelism = 20_000, 2
	store := testsink.NewStore[int64]()
	w := &watchedStorage{Storage: checkpoint.NewMemory(), sink: store, refuse: func(id int64) bool { return id%3 == 0 }}
	// Reader 0 fails in its snapshot of checkpoint 4 (after checkpoint 3
	// was refused: the restore is from 2, and ids 3 and 4 must not be used
	// again), and reader 1 after a third of its records.
	plan := faultinject.NewPlan(faultinject.Fault{Kind: faultinject.DuringSnapshot, Subtask: 0, Checkpoint: 4},
		faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: 1, Records: n / parallelism / 3})
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(n), datagen.Splits(4),
		datagen.RatePerSecond(n)) // about 1 s
	env := stream.New(stream.Parallelism(parallelism), stream.CheckpointEvery(20*time.Millisecond),
		stream.CheckpointStorage(w), stream.TolerableCheckpointFailures(1000), stream.Failover(failover),
		stream.Restart(restart.FixedDelay(3, 0)), stream.Logger(stream.DiscardLogger()))
	s := stream.FromSource(env, faultinject.WrapSource(gen, plan), watermark.None[int64](), "gen")
	stream.SinkTo(s, testsink.NewTwoPhase(store), "sink")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := env.Execute(ctx, "commit-after-store")
	if err != nil {
		t.Fatalf("%v (fired: %v)", err, plan.Fired())
	}
	if len(plan.Fired()) != 2 || res.Restarts != 2 {
		t.Errorf("fired %v with %d restarts, want both reader failures and two restarts", plan.Fired(), res.Restarts)
	}

	w.mu.Lock()
	w.checkCommitted("after the job ended")
	violations, ok, failed := w.violations, w.ok, w.failed
	w.mu.Unlock()
	for _, v := range violations {
		t.Error(v)
	}
	if ok == 0 || failed == 0 {
		t.Fatalf("%d checkpoints stored and %d refused, want some of each", ok, failed)
	}

	// I6: transactions of refused checkpoints were committed all the same,
	// with a later checkpoint. I9: per subtask, in checkpoint order.
	refusedCommitted := 0
	last := map[int]int64{}
	for _, txn := range store.CommittedTxns() {
		if w.refuse(txn.CheckpointID) {
			refusedCommitted++
		}
		if p, seen := last[txn.Subtask]; seen && txn.CheckpointID < p {
			t.Errorf("subtask %d committed checkpoint %d after checkpoint %d", txn.Subtask, txn.CheckpointID, p)
		}
		last[txn.Subtask] = txn.CheckpointID
	}
	if refusedCommitted == 0 {
		t.Error("no transaction of a refused checkpoint was committed: its committables must wait for the next completed checkpoint")
	}
	checkSequence(t, gen, n, store.Committed(), true)
	if staged := store.Staged(); len(staged) > 0 {
		t.Errorf("transactions left staged: %v", staged)
	}
	t.Logf("%d checkpoints stored, %d refused, %d transactions of refused checkpoints committed later; %d restarts",
		ok, failed, refusedCommitted, res.Restarts)
}
