package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// TestCancelAndResumeFromCheckpointDir: a job is cancelled after some
// checkpoints; only what completed checkpoints prepared is committed. A
// second job resumes from the newest checkpoint in the directory —
// optionally at another parallelism — and finishes: together they
// committed every record exactly once.
func TestCancelAndResumeFromCheckpointDir(t *testing.T) {
	for _, c := range []struct {
		name     string
		from, to int
	}{{"same parallelism", 2, 2}, {"scale up", 2, 3}, {"scale down", 3, 1}} {
		t.Run(c.name, func(t *testing.T) {
			const n = 20_000
			dir := t.TempDir()
			store := testsink.NewStore[int64]()
			build := func(p int, restore *checkpoint.Snapshot) *stream.Environment {
				opts := []stream.Option{stream.Parallelism(p), stream.CheckpointEvery(20 * time.Millisecond),
					stream.CheckpointDir(dir), stream.Logger(engine.DiscardLogger())}
				if restore != nil {
					opts = append(opts, stream.RestoreFrom(restore))
				}
				env := stream.New(opts...)
				// 5,000 records/s: the first run lasts 4 s, so that under a
				// heavy load (CI runs four packages at once) it still sees
				// its 4 checkpoints before the input ends (at 20,000/s it
				// once finished first).
				gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(n), datagen.Splits(4), datagen.RatePerSecond(5_000))
				stream.SinkTo(stream.FromSource(env, gen, watermark.None[int64](), "gen"), testsink.NewTwoPhase(store), "sink")
				return env
			}
			h, err := build(c.from, nil).Start(t.Context(), "resume")
			if err != nil {
				t.Fatal(err)
			}
			waitCheckpoints(t, h, 4)
			h.Cancel()
			res1, err := h.Wait()
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled job returned %v, want context.Canceled", err)
			}
			first := len(store.Committed())
			if first == 0 || first >= n {
				t.Fatalf("first run committed %d records, want some but not all of %d", first, n)
			}
			st, err := checkpoint.NewLocal(dir)
			if err != nil {
				t.Fatal(err)
			}
			snap, info, err := st.Latest(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			if got := snap.Properties[engine.JobIDProperty]; got != res1.JobID || len(got) != 16 {
				t.Errorf("checkpoint holds job id %q, want the first run's %q (16 hex digits)", got, res1.JobID)
			}
			res, err := build(c.to, snap).Execute(ctx, "resume")
			if err != nil {
				t.Fatal(err)
			}
			if res.JobID != res1.JobID {
				t.Errorf("resumed job has id %q, want the restored %q", res.JobID, res1.JobID)
			}
			if res.Checkpoints.LastID <= info.ID {
				t.Errorf("resumed job's last checkpoint %d is not after the restored %d", res.Checkpoints.LastID, info.ID)
			}
			checkSequence(t, datagen.New(func(i int64) int64 { return i }, datagen.Count(n), datagen.Splits(4)), n, store.Committed(), c.from == c.to)
			if staged := store.Staged(); len(staged) > 0 {
				t.Errorf("transactions left staged: %v", staged)
			}
			t.Logf("first run committed %d, restored checkpoint %d", first, info.ID)
			// The directory records the job id (<dir>/_job): a job started
			// without a snapshot on it is the same job and keeps the id.
			if other, err := build(1, nil). /* writes into the same store, after the check */ Execute(ctx, "resume"); err != nil || other.JobID != res1.JobID {
				t.Errorf("a job started again on its checkpoint dir got id %q (err %v), want the recorded %q", other.JobID, err, res1.JobID)
			}
		})
	}
}

// TestCheckpointTimeout: a checkpoint that cannot complete in time fails;
// with no tolerance the job fails over and still ends with exactly-once
// output; with tolerance the job goes on without a restart.
// TestCheckpointTimeout blocks the reader's snapshot of checkpoint 2 (first
// attempt) until the checkpoint expired — the test releases it only once the
// job reports a failed checkpoint, or the task is cancelled by the failover —
// so no wall-clock margin decides whether it times out. The timeout (2 s) is
// far above what an unblocked checkpoint takes; should one expire anyway on a
// loaded machine, the assertions still hold (it restarts or is tolerated like
// the blocked one).
func TestCheckpointTimeout(t *testing.T) {
	for _, tolerate := range []int{0, 100} {
		splits := []rangeSplit{{ID: "a", End: 3000}}
		src := &scriptSource{splits: splits, pull: true, perPoll: 10,
			hold: func(completed int64, sp rangeSplit) bool { return completed < 1 && sp.Next >= 1000 }}
		blocked := &blockedSnapshot{scriptSource: src, at: 2, release: make(chan struct{})}
		store := testsink.NewStore[rec]()
		env := stream.New(stream.CheckpointEvery(10*time.Millisecond), stream.CheckpointTimeout(2*time.Second),
			stream.TolerableCheckpointFailures(tolerate), stream.Restart(restart.FixedDelay(10, 0)), stream.Logger(engine.DiscardLogger()))
		stream.SinkTo(stream.FromSource(env, blocked, watermark.None[rec](), "src"), testsink.NewTwoPhase(store), "sink")
		j, err := env.Build("timeout")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		h := j.Start(ctx)
		// Bounded: 30 s for checkpoint 2 to be triggered and to expire.
		deadline := time.Now().Add(30 * time.Second)
		for h.Status().Checkpoints.Failed == 0 && time.Now().Before(deadline) {
			select {
			case <-h.Done():
				deadline = time.Now()
			case <-time.After(5 * time.Millisecond):
			}
		}
		close(blocked.release)
		res, err := h.Wait()
		cancel()
		if err != nil {
			t.Fatalf("tolerate=%d: %v", tolerate, err)
		}
		if res.Checkpoints.Failed == 0 {
			t.Fatalf("tolerate=%d: no checkpoint failed", tolerate)
		}
		if tolerate > 0 && res.Restarts != 0 {
			t.Errorf("tolerate=%d: %d restarts, want 0: the expired checkpoint is tolerated (%v)", tolerate, res.Restarts, res.Failures)
		}
		if tolerate == 0 {
			if res.Restarts == 0 {
				t.Errorf("tolerate=0: no restart, want the expired checkpoint to fail the job over")
			} else if !strings.Contains(res.Failures[0].Error(), "checkpoint 2 expired") {
				t.Errorf("tolerate=0: first failure %v, want checkpoint 2 expired", res.Failures[0])
			}
		}
		expectExactlyOnce(t, splits, store.Committed())
	}
}
