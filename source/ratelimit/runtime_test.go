package ratelimit_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/source/ratelimit"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// checkAll asserts that got holds 0..count-1 once each.
func checkAll(t *testing.T, got []int64, count int64) {
	t.Helper()
	seen := make([]int, count)
	for _, v := range got {
		if v < 0 || v >= count {
			t.Fatalf("record %d out of range", v)
		}
		seen[v]++
	}
	for v, n := range seen {
		if n != 1 {
			t.Fatalf("record %d seen %d times (%d records, want %d)", v, n, len(got), count)
		}
	}
}

// TestPerCheckpointThroughRuntime runs a throttled datagen job (parallelism
// 2, checkpoints every 10 ms) into the two-phase test sink, whose
// transactions are exactly what a reader emitted between two of its
// checkpoints. Output equals input, and for every reader the first k
// checkpoints hold at most k·share records plus one datagen poll (1024) of
// overshoot; the gate really closes (the job needs many checkpoints).
func TestPerCheckpointThroughRuntime(t *testing.T) {
	const (
		p     = 2
		share = 2048 // per reader: two full datagen polls
		count = 16 * share
	)
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(count), datagen.Splits(5))
	store := testsink.NewStore[int64]()
	env := stream.New(stream.Parallelism(p), stream.CheckpointEvery(10*time.Millisecond), stream.Logger(stream.DiscardLogger()))
	src := ratelimit.Wrap(gen, ratelimit.PerCheckpoint(p*share))
	stream.SinkTo(stream.FromSource(env, src, watermark.None[int64](), "gen"), testsink.NewTwoPhase(store), "sink")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := env.Execute(ctx, "per-checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	got, err := store.Final()
	if err != nil {
		t.Fatal(err)
	}
	checkAll(t, got, count)
	if min := int64(count/(p*share) - 1); res.Checkpoints.Completed < int(min) {
		t.Fatalf("%d checkpoints for %d records at %d per checkpoint", res.Checkpoints.Completed, count, p*share)
	}
	bySub := map[int][]testsink.Txn[int64]{}
	for _, tx := range store.CommittedTxns() {
		bySub[tx.Subtask] = append(bySub[tx.Subtask], tx)
	}
	for sub, txs := range bySub {
		slices.SortFunc(txs, func(a, b testsink.Txn[int64]) int { return int(a.CheckpointID - b.CheckpointID) })
		sum := 0
		for _, tx := range txs {
			sum += len(tx.Records)
			// Checkpoint k closes the k-th interval of the reader.
			if bound := int(tx.CheckpointID)*share + 1023; sum > bound {
				t.Fatalf("subtask %d: %d records up to checkpoint %d, bound %d", sub, sum, tx.CheckpointID, bound)
			}
		}
	}
	t.Logf("%d checkpoints, %d transactions", res.Checkpoints.Completed, len(store.CommittedTxns()))
}

// TestPerSecondExactlyOnceUnderFailure: throttling does not change what a
// reader snapshots. A throttled job with a reader failure and a failed
// snapshot restarts from its checkpoints, and output equals input.
func TestPerSecondExactlyOnceUnderFailure(t *testing.T) {
	const count = 20_000
	plan := faultinject.NewPlan(
		faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: 1, Records: 3000},
		faultinject.Fault{Kind: faultinject.DuringSnapshot, Subtask: 0, Checkpoint: 12},
	)
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(count), datagen.Splits(4))
	src := ratelimit.Wrap(faultinject.WrapSource(gen, plan), ratelimit.PerSecond(40_000))
	store := testsink.NewStore[int64]()
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(20*time.Millisecond),
		stream.Restart(restart.FixedDelay(3, 0)), stream.Logger(stream.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, src, watermark.None[int64](), "gen"), testsink.NewTwoPhase(store), "sink")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := env.Execute(ctx, "per-second-failures")
	if err != nil {
		t.Fatal(err)
	}
	got, err := store.Final()
	if err != nil {
		t.Fatal(err)
	}
	checkAll(t, got, count)
	if len(plan.Fired()) != 2 || res.Restarts == 0 {
		t.Fatalf("fired %v, %d restarts", plan.Fired(), res.Restarts)
	}
}

// rateRun runs count records of datagen throttled to rate at parallelism p
// and returns the records per second from the start of the job to the last
// record the map saw. (Measuring from the first record instead counts the
// records of the first poll as if they took no time: 1024 of 15,000 per
// reader at parallelism 2, +5 % by itself.)
func rateRun(ctx context.Context, count int64, rate float64, p int) (float64, error) {
	var last atomic.Int64
	stamp := func(v int64) int64 {
		last.Store(time.Now().UnixNano())
		return v
	}
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(count), datagen.Splits(p))
	store := testsink.NewStore[int64]()
	env := stream.New(stream.Parallelism(p), stream.Logger(stream.DiscardLogger()))
	s := stream.Map(stream.FromSource(env, ratelimit.Wrap(gen, ratelimit.PerSecond(rate)), watermark.None[int64](), "gen"),
		stamp, stream.Name("stamp"))
	stream.SinkTo(s, testsink.NewCollect(store), "sink")
	start := time.Now().UnixNano()
	if _, err := env.Execute(ctx, "rate"); err != nil {
		return 0, err
	}
	if n := int64(len(store.Committed())); n != count {
		return 0, fmt.Errorf("%d records, want %d", n, count)
	}
	return float64(count) / (time.Duration(last.Load() - start).Seconds()), nil
}

// BenchmarkAchievedRate measures a 10,000 records/s datagen over 3 s, at
// parallelism 1 and 2, and reports the achieved rate (records per second
// from the start of the job to the last record, so it includes the job's
// start and the limiter's first wait of one burst) and its error against
// the target in percent. One run takes about 3 s, so the benchmark runs once:
//
//	go test -run XXX -bench AchievedRate -benchtime 1x ./source/ratelimit
func BenchmarkAchievedRate(b *testing.B) {
	const rate, count = 10_000, 30_000
	for _, p := range []int{1, 2} {
		b.Run(fmt.Sprintf("p=%d", p), func(b *testing.B) {
			var got float64
			for b.Loop() {
				r, err := rateRun(b.Context(), count, rate, p)
				if err != nil {
					b.Fatal(err)
				}
				got = r
			}
			b.ReportMetric(got, "records/s")
			b.ReportMetric(100*(got-rate)/rate, "%error")
		})
	}
}
