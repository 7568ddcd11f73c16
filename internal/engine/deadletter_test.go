package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// routed is a record on its way to the main or the dead-letter output.
type routed struct {
	v   int64
	bad bool
}

// TestSideOutputExactlyOnce is the runtime's side output: one operator's
// stream feeds two operators (fan-out), each filtering its share into its
// own two-phase sink. Both sinks take part in the same checkpoints, so
// under injected failures (readers, snapshots, writers of both sinks,
// commits) the main output plus the side output equals the input, each
// record once, and the side output holds exactly the records routed to it.
func TestSideOutputExactlyOnce(t *testing.T) {
	const parallelism, count = 4, int64(40_000)
	seeds := []int64{11, 12, 13}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			plan := faultinject.RandomPlan(seed, 5, faultinject.Kinds(), parallelism, count/parallelism/2, 12)
			side := faultinject.RandomPlan(seed+100, 2, faultinject.Kinds(), parallelism, count/parallelism/200, 12)
			gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(count), datagen.Splits(8), datagen.RatePerSecond(float64(count)))
			mainStore, deadStore := testsink.NewStore[int64](), testsink.NewStore[int64]()
			env := stream.New(stream.Parallelism(parallelism), stream.CheckpointEvery(50*time.Millisecond),
				stream.Restart(restart.FixedDelay(12, 0)), stream.Logger(engine.DiscardLogger()))
			s := stream.FromSource(env, faultinject.WrapSource(gen, plan), watermark.None[int64](), "gen")
			r := stream.Map(s, func(v int64) routed { return routed{v, v%100 == 7} }, stream.Name("route"))
			good := stream.FlatMap(r, func(x routed, emit func(int64)) {
				if !x.bad {
					emit(x.v)
				}
			}, stream.Name("main"))
			bad := stream.FlatMap(r, func(x routed, emit func(int64)) {
				if x.bad {
					emit(x.v)
				}
			}, stream.Name("dead"))
			stream.SinkTo(good, faultinject.WrapSink(testsink.NewTwoPhase(mainStore), plan), "main-sink")
			stream.SinkTo(bad, faultinject.WrapSink(testsink.NewTwoPhase(deadStore), side), "dead-sink")
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			res, err := env.Execute(ctx, "side-output")
			if err != nil {
				t.Fatalf("%v (fired %v, %v)", err, plan.Fired(), side.Fired())
			}
			dead := deadStore.Committed()
			for _, v := range dead {
				if v%100 != 7 {
					t.Fatalf("record %d in the side output", v)
				}
			}
			if want := count / 100; int64(len(dead)) != want {
				t.Errorf("side output holds %d records, want %d", len(dead), want)
			}
			checkSequence(t, gen, count, append(mainStore.Committed(), dead...), false)
			if st := append(mainStore.Staged(), deadStore.Staged()...); len(st) > 0 {
				t.Errorf("transactions left staged: %v", st)
			}
			t.Logf("fired %v and %v; %d restarts, %d checkpoints", plan.Fired(), side.Fired(), res.Restarts, res.Checkpoints.Completed)
		})
	}
}
