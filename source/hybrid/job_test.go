package hybrid_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/source/hybrid"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

const (
	second      = int64(1) << 40 // values of the second source start here
	parallelism = 2
	n0          = 20_000 // records of the first source
	splits0     = 3
	splits1     = 3
	rate        = 40_000 // records per second of each source: the first takes 0.5 s
)

// errInjected is the failure injected into a factory or an enumerator.
var errInjected = errors.New("injected failure")

// jobCase is one acceptance job: bounded datagen → datagen (bounded with n1
// records, or unbounded with n1 == 0), with failures injected into either
// source (plan0, plan1) or into the factory of the second source.
type jobCase struct {
	name         string
	n1           int64
	plan0, plan1 *faultinject.Plan
	failFactory  int // fail the factory this many times
	wantRestarts int
}

func (c jobCase) source(t *testing.T, factoryCalls *atomic.Int32) *hybrid.Source[int64] {
	first := datagen.New(func(i int64) int64 { return i }, datagen.Count(n0), datagen.Splits(splits0), datagen.RatePerSecond(rate))
	opts := []datagen.Option{datagen.Splits(splits1), datagen.RatePerSecond(rate), datagen.PushAssignment()}
	bounded := source.ContinuousUnbounded
	if c.n1 > 0 {
		opts = append(opts, datagen.Count(c.n1))
		bounded = source.Bounded
	}
	next := datagen.New(func(i int64) int64 { return second + i }, opts...)
	src, err := hybrid.New(hybrid.Of(faultinject.WrapSource(first, c.plan0))).
		AddSourceFactory(func(hybrid.SwitchContext) (hybrid.Child[int64], error) {
			if int(factoryCalls.Add(1)) <= c.failFactory {
				return hybrid.Child[int64]{}, errInjected
			}
			return hybrid.Of(faultinject.WrapSource(next, c.plan1)), nil
		}, bounded).
		Build()
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func newEnv(store *testsink.Store[int64], src *hybrid.Source[int64]) *stream.Environment {
	env := stream.New(stream.Parallelism(parallelism), stream.CheckpointEvery(50*time.Millisecond),
		stream.Restart(restart.FixedDelay(5, 0)), stream.Logger(stream.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, src, watermark.None[int64](), "hybrid"), testsink.NewTwoPhase(store), "sink")
	return env
}

func fault(kind faultinject.Kind, records, checkpointID int64) *faultinject.Plan {
	return faultinject.NewPlan(faultinject.Fault{Kind: kind, Subtask: faultinject.AnySubtask, Records: records, Checkpoint: checkpointID})
}

// checkResult checks the restarts and that every restart was injected.
func checkResult(t *testing.T, c jobCase, res *stream.Result) {
	t.Helper()
	if res.Restarts != c.wantRestarts {
		t.Errorf("%d restarts (%v), want %d", res.Restarts, res.Failures, c.wantRestarts)
	}
	for _, f := range res.Failures {
		if !errors.Is(f, faultinject.ErrInjected) && !errors.Is(f, errInjected) {
			t.Errorf("restart caused by %v, not by an injected fault", f)
		}
	}
}

// TestExactlyOnceAcrossTheSwitch runs bounded datagen → bounded datagen at
// parallelism 2 with checkpoints every 50 ms and one failure: in the first
// source, right at the switch (the second source's first record fails, its
// first snapshot fails, or its factory fails on the coordinator), or well
// after it. The job restarts from its latest checkpoint; the committed
// output must equal the input: every record once.
func TestExactlyOnceAcrossTheSwitch(t *testing.T) {
	const n1 = 10_000
	for _, c := range []jobCase{
		{name: "no-failure", n1: n1},
		{name: "before-switch", n1: n1, plan0: fault(faultinject.AfterRecords, 3000, 0), wantRestarts: 1},
		{name: "at-switch/first-record", n1: n1, plan1: fault(faultinject.AfterRecords, 0, 0), wantRestarts: 1},
		{name: "at-switch/first-snapshot", n1: n1, plan1: fault(faultinject.DuringSnapshot, 0, 1), wantRestarts: 1},
		{name: "at-switch/factory", n1: n1, failFactory: 1, wantRestarts: 1},
		{name: "after-switch", n1: n1, plan1: fault(faultinject.AfterRecords, 2000, 0), wantRestarts: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var calls atomic.Int32
			store := testsink.NewStore[int64]()
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			res, err := newEnv(store, c.source(t, &calls)).Execute(ctx, "hybrid-"+c.name)
			if err != nil {
				t.Fatal(err)
			}
			checkResult(t, c, res)
			got, err := store.Final()
			if err != nil {
				t.Fatal(err)
			}
			var want []int64
			for i := range int64(n0) {
				want = append(want, i)
			}
			for i := range int64(n1) {
				want = append(want, second+i)
			}
			hybrid.ExpectOnce(t, got, want)
			t.Logf("%d restarts, %d checkpoints, factory called %d times", res.Restarts, res.Checkpoints.Completed, calls.Load())
		})
	}
}

// TestExactlyOnceIntoUnbounded: bounded datagen → unbounded datagen with a
// failure right at the switch (or after it). Once the job has committed
// records of the unbounded source it is stopped (Handle.Stop: a final
// checkpoint, committed). The committed output must hold the first source
// exactly once and, of the second, exactly what its splits had emitted at
// the final checkpoint: per split every index below the split's position
// in that checkpoint, once, and nothing beyond it.
func TestExactlyOnceIntoUnbounded(t *testing.T) {
	for _, c := range []jobCase{
		{name: "at-switch/first-record", plan1: fault(faultinject.AfterRecords, 0, 0), wantRestarts: 1},
		{name: "at-switch/factory", failFactory: 1, wantRestarts: 1},
		{name: "after-switch", plan1: fault(faultinject.AfterRecords, 1500, 0), wantRestarts: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var calls atomic.Int32
			store := testsink.NewStore[int64]()
			src := c.source(t, &calls)
			h, err := newEnv(store, src).Start(t.Context(), "hybrid-unbounded-"+c.name)
			if err != nil {
				t.Fatal(err)
			}
			// Wait (bounded) until records of the second source are
			// committed after the failure fired.
			for i := 0; ; i++ {
				if i > 6000 {
					h.Cancel()
					h.Wait()
					t.Fatalf("no records of the second source committed within 30s")
				}
				if h.Status().Restarts >= c.wantRestarts && slices.ContainsFunc(store.Committed(), func(v int64) bool { return v >= second+5000 }) {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			res, err := h.Stop(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Stopped {
				t.Fatalf("job ended %s, not stopped", res.State)
			}
			checkResult(t, c, res)
			got, err := store.Final()
			if err != nil {
				t.Fatal(err)
			}
			want := expectedAtStop(t, src, h.Latest())
			for i := range int64(n0) {
				want = append(want, i)
			}
			hybrid.ExpectOnce(t, got, want)
			t.Logf("%d records of the second source at the stop; %d restarts, %d checkpoints", len(got)-n0, res.Restarts, res.Checkpoints.Completed)
		})
	}
}

// expectedAtStop returns what the unbounded second source had emitted at
// the final checkpoint: every split's indexes below its position there
// (split i of the unbounded datagen emits i, i+3, i+6, …), found in the
// readers' states and the enumerator's unassigned splits.
func expectedAtStop(t *testing.T, src *hybrid.Source[int64], snap *checkpoint.Snapshot) []int64 {
	t.Helper()
	dg := datagen.New(func(i int64) int64 { return i })
	next := map[int]int64{}
	add := func(sp hybrid.Split) {
		if sp.Source != 1 {
			t.Fatalf("final checkpoint holds split %s of the first source", sp.SplitID())
		}
		d, err := dg.SplitSerializer().Deserialize(sp.Version, sp.Data)
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := next[d.Num]; dup {
			t.Fatalf("split %d twice in the final checkpoint", d.Num)
		}
		next[d.Num] = d.Next
	}
	for _, ts := range snap.Tasks {
		if ts.Vertex != "hybrid" {
			continue
		}
		ss, err := serde.UnmarshalAll(src.SplitSerializer(), ts.Parts["splits"])
		if err != nil {
			t.Fatal(err)
		}
		for _, sp := range ss {
			add(sp)
		}
	}
	st, err := serde.Unmarshal(src.EnumeratorStateSerializer(), snap.Enumerators["hybrid"])
	if err != nil {
		t.Fatal(err)
	}
	if st.Source != 1 {
		t.Fatalf("final checkpoint at source %d", st.Source)
	}
	es, err := dg.EnumeratorStateSerializer().Deserialize(st.Version, st.State)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range es.Unassigned {
		b, _ := dg.SplitSerializer().Serialize(d)
		add(hybrid.Split{Source: 1, ID: d.SplitID(), Version: dg.SplitSerializer().Version(), Data: b})
	}
	if len(next) != splits1 {
		t.Fatalf("final checkpoint holds splits %v of the second source, want %d", next, splits1)
	}
	var want []int64
	for num, n := range next {
		for k := int64(num); k < n; k += splits1 {
			want = append(want, second+k)
		}
	}
	return want
}

// TestHandoverThroughRuntime: the second source starts where the first
// ended, from a position the first source's enumerator hands to the
// factory. After the switch a reader fails (a regional or global restart,
// whichever the runtime does), then the second source's enumerator fails
// on a checkpoint notice, which restarts the whole job from a checkpoint
// taken after the switch: the factory is called again without a previous
// enumerator and the restored splits carry the position. Output: 0 …
// 29,999 exactly once.
func TestHandoverThroughRuntime(t *testing.T) {
	const n1 = 10_000
	var handed, restored, notices atomic.Int32
	var enumFailed atomic.Bool
	plan := fault(faultinject.AfterRecords, 2000, 0)
	wrap := func(s *hybrid.OffsetSource) hybrid.Child[int64] {
		return hybrid.Of[int64](&failingEnum{Source: faultinject.WrapSource[int64](s, plan), fail: func() bool {
			return notices.Add(1) == 2 && enumFailed.CompareAndSwap(false, true)
		}})
	}
	factory := func(sc hybrid.SwitchContext) (hybrid.Child[int64], error) {
		if prev, ok := sc.PreviousEnumerator().(*hybrid.EndEnumerator); ok {
			handed.Add(1)
			return wrap(hybrid.NewOffsetSource(prev.End(), n1, 3, true, datagen.RatePerSecond(rate))), nil
		}
		restored.Add(1)
		return wrap(hybrid.NewOffsetSource(0, n1, 3, false, datagen.RatePerSecond(rate))), nil
	}
	first := hybrid.NewEndSource(n0, splits0, datagen.RatePerSecond(rate))
	src, err := hybrid.New(hybrid.Of[int64](first)).AddSourceFactory(factory, source.Bounded).Build()
	if err != nil {
		t.Fatal(err)
	}
	store := testsink.NewStore[int64]()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := newEnv(store, src).Execute(ctx, "handover")
	if err != nil {
		t.Fatal(err)
	}
	got, err := store.Final()
	if err != nil {
		t.Fatal(err)
	}
	want := make([]int64, n0+n1)
	for i := range want {
		want[i] = int64(i)
	}
	hybrid.ExpectOnce(t, got, want)
	if handed.Load() < 1 || restored.Load() < 1 || res.Restarts != 2 || !enumFailed.Load() {
		t.Fatalf("factory: %d hand-overs, %d restores; %d restarts (%v)", handed.Load(), restored.Load(), res.Restarts, res.Failures)
	}
}

// failingEnum is a source whose enumerator fails a checkpoint notice when
// fail says so.
type failingEnum struct {
	source.Source[int64, datagen.Split, datagen.EnumState]
	fail func() bool
}

func (f *failingEnum) CreateEnumerator(ctx source.EnumeratorContext[datagen.Split]) (source.Enumerator[datagen.Split, datagen.EnumState], error) {
	e, err := f.Source.CreateEnumerator(ctx)
	return &failingNotice{e, f.fail}, err
}

func (f *failingEnum) RestoreEnumerator(ctx source.EnumeratorContext[datagen.Split], st datagen.EnumState) (source.Enumerator[datagen.Split, datagen.EnumState], error) {
	e, err := f.Source.RestoreEnumerator(ctx, st)
	return &failingNotice{e, f.fail}, err
}

type failingNotice struct {
	source.Enumerator[datagen.Split, datagen.EnumState]
	fail func() bool
}

func (e *failingNotice) NotifyCheckpointComplete(id int64) error {
	if e.fail() {
		return fmt.Errorf("checkpoint %d: %w", id, errInjected)
	}
	return nil
}
