package engine_test

// Tests of protocol invariants stated in docs/design.md that no other test
// checks directly. Each test names the invariant(s) it proves.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/source"
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
	// Both faults fire; they cause one restart each, or one together if
	// they fire in one attempt (full failover on a slow machine).
	if fired := plan.Fired(); len(fired) != 2 || res.Restarts < 1 || res.Restarts > 2 {
		t.Errorf("fired %v with %d restarts, want both reader failures and one or two restarts", fired, res.Restarts)
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

// barrierSource drives TestInvariantBarrierAlignment: two splits, "a" and
// "b", assigned to readers 0 and 1 right before checkpoint 1 (so both
// readers snapshot them at position 0). In the first attempt the reader of
// "a" then emits 50 records, while the reader of "b" is held in its
// snapshot of checkpoint 1 until "a" emitted 30 of them (and, to give a
// task that does not align the chance to show it, until the sink's side
// saw one of them or 200 ms passed) and reads nothing before checkpoint 1
// completed; "a" then waits for checkpoint 1 to complete and fails at
// position 50, so the job restores from checkpoint 1.
type barrierSource struct {
	*scriptSource
	snapPos atomic.Int64 // the position of "a" in its checkpoint-1 snapshot, -1 before
	release chan struct{}
	once    sync.Once
	bDone   atomic.Bool // the reader of "b" snapshotted checkpoint 1: its barrier follows
	early   chan struct{}
	onceE   sync.Once
	failed  atomic.Bool
	mu      sync.Mutex
	seen    []rec // records of "a" past its barrier seen downstream before bDone
}

func newBarrierSource() *barrierSource {
	s := &barrierSource{release: make(chan struct{}), early: make(chan struct{})}
	s.snapPos.Store(-1)
	s.scriptSource = &scriptSource{
		splits: []rangeSplit{{ID: "a", End: 1000}, {ID: "b", End: 1000}}, perPoll: 10,
		hold: func(completed int64, sp rangeSplit) bool {
			if s.failed.Load() || completed >= 1 {
				return false
			}
			if p := s.snapPos.Load(); sp.ID == "a" && p >= 0 {
				return sp.Next >= p+50
			}
			return true
		},
		// The restored enumerator has nothing left to assign.
		onRestore: func(e *scriptEnum) { e.finish() },
		failAt: func(attempt int, r rec) bool {
			if p := s.snapPos.Load(); attempt == 0 && r.Split == "a" && p >= 0 && r.Pos == p+50 {
				s.failed.Store(true)
				return true
			}
			return false
		},
	}
	return s
}

// watch runs downstream of the exchange, in the sink's task: it records a
// record of "a" that follows a's barrier 1 if it gets there before the
// barrier of "b" was sent.
func (s *barrierSource) watch(r rec) rec {
	if p := s.snapPos.Load(); r.Split == "a" && p >= 0 && r.Pos >= p && !s.bDone.Load() {
		s.mu.Lock()
		s.seen = append(s.seen, r)
		s.mu.Unlock()
		s.onceE.Do(func() { close(s.early) })
	}
	return r
}

func (s *barrierSource) CreateReader(ctx source.ReaderContext) (source.Reader[rec, rangeSplit], error) {
	r, err := s.scriptSource.CreateReader(ctx)
	if err != nil {
		return nil, err
	}
	return &barrierReader{scriptReader: r.(*scriptReader), s: s, attempt: ctx.Attempt(), wake: make(chan struct{})}, nil
}

type barrierReader struct {
	*scriptReader
	s       *barrierSource
	attempt int
	ctx     context.Context
	wake    chan struct{} // closed once after the snapshot: read on at once
}

func (r *barrierReader) Start(ctx context.Context) error {
	r.ctx = ctx
	return r.scriptReader.Start(ctx)
}

func (r *barrierReader) Available() <-chan struct{} { return r.wake }

func (r *barrierReader) has(id string) (rangeSplit, bool) {
	for _, sp := range r.splits {
		if sp.ID == id {
			return sp, true
		}
	}
	return rangeSplit{}, false
}

func (r *barrierReader) SnapshotState(id int64) ([]rangeSplit, error) {
	if r.attempt == 0 && id == 1 {
		if sp, ok := r.has("a"); ok {
			r.s.snapPos.Store(sp.Next)
			close(r.wake) // emit past the barrier right away
		} else if _, ok := r.has("b"); ok {
			select {
			case <-r.s.release:
			case <-r.ctx.Done():
			}
			t := time.NewTimer(200 * time.Millisecond)
			select {
			case <-r.s.early:
			case <-t.C:
			case <-r.ctx.Done():
			}
			t.Stop()
			r.s.bDone.Store(true)
		}
	}
	return r.scriptReader.SnapshotState(id)
}

func (r *barrierReader) PollNext(out source.Output[rec]) (source.InputStatus, error) {
	st, err := r.scriptReader.PollNext(out)
	select {
	case <-r.wake:
		r.wake = make(chan struct{})
	default:
	}
	if sp, ok := r.has("a"); ok && r.attempt == 0 {
		if p := r.s.snapPos.Load(); p >= 0 && sp.Next >= p+30 {
			r.s.once.Do(func() { close(r.s.release) })
		}
	}
	return st, err
}

// TestInvariantBarrierAlignment proves I2 of docs/design.md: a task with
// several inputs snapshots checkpoint n only once barrier n arrived on every
// input, and does not process what follows the barrier on one input before
// that. Two source subtasks feed one sink subtask (a rebalance). Barrier 1
// of the reader of "a" and 30 or more records that follow it reach the
// sink's task before the barrier of the reader of "b" (held in its
// snapshot): a map in the sink's task must not see those records before
// b's barrier was sent. The job then fails and restores from checkpoint 1:
// had the sink written those records into checkpoint 1's transaction, they
// would be committed with it and read again after the restore.
func TestInvariantBarrierAlignment(t *testing.T) {
	src := newBarrierSource()
	store := testsink.NewStore[rec]()
	// One periodic checkpoint per attempt (the minimum pause is long), so
	// the restore is from checkpoint 1.
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(20*time.Millisecond), stream.MinPauseBetweenCheckpoints(time.Hour),
		stream.BatchSize(10), stream.ChannelCapacity(8), stream.Restart(restart.FixedDelay(2, 0)), stream.Logger(stream.DiscardLogger()))
	s := stream.FromSource(env, src, watermark.None[rec](), "script")
	watched := stream.Map(stream.Rebalance(s), src.watch, stream.Name("watch"), stream.WithParallelism(1))
	stream.SinkTo(watched, testsink.NewTwoPhase(store), "sink", stream.WithParallelism(1))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	job, err := env.Build("alignment")
	if err != nil {
		t.Fatal(err)
	}
	engine.SetBeforeTrigger(job, func(id int64) {
		if id == 1 {
			src.enum.assign("a", 0)
			src.enum.assign("b", 1)
			src.enum.finish()
		}
	})
	res, err := job.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p := src.snapPos.Load(); p != 0 || !src.failed.Load() || res.Restarts != 1 {
		t.Fatalf("snapshot of a at %d, failed %v, %d restarts: want 0, true, 1 (failures %v)", p, src.failed.Load(), res.Restarts, res.Failures)
	}
	src.mu.Lock()
	if len(src.seen) > 0 {
		t.Errorf("the sink's task processed %d records that follow barrier 1 on one input (first %v) before barrier 1 was sent on the other", len(src.seen), src.seen[0])
	}
	src.mu.Unlock()
	expectExactlyOnce(t, src.splits, store.Committed())
	if staged := store.Staged(); len(staged) > 0 {
		t.Errorf("transactions left staged: %v", staged)
	}
}
