package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// childEnv marks the test binary started by TestAcceptance as the process
// that runs the job (TestAcceptanceChild).
const childEnv = "SLUICE_POSTGRES_ACCEPTANCE_CHILD"

// TestAcceptance is the end-to-end check at library level, with
// datagen in place of Kafka: 300k rows into a table exactly once at
// parallelism 3 with checkpoints every 500 ms, run in a child process
// that is killed with SIGKILL twice (each run resumes from the newest
// checkpoint of its directory, as `sluice run --from` does), 4 injected
// failures per run (12 in all), and the server itself killed with
// SIGKILL and restarted during the last run. The table must hold exactly
// the input and no prepared transaction may be left.
func TestAcceptance(t *testing.T) {
	if testing.Short() {
		t.Skip("long: skipped with -short")
	}
	own := startOwnServer(t)
	const count = 300_000
	mustExecURL(t, own.url, "CREATE TABLE accept (k bigint NOT NULL, v text NOT NULL)")
	dir, job := filepath.Join(t.TempDir(), "checkpoints"), stream.NewJobID()
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	type n struct{ N int64 }
	committed := func() int64 {
		got, err := queryURL[n](ctx, own.url, "SELECT count(*) FROM accept")
		if err != nil {
			return -1
		}
		return got[0].N
	}
	fired := func(run int) int {
		b, _ := os.ReadFile(firedFile(dir, int64(run)))
		n, _ := strconv.Atoi(string(b))
		return n
	}
	// waitFor waits (bounded by ctx) until rows are committed and the
	// run's four faults fired; the child must not end before.
	waitFor := func(run int, rows int64, exited <-chan error) {
		for committed() < rows || fired(run) < 4 {
			select {
			case err := <-exited:
				t.Fatalf("run %d ended (%v) before %d rows were committed and its 4 faults fired (%d rows, %d faults)", run, err, rows, committed(), fired(run))
			case <-ctx.Done():
				t.Fatalf("run %d: %d rows committed and %d faults fired when the test's time ran out, want %d and 4", run, committed(), fired(run), rows)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	total := 0
	for run := range 3 {
		c := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestAcceptanceChild$", "-test.count=1")
		c.Env = append(os.Environ(), childEnv+"=1", "ACC_URL="+own.url, "ACC_DIR="+dir, "ACC_JOB="+job,
			"ACC_COUNT="+strconv.Itoa(count), "ACC_SEED="+strconv.Itoa(run))
		c.Stdout, c.Stderr = os.Stderr, os.Stderr
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- c.Wait() }()
		switch run {
		case 0, 1:
			waitFor(run, int64(run+1)*count/4, exited)
			if err := c.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			<-exited
			total += fired(run)
			t.Logf("run %d: killed the job's process with SIGKILL at %d committed rows, after %d injected failures", run, committed(), fired(run))
		case 2:
			waitFor(run, count*8/10, exited)
			t.Logf("run %d: kill -9 of the server at %d committed rows", run, committed())
			if out, err := own.cmd(ctx, "kill9").CombinedOutput(); err != nil {
				t.Fatalf("kill9: %v: %s", err, out)
			}
			time.Sleep(2 * time.Second)
			if out, err := own.cmd(ctx, "restart").CombinedOutput(); err != nil {
				t.Fatalf("restart: %v: %s", err, out)
			}
			if err := <-exited; err != nil {
				t.Fatalf("the last run failed: %v", err)
			}
			total += fired(run)
		}
	}
	if total < 10 {
		t.Errorf("%d injected failures fired, want at least 10", total)
	}
	checkExactly(t, own.url, "accept", count)
}

func firedFile(dir string, run int64) string {
	return filepath.Join(filepath.Dir(dir), "fired-"+strconv.FormatInt(run, 10))
}

// TestAcceptanceChild runs the job of TestAcceptance in a child process.
func TestAcceptanceChild(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("the child process of TestAcceptance")
	}
	count, _ := strconv.ParseInt(os.Getenv("ACC_COUNT"), 10, 64)
	seed, _ := strconv.ParseInt(os.Getenv("ACC_SEED"), 10, 64)
	dir := os.Getenv("ACC_DIR")
	ctx := t.Context()
	opts := []stream.Option{stream.Parallelism(3), stream.CheckpointEvery(500 * time.Millisecond),
		stream.CheckpointDir(dir), stream.JobID(os.Getenv("ACC_JOB")),
		stream.Restart(restart.Exponential(50*time.Millisecond, time.Second, 100)), stream.Logger(stream.DiscardLogger())}
	snap, info, err := checkpoint.LoadLatest(ctx, dir)
	switch {
	case err == nil:
		opts = append(opts, stream.RestoreFrom(snap))
		fmt.Fprintf(os.Stderr, "acceptance child %d: resuming from checkpoint %d\n", seed, info.ID)
	case errors.Is(err, checkpoint.ErrNotFound):
	default:
		t.Fatal(err)
	}
	// Four faults per run, at records and checkpoints relative to where
	// the run starts. A fault of one subtask fires only while that subtask
	// still has input (records to write, committables to prepare and
	// commit). With pulled splits one subtask could run out of splits long
	// before the others, more so under load, and a run ended with 3
	// faults (seen at load 26-46: "run 1 ended ... (300000 rows, 3
	// faults)"). So the splits are pushed, two to each subtask, and the
	// checkpoint faults fire on whichever subtask gets there first.
	plan := faultinject.NewPlan(
		faultinject.Fault{Kind: faultinject.WriterAfterRecords, Subtask: int(seed % 3), Records: 3000},
		faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: int((seed + 1) % 3), Records: 5000},
		faultinject.Fault{Kind: faultinject.BeforeCommit, Subtask: faultinject.AnySubtask, Checkpoint: info.ID + 3},
		faultinject.Fault{Kind: faultinject.AfterPrepareCommit, Subtask: faultinject.AnySubtask, Checkpoint: info.ID + 5},
	).Crash()
	defer func() { _ = plan.CloseAbandoned() }()
	// Tell the parent how many faults fired (it kills this process only
	// after all four).
	var wg sync.WaitGroup
	wctx, stop := context.WithCancel(ctx)
	defer func() {
		stop()
		wg.Wait()
		_ = os.WriteFile(firedFile(dir, seed), []byte(strconv.Itoa(len(plan.Fired()))), 0o644)
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			_ = os.WriteFile(firedFile(dir, seed), []byte(strconv.Itoa(len(plan.Fired()))), 0o644)
			select {
			case <-wctx.Done():
				return
			case <-tk.C:
			}
		}
	}()
	src := datagen.New(func(i int64) int64 { return i }, datagen.Count(count), datagen.Splits(6), datagen.RatePerSecond(20_000),
		datagen.PushAssignment())
	sk, err := NewSink(os.Getenv("ACC_URL"), "accept", func(i int64) ([]any, error) { return []any{i, strconv.FormatInt(i*7, 10)}, nil },
		Columns("k", "v"))
	if err != nil {
		t.Fatal(err)
	}
	env := stream.New(opts...)
	s := stream.FromSource(env, faultinject.WrapSource(src, plan), watermark.None[int64](), "gen")
	stream.SinkTo(s, faultinject.WrapSink(sk, plan), "pg")
	res, err := env.Execute(ctx, "acceptance")
	if err != nil {
		t.Fatalf("job: %v", err)
	}
	fmt.Fprintf(os.Stderr, "acceptance child %d: finished: %d faults fired %v, %d restarts, %d checkpoints\n",
		seed, len(plan.Fired()), plan.Fired(), res.Restarts, res.Checkpoints.Completed)
	if len(plan.Fired()) < 4 {
		t.Errorf("%d faults fired in the last run, want 4", len(plan.Fired()))
	}
}
