package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/internal/sinkerase"
	"github.com/sluice-io/sluice/internal/sinkrt"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// ledger is a sink whose committer follows a script: for each committable
// (one per writer per checkpoint with data) it may ask to retry a number of
// times, fail with a known reason, or report it already committed. It
// records the order of commits per subtask.
type ledger struct {
	mu        sync.Mutex
	retries   int  // RetryLater this many times before committing
	known     bool // fail every committable of subtask 1 with a known reason
	already   bool // report everything as already committed
	attempts  map[string]int
	committed map[int][]int64 // subtask -> checkpoint ids, in commit order
	records   map[int64]bool
	dups      int
}

type ledgerC struct {
	Subtask    int
	Checkpoint int64
	Records    []int64
}

func newLedger() *ledger {
	return &ledger{attempts: map[string]int{}, committed: map[int][]int64{}, records: map[int64]bool{}}
}

func (l *ledger) CreateWriter(ctx context.Context, ic sink.InitContext) (sink.CommittingWriter[int64, ledgerC], error) {
	return &ledgerWriter{l: l, subtask: ic.SubtaskIndex()}, nil
}
func (l *ledger) CreateCommitter(context.Context, sink.InitContext) (sink.Committer[ledgerC], error) {
	return l, nil
}
func (l *ledger) CommittableSerializer() serde.Versioned[ledgerC] { return serde.JSON[ledgerC](1) }
func (l *ledger) Close() error                                    { return nil }

func (l *ledger) Commit(_ context.Context, reqs []sink.CommitRequest[ledgerC]) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range reqs {
		c := r.Committable()
		if r.CheckpointID() != c.Checkpoint {
			return fmt.Errorf("request says checkpoint %d, committable %d", r.CheckpointID(), c.Checkpoint)
		}
		key := fmt.Sprint(c.Subtask, "/", c.Checkpoint)
		l.attempts[key]++
		switch {
		case l.known && c.Subtask == 1:
			r.SignalFailedWithKnownReason(errors.New("table dropped"))
			continue
		case r.Retries() < l.retries:
			if r.Retries() != l.attempts[key]-1 {
				return fmt.Errorf("retries %d after %d attempts", r.Retries(), l.attempts[key])
			}
			r.RetryLater()
			continue
		case l.already:
			r.SignalAlreadyCommitted()
		}
		l.committed[c.Subtask] = append(l.committed[c.Subtask], c.Checkpoint)
		for _, v := range c.Records {
			if l.records[v] {
				l.dups++
			}
			l.records[v] = true
		}
	}
	return nil
}

type ledgerWriter struct {
	l       *ledger
	subtask int
	buf     []int64
}

func (w *ledgerWriter) Write(ctx context.Context, v int64, _ sink.Meta) error {
	w.buf = append(w.buf, v)
	return nil
}
func (w *ledgerWriter) Flush(context.Context, bool) error { return nil }
func (w *ledgerWriter) Close() error                      { return nil }
func (w *ledgerWriter) PrepareCommit(ctx context.Context, id int64) ([]ledgerC, error) {
	if len(w.buf) == 0 {
		return nil, nil
	}
	c := ledgerC{Subtask: w.subtask, Checkpoint: id, Records: w.buf}
	w.buf = nil
	return []ledgerC{c}, nil
}

func runLedger(t *testing.T, l *ledger, n int64) (*engine.Result, *metrics.Registry) {
	t.Helper()
	reg := metrics.NewRegistry()
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(20*time.Millisecond),
		stream.Logger(engine.DiscardLogger()), stream.Metrics(reg))
	s := stream.FromSource(env, datagen.New(func(i int64) int64 { return i }, datagen.Count(n), datagen.Splits(2),
		datagen.RatePerSecond(float64(n)*5)), watermark.None[int64](), "gen")
	stream.SinkTo(s, sink.NewTwoPhase[int64, ledgerC](l), "ledger")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := env.Execute(ctx, "ledger")
	if err != nil {
		t.Fatal(err)
	}
	return res, reg
}

// TestCommitOutcomes drives the committer through each outcome of a
// commit request.
func TestCommitOutcomes(t *testing.T) {
	t.Run("retry later then commit, in checkpoint order", func(t *testing.T) {
		l := newLedger()
		l.retries = 2
		_, reg := runLedger(t, l, 2000)
		if len(l.records) != 2000 || l.dups != 0 {
			t.Fatalf("got %d records (%d duplicates), want 2000", len(l.records), l.dups)
		}
		for sub, ids := range l.committed {
			if !slices.IsSorted(ids) {
				t.Errorf("subtask %d committed checkpoints out of order: %v", sub, ids)
			}
		}
		for k, n := range l.attempts {
			if n != 3 {
				t.Errorf("committable %s: %d attempts, want 3 (2 retries)", k, n)
			}
		}
		if got := reg.Sum(metrics.NumCommittablesRetry); got != 2*int64(len(l.attempts)) {
			t.Errorf("numCommittablesRetry = %d, want %d", got, 2*len(l.attempts))
		}
	})
	t.Run("failed with a known reason", func(t *testing.T) {
		l := newLedger()
		l.known = true
		res, reg := runLedger(t, l, 2000)
		if len(l.committed[1]) != 0 || len(l.committed[0]) == 0 {
			t.Fatalf("committed %v, want only subtask 0", l.committed)
		}
		if got := reg.Sum(metrics.NumCommittablesFailure); got == 0 {
			t.Error("numCommittablesFailure = 0, want the known failures counted")
		}
		if res.Restarts != 0 {
			t.Errorf("a known failure restarted the job %d times", res.Restarts)
		}
	})
	t.Run("already committed is a success", func(t *testing.T) {
		l := newLedger()
		l.already = true
		_, reg := runLedger(t, l, 1000)
		if len(l.records) != 1000 {
			t.Fatalf("got %d records, want 1000", len(l.records))
		}
		if got := reg.Sum(metrics.NumCommittablesSuccess); got != int64(len(l.attempts)) {
			t.Errorf("numCommittablesSuccess = %d, want %d", got, len(l.attempts))
		}
	})
}

// TestGlobalCommitter: after the committers of a checkpoint are done, the
// global committer sees every committed transaction exactly once.
func TestGlobalCommitter(t *testing.T) {
	store := testsink.NewStore[int64]()
	env := stream.New(stream.Parallelism(3), stream.CheckpointEvery(20*time.Millisecond), stream.Logger(engine.DiscardLogger()))
	s := stream.FromSource(env, datagen.New(func(i int64) int64 { return i }, datagen.Count(3000), datagen.Splits(3),
		datagen.RatePerSecond(10000)), watermark.None[int64](), "gen")
	stream.SinkTo(s, testsink.NewTwoPhase(store, testsink.WithGlobalCommit()), "sink")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := env.Execute(ctx, "global"); err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, ids := range store.GlobalCommits() {
		for _, id := range ids {
			seen[id]++
		}
	}
	for _, txn := range store.CommittedTxns() {
		if seen[txn.ID] != 1 {
			t.Errorf("transaction %s globally committed %d times, want 1", txn.ID, seen[txn.ID])
		}
	}
	if len(store.Committed()) != 3000 {
		t.Errorf("got %d records, want 3000", len(store.Committed()))
	}
}

// slowGlobal wraps a sink so that its global committer, in the first
// attempt, holds checkpoint holdAt until checkpoint waitFor has completed
// and then fails: the committables of holdAt are no longer in any
// subtask's state (they were committed) and must come back from the
// checkpoint's global part.
type slowGlobal[T any] struct {
	sinkerase.Sink[T]
	holdAt, waitFor int64
	completed       func() int64
}

func (s *slowGlobal[T]) CreateWriter(ctx context.Context, ic sink.InitContext) (sink.Writer[T], error) {
	w, _, err := s.NewWriter(ctx, ic, nil)
	return w, err
}

func (s *slowGlobal[T]) NewGlobalCommitter(ctx context.Context, ic sink.InitContext) (sinkrt.GlobalCommitter, error) {
	g, err := s.Sink.NewGlobalCommitter(ctx, ic)
	if err != nil || g == nil {
		return g, err
	}
	return &slowGlobalCommitter{GlobalCommitter: g, s: s.holdAt, w: s.waitFor, completed: s.completed, attempt: ic.Attempt()}, nil
}

type slowGlobalCommitter struct {
	sinkrt.GlobalCommitter
	s, w      int64
	completed func() int64
	attempt   int
}

func (g *slowGlobalCommitter) CommitGlobal(ctx context.Context, id int64, committed [][]byte) error {
	if g.attempt == 0 && id >= g.s {
		for range 1000 { // bounded: 10 s
			if g.completed() >= g.w {
				return errors.New("global committer: injected failure")
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
		return errors.New("global committer: checkpoint never completed")
	}
	return g.GlobalCommitter.CommitGlobal(ctx, id, committed)
}

// TestGlobalCommitterAfterRestore: committables that the subtasks had
// committed but the global committer had not yet handled when the job
// failed reach the global committer after the restore (they are kept in
// the checkpoint's global part, since they are in no subtask's state).
func TestGlobalCommitterAfterRestore(t *testing.T) {
	store := testsink.NewStore[int64]()
	var completed atomic.Int64
	sk := &slowGlobal[int64]{Sink: sinkerase.Erase(testsink.NewTwoPhase(store, testsink.WithGlobalCommit())), holdAt: 2, waitFor: 5,
		completed: completed.Load}
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(20*time.Millisecond), stream.Logger(engine.DiscardLogger()),
		stream.Restart(restart.FixedDelay(2, 10*time.Millisecond)))
	s := stream.FromSource(env, datagen.New(func(i int64) int64 { return i }, datagen.Count(4000), datagen.Splits(2),
		datagen.RatePerSecond(8000)), watermark.None[int64](), "gen")
	stream.SinkTo[int64](s, sk, "sink")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	h, err := env.Start(ctx, "global-restore")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			select {
			case <-h.Done():
				return
			case <-time.After(5 * time.Millisecond):
				completed.Store(h.Status().Checkpoints.LastID)
			}
		}
	}()
	res, err := h.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.Restarts != 1 {
		t.Fatalf("restarts = %d, want 1 (failures: %v)", res.Restarts, res.Failures)
	}
	seen := map[string]bool{}
	for _, ids := range store.GlobalCommits() {
		for _, id := range ids {
			seen[id] = true
		}
	}
	for _, txn := range store.CommittedTxns() {
		if !seen[txn.ID] {
			t.Errorf("transaction %s (checkpoint %d) committed but never globally committed", txn.ID, txn.CheckpointID)
		}
	}
	if len(store.Committed()) != 4000 {
		t.Errorf("got %d records, want 4000", len(store.Committed()))
	}
}
