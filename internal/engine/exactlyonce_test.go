package engine_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

type chaosCase struct {
	seed      int64
	faults    int
	rebalance bool // one failover region: every failure fails over globally
	full      bool // global failover even without a rebalance
	place     placeMode
	// newChain: the map starts a new chain (stream.StartNewChain), so
	// the source hands its records and barriers to the map's task
	// through a channel.
	newChain bool
}

// TestExactlyOnceUnderFailures runs a bounded datagen → map → two-phase
// sink job at parallelism 4 with checkpoints every 50 ms and seeded random
// failures of every kind (a reader after N records, a snapshot, a writer
// after N records, between prepare and commit, during commit). Each job must
// end with output equal to input: every record committed once, none twice,
// each split's records in order. Replay a failing seed with
// -run 'TestExactlyOnceUnderFailures/seed=N'.
func TestExactlyOnceUnderFailures(t *testing.T) {
	cases := []chaosCase{
		{seed: 1, faults: 6}, {seed: 2, faults: 6, rebalance: true}, {seed: 3, faults: 6},
		{seed: 4, faults: 6, rebalance: true}, {seed: 5, faults: 6, full: true},
		{seed: 6, faults: 6, newChain: true}, {seed: 7, faults: 6, newChain: true, full: true},
	}
	count := int64(60_000)
	if testing.Short() {
		cases, count = cases[:2], 20_000
	}
	totalFired := 0
	for _, c := range cases {
		t.Run(fmt.Sprintf("seed=%d", c.seed), func(t *testing.T) {
			totalFired += runChaos(t, c, count)
		})
	}
	if !testing.Short() && totalFired < 20 {
		t.Errorf("only %d injected failures fired over all seeds, want at least 20", totalFired)
	}
	t.Logf("%d injected failures fired", totalFired)
}

func runChaos(t *testing.T, c chaosCase, count int64) int {
	const parallelism, splits = 4, 8
	plan := faultinject.RandomPlan(c.seed, c.faults, faultinject.Kinds(), parallelism, count/parallelism/2, 15)
	t.Logf("seed %d, plan %v", c.seed, plan)
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(count), datagen.Splits(splits),
		datagen.RatePerSecond(float64(count))) // about 1 s per clean run
	store := testsink.NewStore[int64]()
	reg := metrics.NewRegistry()
	env := stream.New(stream.Parallelism(parallelism), stream.CheckpointEvery(50*time.Millisecond),
		stream.Restart(restart.FixedDelay(c.faults+2, 0)), stream.Logger(engine.DiscardLogger()), stream.Metrics(reg))
	if c.full {
		env = stream.New(stream.Parallelism(parallelism), stream.CheckpointEvery(50*time.Millisecond), stream.Failover(engine.FailoverFull),
			stream.Restart(restart.FixedDelay(c.faults+2, 0)), stream.Logger(engine.DiscardLogger()), stream.Metrics(reg))
	}
	s := stream.FromSource(env, faultinject.WrapSource(gen, plan), watermark.None[int64](), "gen")
	mo := []stream.OpOption{stream.Name("identity")}
	if c.newChain {
		mo = append(mo, stream.StartNewChain())
	}
	m := stream.Map(s, func(v int64) int64 { return v }, mo...)
	if c.rebalance {
		m = stream.Rebalance(m)
	}
	stream.SinkTo(m, faultinject.WrapSink(testsink.NewTwoPhase(store), plan), "sink")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	res, err := executePlaced(ctx, t, env, fmt.Sprintf("chaos-%d", c.seed), c.place)
	if err != nil {
		t.Fatalf("seed %d: %v (fired: %v)", c.seed, err, plan.Fired())
	}
	fired := plan.Fired()
	// Faults may fire together in one attempt (one restart), but every
	// restart must have been caused by an injected fault.
	if res.Restarts > len(fired) || (len(fired) > 0 && res.Restarts == 0) {
		t.Errorf("seed %d: %d restarts for %d fired faults (%v)", c.seed, res.Restarts, len(fired), fired)
	}
	for _, f := range res.Failures {
		if !errors.Is(f, faultinject.ErrInjected) {
			t.Errorf("seed %d: restart caused by %v, not by an injected fault", c.seed, f)
		}
	}
	got := store.Committed()
	// A rebalance spreads a split over all sink subtasks, which commit
	// independently: order per split holds only without one.
	checkSequence(t, gen, count, got, !c.rebalance)
	if staged := store.Staged(); len(staged) > 0 {
		t.Errorf("seed %d: transactions left staged: %v", c.seed, staged)
	}
	t.Logf("seed %d: %d faults fired %v, %d restarts, %d checkpoints", c.seed, len(fired), fired, res.Restarts, res.Checkpoints.Completed)
	return len(fired)
}

// checkSequence asserts that got holds 0..count-1 once each and, if
// ordered, keeps the order within each datagen split.
func checkSequence(t *testing.T, gen *datagen.Source[int64], count int64, got []int64, ordered bool) {
	t.Helper()
	seen := make([]int, count)
	last := map[int]int64{}
	var missing, dup []int64
	for _, v := range got {
		if v < 0 || v >= count {
			t.Fatalf("record %d out of range", v)
		}
		seen[v]++
		if seen[v] == 2 {
			dup = append(dup, v)
		}
		sp := gen.SplitOf(v)
		if p, ok := last[sp]; ordered && ok && v < p && seen[v] == 1 {
			t.Errorf("split %d out of order: %d after %d", sp, v, p)
		}
		last[sp] = v
	}
	for v, n := range seen {
		if n == 0 {
			missing = append(missing, int64(v))
		}
	}
	if len(missing) > 0 || len(dup) > 0 || int64(len(got)) != count {
		first := func(vs []int64) string {
			if len(vs) == 0 {
				return "none"
			}
			return fmt.Sprintf("%d (split %d)", vs[0], gen.SplitOf(vs[0]))
		}
		t.Fatalf("got %d records, want %d: %d missing (first %s), %d duplicated (first %s)",
			len(got), count, len(missing), first(missing), len(dup), first(dup))
	}
}
