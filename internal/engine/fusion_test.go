package engine_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// TestMapFilterChains: a map chained into a filter runs as one pass; the
// output is what map-then-filter computes, also with the type changing
// and with pointer-holding records, and with a filter that keeps nothing.
func TestMapFilterChains(t *testing.T) {
	const n = 10_000
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	env := stream.New(stream.Parallelism(2), stream.Logger(engine.DiscardLogger()))
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(n), datagen.Splits(3))
	src := stream.FromSource(env, gen, watermark.None[int64](), "gen")
	strs := testsink.NewStore[string]()
	m := stream.Map(src, func(v int64) string { return fmt.Sprint(v * 3) })
	f := stream.Filter(m, func(s string) bool { return s[len(s)-1] == '0' })
	stream.SinkTo(f, testsink.NewTwoPhase(strs), "strings")
	none := testsink.NewStore[int64]()
	stream.SinkTo(stream.Filter(stream.Map(src, func(v int64) int64 { return -v }), func(int64) bool { return false }), testsink.NewTwoPhase(none), "none")
	if _, err := env.Execute(ctx, "fusion"); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range int64(n) {
		if s := fmt.Sprint(i * 3); s[len(s)-1] == '0' {
			want = append(want, s)
		}
	}
	got := strs.Committed()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("got %d records, want %d", len(got), len(want))
	}
	if c := none.Committed(); len(c) != 0 {
		t.Fatalf("a filter that keeps nothing let %d records through", len(c))
	}
}

// TestBatchCollectWithTimestamps: datagen emits through
// source.BatchCollector; with a timestamp assigner and bounded
// out-of-orderness watermarks the slow path assigns every record its
// timestamp.
func TestBatchCollectWithTimestamps(t *testing.T) {
	const n = 5000
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	env := stream.New(stream.Parallelism(1), stream.Logger(engine.DiscardLogger()), stream.WatermarkInterval(time.Millisecond))
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(n), datagen.Splits(2))
	ws := watermark.BoundedOutOfOrderness[int64](0).WithTimestampAssigner(func(v int64, _ int64) int64 { return 1000 + v })
	probe := &tsProbe{}
	stream.SinkTo(stream.FromSource(env, gen, ws, "gen"), probe, "probe")
	if _, err := env.Execute(ctx, "batch-ts"); err != nil {
		t.Fatal(err)
	}
	if len(probe.recs) != n {
		t.Fatalf("got %d records, want %d", len(probe.recs), n)
	}
	for _, r := range probe.recs {
		if !r.has || r.ts != 1000+r.v {
			t.Fatalf("record %d has timestamp %d (set %v), want %d", r.v, r.ts, r.has, 1000+r.v)
		}
	}
}

// tsProbe is a plain sink (one subtask) that records timestamps.
type tsProbe struct {
	recs []tsRec
}

type tsRec struct {
	v, ts int64
	has   bool
}

func (p *tsProbe) CreateWriter(context.Context, sink.InitContext) (sink.Writer[int64], error) {
	return p, nil
}
func (p *tsProbe) Write(ctx context.Context, v int64, c sink.Meta) error {
	p.recs = append(p.recs, tsRec{v, c.Timestamp, c.HasTimestamp})
	return nil
}
func (p *tsProbe) Flush(context.Context, bool) error { return nil }
func (p *tsProbe) Close() error                      { return nil }

// TestStartNewChain: an operator that starts a new chain runs in a task of
// its own, apart from its input's, and the operators after it chain with
// it; records reach the sink exactly once and, with one split, in the
// source's order, across checkpoints taken while batches are in the
// channel between the two tasks.
func TestStartNewChain(t *testing.T) {
	const n = 50_000
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	env := stream.New(stream.Parallelism(1), stream.Logger(engine.DiscardLogger()), stream.CheckpointEvery(time.Millisecond),
		stream.BatchSize(64), stream.ChannelCapacity(2))
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(n), datagen.Splits(1))
	src := stream.FromSource(env, gen, watermark.None[int64](), "gen")
	m := stream.Map(src, func(v int64) int64 { return v * 2 }, stream.Name("double"), stream.StartNewChain())
	f := stream.Filter(m, func(v int64) bool { return v >= 0 }, stream.Name("keep"))
	store := testsink.NewStore[int64]()
	stream.SinkTo(f, testsink.NewTwoPhase(store), "sink")
	j, err := env.Build("new-chain")
	if err != nil {
		t.Fatal(err)
	}
	plan := engine.Plan(j)
	want := []string{"gen [gen] p=1", "double [double keep sink] p=1"}
	if !slices.Equal(plan, want) {
		t.Fatalf("tasks %q, want %q", plan, want)
	}
	res, err := j.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := store.Committed()
	if len(got) != n {
		t.Fatalf("got %d records, want %d", len(got), n)
	}
	for i, v := range got {
		if v != int64(2*i) {
			t.Fatalf("record %d is %d, want %d (order or exactly-once broken)", i, v, 2*i)
		}
	}
	if res.Checkpoints.Completed < 2 {
		t.Logf("only %d checkpoints completed", res.Checkpoints.Completed)
	}
}

// positionStorage is a checkpoint storage that records, for every
// checkpoint stored, where the one datagen split of vertex "gen" stood:
// how many records the source had emitted before its barrier.
type positionStorage struct {
	checkpoint.Storage
	gen *datagen.Source[int64]

	mu  sync.Mutex
	pos map[int64]int64 // checkpoint id → the split's Next
	err error
}

func (p *positionStorage) Save(ctx context.Context, s *checkpoint.Snapshot) (checkpoint.Info, error) {
	p.mu.Lock()
	for _, ts := range s.Tasks {
		if ts.Vertex != "gen" {
			continue
		}
		for _, b := range ts.Parts["splits"] {
			sp, err := serde.Unmarshal(p.gen.SplitSerializer(), b)
			if err != nil && p.err == nil {
				p.err = err
			}
			p.pos[s.ID] = sp.Next
		}
	}
	p.mu.Unlock()
	return p.Storage.Save(ctx, s)
}

// TestStartNewChainBarrierBoundary: with the map in a task of its own
// (StartNewChain), fed through small batches and a short channel, each
// checkpoint's output is exactly the records the source emitted before
// its barrier — the transactions of checkpoints 1..n together hold
// records 0..P(n)-1, where P(n) is the source's position in checkpoint n.
// A barrier that overtook records in the channel (or records that
// overtook a barrier) would put them in the wrong checkpoint: lost or
// duplicated after a restore from it.
func TestStartNewChainBarrierBoundary(t *testing.T) {
	const n = 40_000
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(n), datagen.Splits(1), datagen.RatePerSecond(40_000))
	st := &positionStorage{Storage: checkpoint.NewMemory(), gen: gen, pos: map[int64]int64{}}
	env := stream.New(stream.Parallelism(1), stream.Logger(engine.DiscardLogger()), stream.CheckpointEvery(5*time.Millisecond),
		stream.CheckpointStorage(st), stream.BatchSize(16), stream.ChannelCapacity(2), stream.BufferTimeout(time.Hour))
	src := stream.FromSource(env, gen, watermark.None[int64](), "gen")
	m := stream.Map(src, func(v int64) int64 { return v }, stream.Name("identity"), stream.StartNewChain())
	store := testsink.NewStore[int64]()
	stream.SinkTo(m, testsink.NewTwoPhase(store), "sink")
	if _, err := env.Execute(ctx, "barrier-boundary"); err != nil {
		t.Fatal(err)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.err != nil {
		t.Fatal(st.err)
	}
	byID := map[int64][]int64{}
	for _, txn := range store.CommittedTxns() {
		byID[txn.CheckpointID] = append(byID[txn.CheckpointID], txn.Records...)
	}
	ids := slices.Sorted(maps.Keys(st.pos))
	var upTo []int64 // the records of the checkpoints up to id, in order
	last, mid := int64(0), 0
	for _, id := range ids {
		for k := last + 1; k <= id; k++ {
			upTo = append(upTo, byID[k]...)
		}
		last = id
		p := st.pos[id]
		if int64(len(upTo)) != p {
			t.Fatalf("checkpoint %d: the source had emitted %d records before its barrier, the sink committed %d up to it", id, p, len(upTo))
		}
		for i, v := range upTo {
			if v != int64(i) {
				t.Fatalf("checkpoint %d: record %d is %d (order broken)", id, i, v)
			}
		}
		if p > 0 && p < n {
			mid++
		}
	}
	if mid < 3 {
		t.Fatalf("only %d checkpoints were taken mid-stream, want at least 3 (of %d stored)", mid, len(ids))
	}
}
