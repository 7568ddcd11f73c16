package engine_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/internal/sinkerase"
	"github.com/sluice-io/sluice/internal/sinkrt"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// writerCounter counts the writers created per subtask.
type writerCounter[T any] struct {
	sinkerase.Sink[T]
	mu      sync.Mutex
	writers map[int]int
}

func (s *writerCounter[T]) CreateWriter(ctx context.Context, ic sink.InitContext) (sink.Writer[T], error) {
	w, _, err := s.NewWriter(ctx, ic, nil)
	return w, err
}

func (s *writerCounter[T]) NewWriter(ctx context.Context, ic sink.InitContext, restored [][]byte) (sink.Writer[T], sinkrt.Writer, error) {
	s.mu.Lock()
	s.writers[ic.SubtaskIndex()]++
	s.mu.Unlock()
	return s.Sink.NewWriter(ctx, ic, restored)
}

// TestRegionalFailover: a job of four independent regions (source → sink,
// forward only, parallelism 4). Reader 2 fails while reading a split that
// was assigned to it after the last completed checkpoint's enumerator
// snapshot. Only region 2 restarts: every other reader and writer is
// created once; the late split goes back to the enumerator through
// AddSplitsBack and is read again by the restarted reader; output equals
// input. Run chained (one task per region) and unchained (two tasks per
// region, joined by forward channels).
func TestRegionalFailover(t *testing.T) {
	for _, chained := range []bool{true, false} {
		t.Run(fmt.Sprintf("chained=%v", chained), func(t *testing.T) { regionalFailover(t, chained) })
	}
}

func regionalFailover(t *testing.T, chained bool) { regionalFailoverPlaced(t, chained, inProcess) }

func regionalFailoverPlaced(t *testing.T, chained bool, mode placeMode) {
	const parallelism = 4
	var splits []rangeSplit
	for i := range parallelism {
		splits = append(splits, rangeSplit{ID: fmt.Sprintf("a%d", i), End: 2000})
	}
	splits = append(splits, rangeSplit{ID: "late", End: 300})
	var mu sync.Mutex
	var back []string
	registered := map[int]bool{}
	src := &scriptSource{
		splits:  splits,
		perPoll: 10,
		readers: map[int]int{},
		// The a-splits are handed out before checkpoint 1's enumerator
		// snapshot; "late" right after checkpoint 2's, so no completed
		// checkpoint has it in reader 2's state when reader 2 fails.
		beforeTrigger: func(id int64, e *scriptEnum) {
			if id == 1 {
				for i := range parallelism {
					e.assign(fmt.Sprintf("a%d", i), i)
				}
			}
		},
		onSnapshot: func(id int64, e *scriptEnum) {
			if id == 2 {
				e.assign("late", 2)
				e.finish()
			}
		},
		// A reader registering again gets whatever came back, and the
		// enumerator says again that nothing more will come.
		onAddReader: func(subtask int, e *scriptEnum) {
			if !registered[subtask] {
				registered[subtask] = true // the first registration, at start
				return
			}
			for len(e.pending) > 0 {
				e.assign(e.pending[0].ID, subtask)
			}
			e.ctx.SignalNoMoreSplits(subtask)
		},
		onSplitsBack: func(sp []rangeSplit, subtask int) {
			mu.Lock()
			defer mu.Unlock()
			for _, s := range sp {
				back = append(back, fmt.Sprintf("%s@%d from %d", s.ID, s.Next, subtask))
			}
		},
		// The a-splits wait for checkpoint 3, so the job cannot end before
		// the failure.
		holdUntil: map[string]int64{"a0": 3, "a1": 3, "a2": 3, "a3": 3},
		failAt:    func(attempt int, r rec) bool { return attempt == 0 && r.Split == "late" && r.Pos == 100 },
	}
	store := testsink.NewStore[rec]()
	cs := &writerCounter[rec]{Sink: sinkerase.Erase(testsink.NewTwoPhase(store)), writers: map[int]int{}}
	opts := []stream.Option{stream.Parallelism(parallelism), stream.CheckpointEvery(100 * time.Millisecond),
		stream.Restart(restart.FixedDelay(3, 0)), stream.Logger(engine.DiscardLogger())}
	if !chained {
		opts = append(opts, stream.DisableChaining())
	}
	env := stream.New(opts...)
	stream.SinkTo[rec](stream.FromSource(env, src, watermark.None[rec](), "script"), cs, "sink")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	job, err := env.Build("regions")
	if err != nil {
		t.Fatal(err)
	}
	engine.SetBeforeTrigger(job, func(id int64) { src.beforeTrigger(id, src.enum) })
	if mode != inProcess {
		placeOnLoopback(t, job, mode)
	}
	res, err := job.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Restarts != 1 {
		t.Errorf("got %d restarts, want 1 (failures: %v)", res.Restarts, res.Failures)
	}
	src.mu.Lock()
	readers := src.readers
	src.mu.Unlock()
	cs.mu.Lock()
	writers := cs.writers
	cs.mu.Unlock()
	for i := range parallelism {
		want := 1
		if i == 2 {
			want = 2
		}
		if readers[i] != want || writers[i] != want {
			t.Errorf("subtask %d: %d readers and %d writers created, want %d each (only region 2 restarts)", i, readers[i], writers[i], want)
		}
	}
	mu.Lock()
	if !slices.Equal(back, []string{"late@0 from 2"}) {
		t.Errorf("splits added back: %v, want [late@0 from 2]", back)
	}
	mu.Unlock()
	expectExactlyOnce(t, splits, store.Committed())
	if staged := store.Staged(); len(staged) > 0 {
		t.Errorf("transactions left staged: %v", staged)
	}
}

// TestRegionalFailoverAfterFinalCheckpoint: a committer fails after a
// bounded job's final checkpoint completed; only its region restarts, from
// that final checkpoint, commits it again and the job ends with output equal
// to input (it used to wait forever for a commit report of the final
// checkpoint).
func TestRegionalFailoverAfterFinalCheckpoint(t *testing.T) {
	const count = 4000
	for _, kind := range []faultinject.Kind{faultinject.BeforeCommit, faultinject.DuringCommit} {
		t.Run(kind.String(), func(t *testing.T) {
			plan := faultinject.NewPlan(faultinject.Fault{Kind: kind, Subtask: 1, Checkpoint: 1})
			store := testsink.NewStore[int64]()
			// No periodic checkpoints: the final checkpoint is checkpoint 1.
			env := stream.New(stream.Parallelism(2), stream.Restart(restart.FixedDelay(2, 0)), stream.Logger(engine.DiscardLogger()))
			// Pushed splits: subtask 1 surely gets one (pulled, subtask 0
			// could read both before subtask 1 asks, and subtask 1 would
			// have nothing to commit).
			gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(count), datagen.Splits(2), datagen.PushAssignment())
			stream.SinkTo(stream.FromSource(env, gen, watermark.None[int64](), "gen"), faultinject.WrapSink(testsink.NewTwoPhase(store), plan), "sink")
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			res, err := env.Execute(ctx, "final")
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Fired()) != 1 || res.Restarts != 1 {
				t.Fatalf("fired %v, %d restarts; want the fault and one restart", plan.Fired(), res.Restarts)
			}
			got := store.Committed()
			slices.Sort(got)
			if len(got) != count || got[0] != 0 || got[count-1] != count-1 || len(slices.Compact(got)) != count {
				t.Fatalf("committed %d records, want 0..%d once each", len(got), count-1)
			}
		})
	}
}
