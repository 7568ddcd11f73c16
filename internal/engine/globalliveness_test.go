package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/internal/sinkerase"
	"github.com/sluice-io/sluice/internal/sinkrt"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// TestCommitsGoOnWhileGlobalCommitPending: the global committer's first
// call with committables (checkpoint t) returns only once every sink
// subtask has committed a transaction of a checkpoint at least t+2. The
// job must get there: subtask committers keep committing, and checkpoints
// keep completing, while a global commit is pending. (Written while
// finding out why connectors/file's TestCompactionGlobalCommitterBehind
// hung: the runtime was live; the test's observer missed commits.)
func TestCommitsGoOnWhileGlobalCommitPending(t *testing.T) {
	store := testsink.NewStore[int64]()
	sk := &waitingGlobal{Sink: sinkerase.Erase(testsink.NewTwoPhase(store, testsink.WithGlobalCommit())), store: store, parallelism: 2}
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(10*time.Millisecond), stream.Logger(engine.DiscardLogger()))
	s := stream.FromSource(env, datagen.New(func(i int64) int64 { return i }, datagen.Count(20000), datagen.Splits(2),
		datagen.RatePerSecond(20000)), watermark.None[int64](), "gen")
	stream.SinkTo[int64](s, sk, "sink")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := env.Execute(ctx, "global-pending")
	if err != nil {
		t.Fatalf("job: %v", err)
	}
	if sk.waited == 0 {
		t.Fatal("the global committer never waited")
	}
	t.Logf("global commit of checkpoint %d waited until checkpoint %d was committed by every subtask; %d checkpoints",
		sk.waited, sk.released, res.Checkpoints.Completed)
	if n := len(store.Committed()); n != 20000 {
		t.Errorf("got %d records, want 20000", n)
	}
}

type waitingGlobal struct {
	sinkerase.Sink[int64]
	store            *testsink.Store[int64]
	parallelism      int
	waited, released int64 // set by the global committer's goroutine, read after the job
}

func (s *waitingGlobal) CreateWriter(ctx context.Context, ic sink.InitContext) (sink.Writer[int64], error) {
	w, _, err := s.NewWriter(ctx, ic, nil)
	return w, err
}

func (s *waitingGlobal) NewGlobalCommitter(ctx context.Context, ic sink.InitContext) (sinkrt.GlobalCommitter, error) {
	g, err := s.Sink.NewGlobalCommitter(ctx, ic)
	if err != nil || g == nil {
		return g, err
	}
	return &waitingGlobalCommitter{GlobalCommitter: g, s: s}, nil
}

type waitingGlobalCommitter struct {
	sinkrt.GlobalCommitter
	s *waitingGlobal
}

func (g *waitingGlobalCommitter) CommitGlobal(ctx context.Context, id int64, committed [][]byte) error {
	if g.s.waited == 0 && len(committed) > 0 {
		g.s.waited = id
		for range 2000 { // bounded: 20 s
			upTo := map[int]int64{}
			for _, txn := range g.s.store.CommittedTxns() {
				upTo[txn.Subtask] = max(upTo[txn.Subtask], txn.CheckpointID)
			}
			low := int64(-1)
			if len(upTo) == g.s.parallelism {
				low = min(upTo[0], upTo[1])
			}
			if low >= id+2 {
				g.s.released = low
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
		if g.s.released == 0 {
			return fmt.Errorf("no subtask commit of checkpoint %d or later while the global commit of %d was pending", id+2, id)
		}
	}
	return g.GlobalCommitter.CommitGlobal(ctx, id, committed)
}
