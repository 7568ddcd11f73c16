package postgres

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// genToPostgres runs datagen (count records, 6 splits, rate-limited to
// rate records/s) into table (k bigint, v text, no key: a duplicate would
// show) exactly-once at parallelism 3 with checkpoints every 100 ms,
// through the fault plan (nil: none), with up to restarts restarts.
func genToPostgres(ctx context.Context, url, table string, count int64, rate float64, plan *faultinject.Plan, restarts int, opts ...SinkOption) (*stream.Result, error) {
	src := datagen.New(func(i int64) int64 { return i }, datagen.Count(count), datagen.Splits(6), datagen.RatePerSecond(rate))
	sk, err := NewSink(url, table, func(i int64) ([]any, error) { return []any{i, strconv.FormatInt(i*7, 10)}, nil },
		append([]SinkOption{Columns("k", "v")}, opts...)...)
	if err != nil {
		return nil, err
	}
	env := stream.New(stream.Parallelism(3), stream.CheckpointEvery(100*time.Millisecond),
		stream.Restart(restart.Exponential(50*time.Millisecond, time.Second, restarts)), stream.Logger(stream.DiscardLogger()))
	if plan == nil {
		plan = faultinject.NewPlan()
	}
	s := stream.FromSource(env, faultinject.WrapSource(src, plan), watermark.None[int64](), "gen")
	stream.SinkTo(s, faultinject.WrapSink(sk, plan), "pg")
	return env.Execute(ctx, "gen-to-postgres")
}

// checkExactly checks that table holds k = 0 … count-1 once each with
// v = 7k, and that no prepared transaction is left in its database.
func checkExactly(t *testing.T, url, table string, count int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	type stats struct{ N, Distinct, Min, Max, Bad int64 }
	st, err := queryURL[stats](ctx, url, "SELECT count(*), count(DISTINCT k), coalesce(min(k), -1), coalesce(max(k), -1), count(*) FILTER (WHERE v <> (k*7)::text) FROM "+table)
	if err != nil {
		t.Fatal(err)
	}
	want := stats{N: count, Distinct: count, Min: 0, Max: count - 1}
	if st[0] != want {
		t.Errorf("table %s: got %d rows, %d distinct keys, keys %d to %d, %d wrong values; want exactly 0 … %d once each", table, st[0].N, st[0].Distinct, st[0].Min, st[0].Max, st[0].Bad, count-1)
	}
	type g struct{ GID string }
	left, err := queryURL[g](ctx, url, "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()")
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("prepared transactions left: %v", left)
	}
}

// TestExactlyOnceUnderFailures: datagen → postgres exactly-once with eight
// injected failures at every stage (reader, writer, snapshot, before and
// during commit, right after a prepare), in crash mode (failed writers are
// abandoned without Close, with their connections): the table holds
// exactly the input and no prepared transaction is left.
func TestExactlyOnceUnderFailures(t *testing.T) {
	url := needServer(t)
	const count = 30_000
	table := newTable(t, "eo_fail", "k bigint NOT NULL, v text NOT NULL")
	plan := faultinject.NewPlan(
		faultinject.Fault{Kind: faultinject.WriterAfterRecords, Subtask: 0, Records: 2500},
		faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: 1, Records: 3000},
		faultinject.Fault{Kind: faultinject.DuringSnapshot, Subtask: 2, Checkpoint: 5},
		faultinject.Fault{Kind: faultinject.BeforeCommit, Subtask: 0, Checkpoint: 8},
		faultinject.Fault{Kind: faultinject.DuringCommit, Subtask: 1, Checkpoint: 11},
		faultinject.Fault{Kind: faultinject.AfterPrepareCommit, Subtask: 2, Checkpoint: 14},
		faultinject.Fault{Kind: faultinject.WriterAfterRecords, Subtask: 1, Records: 4000},
		faultinject.Fault{Kind: faultinject.AfterPrepareCommit, Subtask: 0, Checkpoint: 20},
	).Crash()
	defer func() {
		if err := plan.CloseAbandoned(); err != nil {
			t.Logf("close abandoned writers: %v", err)
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	res, err := genToPostgres(ctx, url, table, count, 6000, plan, 30)
	if err != nil {
		t.Fatalf("job: %v (fired %v)", err, plan.Fired())
	}
	t.Logf("%d faults fired, %d restarts, %d checkpoints", len(plan.Fired()), res.Restarts, res.Checkpoints.Completed)
	if len(plan.Fired()) < 6 {
		t.Errorf("only %d faults fired (%v), want at least 6", len(plan.Fired()), plan.Fired())
	}
	checkExactly(t, url, table, count)
}

// ownServer is a PostgreSQL server of one test, started by
// scripts/postgres.sh in a run dir of its own.
type ownServer struct {
	script, run, url string
}

// startOwnServer starts a server with the extra environment (for example
// SLUICE_POSTGRES_MAX_PREPARED=0) and stops it at the end of the test.
func startOwnServer(t *testing.T, env ...string) *ownServer {
	t.Helper()
	needServer(t)
	script, err := filepath.Abs("../../scripts/postgres.sh")
	if err != nil {
		t.Fatal(err)
	}
	run, err := os.MkdirTemp("", "sluice-postgres-test.")
	if err != nil {
		t.Fatal(err)
	}
	s := &ownServer{script: script, run: run}
	t.Cleanup(func() {
		if out, err := s.cmd(context.Background(), "stop").CombinedOutput(); err != nil {
			t.Logf("stop the test's server: %v: %s", err, out)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := s.cmd(ctx, "start")
	c.Env = append(c.Env, env...)
	out, err := c.Output()
	if err != nil {
		t.Fatalf("scripts/postgres.sh start: %v: %s", err, errOut(err))
	}
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "SLUICE_POSTGRES_URL="); ok {
			s.url = v
		}
	}
	if s.url == "" {
		t.Fatalf("scripts/postgres.sh start printed no SLUICE_POSTGRES_URL: %s", out)
	}
	return s
}

func errOut(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

func (s *ownServer) cmd(ctx context.Context, arg string) *exec.Cmd {
	c := exec.CommandContext(ctx, s.script, arg)
	c.Env = append(os.Environ(), "SLUICE_POSTGRES_RUN="+s.run)
	return c
}

// TestPostgresKill9 kills the server itself with SIGKILL mid-run (once a
// quarter of the rows is committed) and restarts it two seconds later:
// the job fails over, its writers wait for the server (SetupTimeout), the
// restored committables are committed (or found committed), and the table
// ends with exactly the input, no prepared transaction left.
func TestPostgresKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server of its own: skipped with -short")
	}
	own := startOwnServer(t)
	const count = 40_000
	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()
	mustExecURL(t, own.url, "CREATE TABLE k9 (k bigint NOT NULL, v text NOT NULL)")
	var wg sync.WaitGroup
	killed := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		killed <- own.killMidway(ctx, "k9", count/4)
	}()
	res, err := genToPostgres(ctx, own.url, "k9", count, 8000, nil, 40)
	wg.Wait()
	if kerr := <-killed; kerr != nil {
		t.Fatalf("kill -9 / restart of the server: %v", kerr)
	}
	if err != nil {
		t.Fatalf("job: %v", err)
	}
	t.Logf("%d restarts, %d checkpoints; failures:", res.Restarts, res.Checkpoints.Completed)
	for i, f := range res.Failures {
		t.Logf("  %d: %v", i, f)
	}
	if res.Restarts < 1 {
		t.Errorf("the job did not restart: the server was killed too late")
	}
	checkExactly(t, own.url, "k9", count)
}

// killMidway waits (bounded) until table has after rows, then kills the
// server with SIGKILL and restarts it 2 s later.
func (s *ownServer) killMidway(ctx context.Context, table string, after int64) error {
	type n struct{ N int64 }
	for i := 0; i < 1200 && ctx.Err() == nil; i++ {
		got, err := queryURL[n](ctx, s.url, "SELECT count(*) FROM "+table)
		if err == nil && got[0].N >= after {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if out, err := s.cmd(ctx, "kill9").CombinedOutput(); err != nil {
		return fmt.Errorf("kill9: %w: %s", err, out)
	}
	time.Sleep(2 * time.Second)
	if out, err := s.cmd(ctx, "restart").CombinedOutput(); err != nil {
		return fmt.Errorf("restart: %w: %s", err, out)
	}
	return nil
}
