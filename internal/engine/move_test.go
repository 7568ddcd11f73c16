package engine_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// TestPlanMove pins the rule that gives work to a late host: a host over
// ceil(units/hosts) gives its last movable unit to the host with the
// fewest (first in order on ties).
func TestPlanMove(t *testing.T) {
	cases := []struct {
		hostOf, hosts []string
		fixed         []int
		unit          int
		to            string
	}{
		{hostOf: []string{"a", "a", "a"}, hosts: []string{"a", "b"}, unit: 2, to: "b"},      // share 2
		{hostOf: []string{"a", "a", "b"}, hosts: []string{"a", "b"}, unit: -1},              // even enough
		{hostOf: []string{"a", "a", "b"}, hosts: []string{"a", "b", "c"}, unit: 1, to: "c"}, // c linked late
		{hostOf: []string{"a", "b", "b"}, hosts: []string{"a", "b", "c"}, unit: 2, to: "c"}, // the first over its share gives
		{hostOf: []string{"a", "a", "b"}, hosts: []string{"a", "b", "c"}, fixed: []int{1}, unit: 0, to: "c"},
		{hostOf: []string{"a", "a", "b"}, hosts: []string{"a", "b", "c"}, fixed: []int{0, 1}, unit: -1},
		{hostOf: []string{"a", "a", "b", "b"}, hosts: []string{"a", "b", "c"}, unit: -1}, // share 2: nobody over
		{hostOf: []string{"a", "a", "a", "b"}, hosts: []string{"a", "b", "c"}, unit: 2, to: "c"},
		{hostOf: []string{"a", "a", "x"}, hosts: []string{"a", "b", "c"}, unit: -1},              // x is not live: its failover first
		{hostOf: []string{"a", "a", "a"}, hosts: []string{"a"}, unit: -1},                        // one host
		{hostOf: []string{"c", "c", "c", "c"}, hosts: []string{"a", "b", "c"}, unit: 3, to: "a"}, // ties: first in order
	}
	for _, c := range cases {
		u, to := engine.PlanMove(c.hostOf, c.hosts, c.fixed...)
		if u != c.unit || to != c.to {
			t.Errorf("PlanMove(%v, %v, fixed %v) = %d, %q; want %d, %q", c.hostOf, c.hosts, c.fixed, u, to, c.unit, c.to)
		}
	}
}

// lateHosts is a Placement whose loopback host joins only once the test
// adds it, as a worker that links after the attempt started.
type lateHosts struct {
	late  *engine.Loopback
	added atomic.Bool
}

func (p *lateHosts) Hosts() []engine.TaskHost {
	if p.added.Load() {
		return []engine.TaskHost{engine.Local, p.late}
	}
	return []engine.TaskHost{engine.Local}
}

// TestLateHostGetsRegion: a job of three regions starts with only the
// coordinator's process as a host, so all three run there. Once
// checkpoints completed, a loopback host joins the Placement: after the
// next checkpoint the engine moves one region (over its share of two) to
// it, restarting it from that checkpoint there, without counting a
// failure (the restart strategy allows none). Half the splits are held
// until the move, so the job cannot end before it; the output equals the
// input and nothing is left staged. With MoveInterval < 0 nothing moves.
func TestLateHostGetsRegion(t *testing.T) {
	for _, moves := range []bool{true, false} {
		t.Run(fmt.Sprintf("moves=%v", moves), func(t *testing.T) { lateHostRun(t, moves) })
	}
}

func lateHostRun(t *testing.T, moves bool) {
	const parallelism = 3
	splits, src, release := halfHeld(parallelism)
	store := testsink.NewStore[rec]()
	env := stream.New(stream.Parallelism(parallelism), stream.CheckpointEvery(50*time.Millisecond),
		stream.Restart(restart.None()), stream.Logger(engine.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, src, watermark.None[rec](), "script"), testsink.NewTwoPhase(store), "sink")
	j, err := env.Build("late-host")
	if err != nil {
		t.Fatal(err)
	}
	if regions, _ := engine.Units(j); regions != parallelism {
		t.Fatalf("%d regions, want %d", regions, parallelism)
	}
	lb := engine.NewLoopback("late", engine.DiscardLogger())
	t.Cleanup(func() {
		if err := lb.Close(); err != nil {
			t.Errorf("loopback host: %v", err)
		}
	})
	pl := &lateHosts{late: lb}
	engine.SetPlacement(j, pl)
	if !moves {
		engine.SetMoveInterval(j, -1)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	h := j.Start(ctx)
	waitCheckpoints(t, h, 2)
	pl.added.Store(true)
	at := h.Status().Checkpoints.Completed
	if moves {
		for i := 0; lb.Deployed() == 0; i++ {
			if i > 30000 { // a hang guard
				t.Fatalf("no region moved to the late host within 60s (%d checkpoints completed)", h.Status().Checkpoints.Completed)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	waitCheckpoints(t, h, at+3)
	close(release)
	res, err := h.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Failures) > 0 {
		t.Errorf("failures: %v (a move is not one)", res.Failures)
	}
	if got := lb.Deployed(); moves && got == 0 || !moves && got != 0 {
		t.Errorf("%d deployments on the late host, moves %v", got, moves)
	}
	expectExactlyOnce(t, splits, store.Committed())
	if staged := store.Staged(); len(staged) > 0 {
		t.Errorf("transactions left staged: %v", staged)
	}
}
