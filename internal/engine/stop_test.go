package engine_test

import (
	"context"
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

// TestStopAndResumeUnbounded: an unbounded job is stopped cleanly (final
// checkpoint, commit, end) twice, resuming from the stop checkpoint in
// between. Each split's committed records form a gap-free, duplicate-free
// prefix of the split, and nothing is left staged.
func TestStopAndResumeUnbounded(t *testing.T) {
	const splits = 3
	dir := t.TempDir()
	store := testsink.NewStore[int64]()
	run := func(restore *checkpoint.Snapshot) *engine.Result {
		opts := []stream.Option{stream.Parallelism(2), stream.CheckpointEvery(20 * time.Millisecond),
			stream.CheckpointDir(dir), stream.Logger(engine.DiscardLogger())}
		if restore != nil {
			opts = append(opts, stream.RestoreFrom(restore))
		}
		env := stream.New(opts...)
		gen := datagen.New(func(i int64) int64 { return i }, datagen.Splits(splits), datagen.RatePerSecond(30_000))
		stream.SinkTo(stream.FromSource(env, gen, watermark.None[int64](), "gen"), testsink.NewTwoPhase(store), "sink")
		h, err := env.Start(t.Context(), "stop")
		if err != nil {
			t.Fatal(err)
		}
		waitCheckpoints(t, h, 3)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		res, err := h.Stop(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Stopped || res.State != engine.Finished {
			t.Fatalf("got state %s, stopped %v; want FINISHED, stopped", res.State, res.Stopped)
		}
		return res
	}
	run(nil)
	first := len(store.Committed())
	st, err := checkpoint.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	snap, _, err := st.Latest(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	run(snap)
	got := store.Committed()
	if first == 0 || len(got) <= first {
		t.Fatalf("committed %d records after the first run and %d after the second; want growth", first, len(got))
	}
	checkSplitPrefixes(t, store, splits)
}

// TestStopUnderBackpressure: with the channels to a slow operator full,
// the stop barrier still gets through, the job ends, and the committed
// output is a clean prefix of each split.
func TestStopUnderBackpressure(t *testing.T) {
	store := testsink.NewStore[int64]()
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(20*time.Millisecond), stream.BatchSize(64),
		stream.ChannelCapacity(1), stream.Logger(engine.DiscardLogger()))
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Splits(2))
	slow := stream.Map(stream.Rebalance(stream.FromSource(env, gen, watermark.None[int64](), "gen")), func(v int64) int64 {
		if v%64 == 0 {
			time.Sleep(100 * time.Microsecond)
		}
		return v
	}, stream.Name("slow"))
	stream.SinkTo(slow, testsink.NewTwoPhase(store), "sink")
	h, err := env.Start(t.Context(), "backpressure")
	if err != nil {
		t.Fatal(err)
	}
	waitCheckpoints(t, h, 2)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := h.Stop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Stopped {
		t.Fatal("job did not stop cleanly")
	}
	got := store.Committed()
	bySplit := map[int64][]int64{}
	for _, v := range got {
		bySplit[v%2] = append(bySplit[v%2], v)
	}
	for s, vs := range bySplit {
		slices.Sort(vs)
		for i, v := range vs {
			if want := s + int64(i)*2; v != want {
				t.Fatalf("split %d: record %d is %d, want %d", s, i, v, want)
			}
		}
	}
	if len(got) == 0 {
		t.Fatal("nothing committed")
	}
}

// TestCancelBusySource: a job whose reader always has more (unbounded
// datagen without a rate limit) ends promptly on cancel.
func TestCancelBusySource(t *testing.T) {
	env := stream.New(stream.Parallelism(2), stream.Logger(engine.DiscardLogger()))
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Splits(2))
	stream.SinkTo(stream.FromSource(env, gen, watermark.None[int64](), "gen"), testsink.NewCollect(testsink.NewStore[int64]()), "sink")
	h, err := env.Start(t.Context(), "busy")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000 && h.Metrics().Sum("numRecordsIn", "operator", "gen") == 0; i++ {
		time.Sleep(5 * time.Millisecond)
	}
	h.Cancel()
	select {
	case <-h.Done():
	case <-time.After(20 * time.Second):
		t.Fatal("the job did not end within 20s of its cancel")
	}
}
