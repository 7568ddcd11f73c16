package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/runtime"
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

func (l *ledger) CreateWriter(ctx sink.InitContext) (sink.Writer[int64], error) {
	return &ledgerWriter{l: l, subtask: ctx.SubtaskIndex()}, nil
}
func (l *ledger) CreateCommitter(sink.InitContext) (sink.Committer[ledgerC], error) { return l, nil }
func (l *ledger) CommittableSerializer() serde.Versioned[ledgerC]                   { return serde.JSON[ledgerC](1) }
func (l *ledger) Close() error                                                      { return nil }

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

func (w *ledgerWriter) Write(v int64, _ sink.Context) error { w.buf = append(w.buf, v); return nil }
func (w *ledgerWriter) Flush(bool) error                    { return nil }
func (w *ledgerWriter) Close() error                        { return nil }
func (w *ledgerWriter) PrepareCommit(id int64) ([]ledgerC, error) {
	if len(w.buf) == 0 {
		return nil, nil
	}
	c := ledgerC{Subtask: w.subtask, Checkpoint: id, Records: w.buf}
	w.buf = nil
	return []ledgerC{c}, nil
}

func runLedger(t *testing.T, l *ledger, n int64) (*runtime.Result, *metrics.Registry) {
	t.Helper()
	reg := metrics.NewRegistry()
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(20*time.Millisecond),
		stream.Logger(runtime.DiscardLogger()), stream.Metrics(reg))
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
	env := stream.New(stream.Parallelism(3), stream.CheckpointEvery(20*time.Millisecond), stream.Logger(runtime.DiscardLogger()))
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
