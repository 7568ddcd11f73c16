package connectortest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
)

// Checkpoint interval of every job the suite runs.
const checkpointInterval = 50 * time.Millisecond

// Names of the jobs and operators the suite builds. Jobs that resume each
// other share the job name, as a job resumed from a checkpoint does.
const (
	jobName      = "conformance"
	sourceName   = "source"
	sinkName     = "sink"
	waitStep     = 5 * time.Millisecond
	pauseTimeout = 30 * time.Second
)

// jobSpec describes one job run of a case.
type jobSpec struct {
	parallelism int
	plan        *faultinject.Plan // nil: no faults
	restarts    int
	restore     *checkpoint.Snapshot
	reg         *metrics.Registry
	gate        *gate
	// savepoint: stopHalfway stops with a savepoint (moved to another
	// directory before it is loaded) instead of cancelling.
	savepoint bool
	// fullFailover restarts the whole job on every failure, instead of
	// the runtime's default regional failover (which keeps the subtasks
	// of other regions, and their prepared committables, running).
	fullFailover bool
}

// pipeline adds the case's source → sink pipeline to env. It is called
// once per job.
type pipeline func(env *stream.Environment, spec jobSpec) error

// skipIfUnsupported ends the case if err is not nil: it skips it if err
// wraps errors.ErrUnsupported (the connector cannot support the case) and
// fails it otherwise.
func skipIfUnsupported(t tb, err error, what string) {
	t.Helper()
	if err == nil {
		return
	}
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("%s: %v", what, err)
	}
	t.Fatalf("%s: %v", what, err)
}

// build plans a job of spec.
func build(t tb, p pipeline, spec jobSpec) *stream.Job {
	t.Helper()
	if spec.reg == nil {
		spec.reg = metrics.NewRegistry()
	}
	opts := []stream.Option{
		stream.Parallelism(spec.parallelism),
		stream.CheckpointEvery(checkpointInterval),
		stream.Logger(stream.DiscardLogger()),
		stream.Metrics(spec.reg),
		stream.Restart(restart.FixedDelay(spec.restarts, 10*time.Millisecond)),
		stream.BufferTimeout(10 * time.Millisecond),
	}
	if spec.restore != nil {
		opts = append(opts, stream.RestoreFrom(spec.restore))
	}
	if spec.fullFailover {
		opts = append(opts, stream.Failover(stream.FailoverFull))
	}
	env := stream.New(opts...)
	if err := p(env, spec); err != nil {
		skipIfUnsupported(t, err, "build the job")
	}
	j, err := env.Build(jobName)
	if err != nil {
		t.Fatalf("plan the job: %v", err)
	}
	return j
}

// run runs a job to its end and fails the case if it does not finish.
func run(t tb, c *config, p pipeline, spec jobSpec) *stream.Result {
	t.Helper()
	j := build(t, p, spec)
	ctx, cancel := context.WithTimeout(t.Context(), c.timeout)
	defer cancel()
	res, err := j.Run(ctx)
	if err != nil {
		if ctx.Err() != nil {
			t.Fatalf("the job did not finish within %s (status %+v): %v", c.timeout, j.Status(), err)
		}
		t.Fatalf("the job failed: %v%s", err, firedFaults(spec.plan))
	}
	if spec.plan != nil {
		t.Logf("faults fired: %v; restarts %d; checkpoints %d", spec.plan.Fired(), res.Restarts, res.Checkpoints.Completed)
	}
	return res
}

// crashPlan returns a plan of faults in crash mode (writers of failed
// attempts are abandoned without Close, as kill -9 abandons them); the
// abandoned writers are closed when the case ends, after its checks.
func crashPlan(t tb, faults ...faultinject.Fault) *faultinject.Plan {
	p := faultinject.NewPlan(faults...).Crash()
	t.Cleanup(func() {
		if err := p.CloseAbandoned(); err != nil {
			t.Logf("close the writers the crashed attempts abandoned: %v", err)
		}
	})
	return p
}

func firedFaults(p *faultinject.Plan) string {
	if p == nil {
		return ""
	}
	return fmt.Sprintf(" (injected faults fired: %v; restarts per fault)", p.Fired())
}

// stopHalfway runs a job until its readers emitted about half of total
// records (40% and a third of a split, so that readers stop in the middle of
// their splits, not at their ends) and at least two checkpoints completed
// after that, then cancels it and returns the latest completed checkpoint to
// resume from — or, with spec.savepoint, stops it with a savepoint, moves
// the savepoint elsewhere (savepoints are relocatable) and returns it.
func stopHalfway(t tb, c *config, p pipeline, spec jobSpec, want [][]Record) *checkpoint.Snapshot {
	t.Helper()
	total := count(want)
	// Hold at about 40 %, off any round number: readers that go at the same
	// pace in chunks of 100 records must stop inside their splits, not at
	// their ends, or a reader that does not snapshot its position would go
	// unnoticed.
	spec.gate.holdAfter(int64(total*2/5 + 50))
	j := build(t, p, spec)
	ctx, cancel := context.WithTimeout(t.Context(), c.timeout)
	defer cancel()
	h := j.Start(ctx)
	defer func() { // also on Fatalf: no job outlives its case
		h.Cancel()
		_, _ = h.Wait()
	}()
	deadline := time.Now().Add(pauseTimeout)
	atPause := -1
	for {
		st := h.Status()
		if atPause < 0 && spec.gate.held() {
			atPause = st.Checkpoints.Completed
		}
		if atPause >= 0 && st.Checkpoints.Completed >= atPause+2 {
			break
		}
		select {
		case <-h.Done():
			_, err := h.Wait()
			t.Fatalf("the first job ended before it was stopped halfway (%d of %d records read): %v", spec.gate.emitted.Load(), total, err)
		case <-time.After(waitStep):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the first job did not get halfway and complete two checkpoints within %s: %d of %d records read, status %+v",
				pauseTimeout, spec.gate.emitted.Load(), total, st)
		}
	}
	if spec.savepoint {
		info, _, err := h.StopWithSavepoint(ctx, t.TempDir())
		if err != nil {
			t.Fatalf("stop with savepoint: %v", err)
		}
		moved := filepath.Join(t.TempDir(), "moved-savepoint")
		if err := os.Rename(info.Path, moved); err != nil {
			t.Fatalf("move savepoint: %v", err)
		}
		snap, _, err := checkpoint.Load(ctx, moved)
		if err != nil {
			t.Fatalf("load moved savepoint: %v", err)
		}
		t.Logf("stopped the first job with savepoint %d after %d of %d records", snap.ID, spec.gate.emitted.Load(), total)
		spec.gate.release()
		return snap
	}
	h.Cancel()
	if _, err := h.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		t.Logf("first job: %v", err)
	}
	snap := j.Latest()
	if snap == nil {
		t.Fatalf("the first job completed checkpoints but has no latest checkpoint")
		return nil // unreachable: Fatalf ends the case
	}
	t.Logf("stopped the first job after %d of %d records; resuming from checkpoint %d", spec.gate.emitted.Load(), total, snap.ID)
	spec.gate.release()
	return snap
}

// waitFor polls cond until it holds or d passed; it reports whether it held.
func waitFor(ctx context.Context, d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(waitStep)
	}
	return true
}
