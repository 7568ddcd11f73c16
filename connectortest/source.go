package connectortest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// SourceSettings describes the source a case needs.
type SourceSettings struct {
	// Bounded asks for a source that ends after the data written before
	// the job started; otherwise the source runs until cancelled and reads
	// data written while it runs.
	Bounded bool
	// Splits is the number of splits, at least 1. The suite writes the
	// same number of records into each.
	Splits int
	// TempDir is an empty directory the context may use; it is removed
	// after the case.
	TempDir string
}

// SourceContext is the external system behind a source under test, for one
// case. The suite calls Write for every split, then Source once per job it
// runs (a case may run several jobs that resume each other); for an
// unbounded source it calls Write again while a job runs. Record is called
// from the job's goroutines concurrently and must be safe for that. Close is
// called once, last.
//
// A method that returns an error wrapping errors.ErrUnsupported skips the
// case with that error as the reason; any other error fails the case.
type SourceContext[T any, S source.Split, E any] interface {
	// Write appends records to split i of the external system, in order.
	Write(split int, records []Record) error
	// Source returns the source under test, over the data written so far
	// (and, if unbounded, what is written later).
	Source() (source.Source[T, S, E], error)
	// Record converts a value the source read back into the test record.
	Record(v T) (Record, error)
	// Close releases the external system.
	Close() error
}

// TestSource runs the conformance cases for a source, each as a subtest of
// t. newContext makes a fresh external context for every case.
func TestSource[T any, S source.Split, E any](t *testing.T, newContext func(SourceSettings) (SourceContext[T, S, E], error), opts ...Option) {
	t.Helper()
	c := newConfig([]Guarantee{ExactlyOnce}, opts)
	runSource(stdT{t}, newContext, &c)
}

type sourceSuite[T any, S source.Split, E any] struct {
	newContext func(SourceSettings) (SourceContext[T, S, E], error)
	c          *config
}

func runSource[T any, S source.Split, E any](t tb, newContext func(SourceSettings) (SourceContext[T, S, E], error), c *config) {
	s := &sourceSuite[T, S, E]{newContext: newContext, c: c}
	runCases(t, c, []testCase{
		{name: "single-split", run: func(t tb) { s.readAll(t, 1, 1) }},
		{name: "multiple-splits", run: func(t tb) { s.readAll(t, 6, 4) }},
		{name: "idle-reader", run: func(t tb) { s.readAll(t, 2, 4) }},
		{name: "resume/same-parallelism", run: func(t tb) { s.resume(t, 4, 2, 2, false) }},
		{name: "resume/scale-up", long: true, run: func(t tb) { s.resume(t, 6, 2, 4, false) }},
		{name: "resume/scale-down", long: true, run: func(t tb) { s.resume(t, 6, 4, 2, false) }},
		{name: "resume/savepoint", run: func(t tb) { s.resume(t, 4, 2, 2, true) }},
		{name: "resume/savepoint-rescale", long: true, run: func(t tb) { s.resume(t, 6, 4, 3, true) }},
		{name: "failure-recovery", run: s.failureRecovery},
		{name: "metrics", run: s.metrics},
		{name: "unbounded/data-after-start", run: s.unbounded},
		{name: "goroutine-leaks", long: true, run: s.leaks},
	})
}

// open makes the case's context.
func (s *sourceSuite[T, S, E]) open(t tb, set SourceSettings) (SourceContext[T, S, E], *closer) {
	t.Helper()
	set.TempDir = t.TempDir()
	sc, err := s.newContext(set)
	skipIfUnsupported(t, err, fmt.Sprintf("create the source context for %+v", set))
	return sc, newCloser(t, sc.Close)
}

// write writes records [from, from+n) of every split and returns them.
func (s *sourceSuite[T, S, E]) write(t tb, sc SourceContext[T, S, E], splits int, from, n int64) [][]Record {
	t.Helper()
	want := make([][]Record, splits)
	for i := range want {
		want[i] = generate(s.c.seed, i, from, n)
		skipIfUnsupported(t, sc.Write(i, want[i]), fmt.Sprintf("write %d records to split %d", n, i))
	}
	return want
}

// pipeline reads sc's source into store, through an exactly-once sink.
func (s *sourceSuite[T, S, E]) pipeline(sc SourceContext[T, S, E], store *testsink.Store[Record]) pipeline {
	return func(env *stream.Environment, spec jobSpec) error {
		src, err := sc.Source()
		if err != nil {
			return fmt.Errorf("create the source: %w", err)
		}
		ds := stream.FromSource(env, wrapGate(faultinject.WrapSource(src, spec.plan), spec.gate), watermark.None[T](), sourceName)
		recs := stream.Map(ds, func(v T) Record {
			r, err := sc.Record(v)
			if err != nil {
				return Record{Split: -1, Payload: fmt.Sprintf("cannot convert %v: %v", v, err)}
			}
			return r
		}, stream.Name("to-record"))
		stream.SinkTo(recs, testsink.NewTwoPhase(store), sinkName)
		return nil
	}
}

// verify compares the committed records with want.
func (s *sourceSuite[T, S, E]) verify(t tb, store *testsink.Store[Record], want [][]Record, g Guarantee) {
	t.Helper()
	got, err := store.Final()
	if err != nil {
		t.Errorf("the suite's sink: %v", err)
	}
	if err := compare(got, want, expect(g, s.c.unordered)); err != nil {
		t.Errorf("%v", err)
	}
}

func (s *sourceSuite[T, S, E]) readAll(t tb, splits, parallelism int) {
	sc, _ := s.open(t, SourceSettings{Bounded: true, Splits: splits})
	want := s.write(t, sc, splits, 0, s.c.records)
	store := testsink.NewStore[Record]()
	run(t, s.c, s.pipeline(sc, store), jobSpec{parallelism: parallelism})
	s.verify(t, store, want, ExactlyOnce)
}

// resume reads about half the data at parallelism from, stops the job,
// and reads the rest at parallelism to, restored from the first job's
// latest checkpoint or from its stop-with-savepoint.
func (s *sourceSuite[T, S, E]) resume(t tb, splits, from, to int, savepoint bool) {
	sc, _ := s.open(t, SourceSettings{Bounded: true, Splits: splits})
	want := s.write(t, sc, splits, 0, max(s.c.records, 2500))
	store := testsink.NewStore[Record]()
	p := s.pipeline(sc, store)
	g := newGate(0)
	snap := stopHalfway(t, s.c, p, jobSpec{parallelism: from, gate: g, savepoint: savepoint}, want)
	t.Logf("%d records committed before the stop", len(store.Committed()))
	run(t, s.c, p, jobSpec{parallelism: to, restore: snap, gate: g})
	s.verify(t, store, want, s.c.strongest())
}

func (s *sourceSuite[T, S, E]) failureRecovery(t tb) {
	const splits, parallelism = 4, 2
	sc, _ := s.open(t, SourceSettings{Bounded: true, Splits: splits})
	want := s.write(t, sc, splits, 0, s.c.records)
	n := s.c.records
	plan := faultinject.NewPlan(
		faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: 0, Records: n / 2},
		faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: 1, Records: n / 3},
		faultinject.Fault{Kind: faultinject.DuringSnapshot, Subtask: faultinject.AnySubtask, Checkpoint: 6},
		faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: faultinject.AnySubtask, Records: n},
	)
	store := testsink.NewStore[Record]()
	// Each reader reads its share in about a second and over at least 12
	// checkpoints, so that checkpoints complete between the faults.
	g := paced(float64(count(want))/parallelism, 12)
	run(t, s.c, s.pipeline(sc, store), jobSpec{parallelism: parallelism, plan: plan, restarts: 10, gate: g})
	requireFired(t, plan)
	s.verify(t, store, want, s.c.strongest())
}

func (s *sourceSuite[T, S, E]) metrics(t tb) {
	sc, _ := s.open(t, SourceSettings{Bounded: true, Splits: 3})
	want := s.write(t, sc, 3, 0, s.c.records)
	store := testsink.NewStore[Record]()
	reg := metrics.NewRegistry()
	run(t, s.c, s.pipeline(sc, store), jobSpec{parallelism: 2, reg: reg})
	s.verify(t, store, want, ExactlyOnce)
	if got, want := reg.Sum(metrics.NumRecordsIn, "operator", sourceName), int64(count(want)); got != want {
		t.Errorf("%s of the source = %d, want %d (the records read)", metrics.NumRecordsIn, got, want)
	}
}

// unbounded writes half the data, starts the job, waits until it read
// that, writes the other half and waits until it read everything.
func (s *sourceSuite[T, S, E]) unbounded(t tb) {
	const splits = 2
	sc, _ := s.open(t, SourceSettings{Bounded: false, Splits: splits})
	half := s.c.records / 2
	first := s.write(t, sc, splits, 0, half)
	store := testsink.NewStore[Record]()
	j := build(t, s.pipeline(sc, store), jobSpec{parallelism: splits})
	ctx, cancel := context.WithTimeout(t.Context(), s.c.timeout)
	defer cancel()
	h := j.Start(ctx)
	defer func() {
		h.Cancel()
		_, _ = h.Wait()
	}()
	wait := func(want [][]Record, what string) {
		t.Helper()
		n := count(want)
		if !waitFor(ctx, 30*time.Second, func() bool { return len(store.Committed()) >= n || isDone(h.Done()) }) {
			t.Fatalf("%s: %d of %d records read after 30s", what, len(store.Committed()), n)
		}
		if isDone(h.Done()) {
			_, err := h.Wait()
			t.Fatalf("%s: the unbounded job ended: %v", what, err)
		}
	}
	wait(first, "data written before the start")
	second := s.write(t, sc, splits, half, s.c.records-half)
	all := make([][]Record, splits)
	for i := range all {
		all[i] = append(first[i], second[i]...)
	}
	wait(all, "data written after the start")
	// Give a stray duplicate time to show up before comparing.
	time.Sleep(3 * checkpointInterval)
	h.Cancel()
	if _, err := h.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("the unbounded job failed: %v", err)
	}
	if err := compare(store.Committed(), all, expect(ExactlyOnce, s.c.unordered)); err != nil {
		t.Errorf("%v", err)
	}
}

func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

func (s *sourceSuite[T, S, E]) leaks(t tb) {
	check := leakCheck(t)
	sc, cl := s.open(t, SourceSettings{Bounded: true, Splits: 4})
	want := s.write(t, sc, 4, 0, s.c.records)
	store := testsink.NewStore[Record]()
	run(t, s.c, s.pipeline(sc, store), jobSpec{parallelism: 4})
	s.verify(t, store, want, ExactlyOnce)
	cl.close(t)
	check()
}
