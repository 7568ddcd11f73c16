package engine_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// TestUnboundedDatagenMoreSplitsThanParallelism: an unbounded datagen with
// 4 splits at parallelism 2 reads every split (issue 11: splits 2 and 3
// were never assigned with pull assignment), and keeps reading every split
// after a stop and a resume at parallelism 3 and then 1; the committed
// output of each split is its index sequence from the start, each index
// once.
func TestUnboundedDatagenMoreSplitsThanParallelism(t *testing.T) {
	for _, push := range []bool{false, true} {
		t.Run(fmt.Sprint("push=", push), func(t *testing.T) {
			const splits = 4
			store := testsink.NewStore[int64]()
			opts := []datagen.Option{datagen.Splits(splits), datagen.RatePerSecond(8000)}
			if push {
				opts = append(opts, datagen.PushAssignment())
			}
			var restore *checkpoint.Snapshot
			prev := make([]int, splits)
			for _, p := range []int{2, 3, 1} {
				eopts := []stream.Option{stream.Parallelism(p), stream.CheckpointEvery(20 * time.Millisecond),
					stream.Logger(engine.DiscardLogger())}
				if restore != nil {
					eopts = append(eopts, stream.RestoreFrom(restore))
				}
				env := stream.New(eopts...)
				gen := datagen.New(func(i int64) int64 { return i }, opts...)
				stream.SinkTo(stream.FromSource(env, gen, watermark.None[int64](), "gen"), testsink.NewTwoPhase(store), "sink")
				h, err := env.Start(t.Context(), "splits")
				if err != nil {
					t.Fatal(err)
				}
				waitCheckpoints(t, h, 3)
				// Wait (bounded) until every split committed records beyond
				// what it had before this run.
				grown := func() bool {
					per := perSplit(store.Committed(), splits)
					for k := range splits {
						if len(per[k]) <= prev[k] {
							return false
						}
					}
					return true
				}
				for i := 0; !grown() && i < 1000; i++ {
					time.Sleep(10 * time.Millisecond)
				}
				if _, err := h.Stop(t.Context()); err != nil {
					t.Fatalf("parallelism %d: stop: %v", p, err)
				}
				per := perSplit(store.Committed(), splits)
				for k := range splits {
					if len(per[k]) <= prev[k] {
						t.Errorf("parallelism %d: split %d committed %d records, had %d before: not read", p, k, len(per[k]), prev[k])
					}
					for i, v := range per[k] {
						if want := int64(k + i*splits); v != want {
							t.Fatalf("parallelism %d: split %d: record %d is index %d, want %d (lost or duplicated)", p, k, i, v, want)
						}
					}
					prev[k] = len(per[k])
				}
				if restore = h.Latest(); restore == nil {
					t.Fatal("no checkpoint to resume from")
				}
			}
		})
	}
}

// perSplit groups unbounded datagen indexes by split (index k belongs to
// split k%splits), each split's indexes sorted.
func perSplit(vs []int64, splits int) [][]int64 {
	out := make([][]int64, splits)
	for _, v := range vs {
		out[v%int64(splits)] = append(out[v%int64(splits)], v)
	}
	for _, s := range out {
		slices.Sort(s)
	}
	return out
}
