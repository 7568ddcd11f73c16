package connectortest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// SinkSettings describes the sink a case needs.
type SinkSettings struct {
	// Guarantee is the delivery guarantee the sink must give.
	Guarantee Guarantee
	// TempDir is an empty directory the context may use; it is removed
	// after the case.
	TempDir string
}

// SinkContext is the external system behind a sink under test, for one
// case. The suite calls Sink once per job it runs (a case may run several
// jobs that resume each other, over the same external system). Value,
// Committed and Pending are called from the job's goroutines concurrently
// (Committed also while a committer commits) and must be safe for that.
// Close is called once, last.
//
// A method that returns an error wrapping errors.ErrUnsupported skips the
// case with that error as the reason; any other error fails the case.
type SinkContext[T any] interface {
	// Sink returns the sink under test, writing into the external system.
	Sink() (sink.Sink[T], error)
	// Value converts a test record into the sink's record type.
	Value(r Record) T
	// Committed reads back what the external system holds in its
	// committed view — what a reader with read-committed isolation sees —
	// in the system's order if it has one.
	Committed() ([]Record, error)
	// Pending lists what attempts left behind that a reader cannot see:
	// staged transactions, in-progress files, prepared transactions. After
	// a finished job it must be empty.
	Pending() ([]string, error)
	// Close releases the external system.
	Close() error
}

// TestSink runs the conformance cases for a sink, each as a subtest of t.
// newContext makes a fresh external context for every case.
func TestSink[T any](t *testing.T, newContext func(SinkSettings) (SinkContext[T], error), opts ...Option) {
	t.Helper()
	c := newConfig([]Guarantee{ExactlyOnce, AtLeastOnce}, opts)
	runSink(stdT{t}, newContext, &c)
}

type sinkSuite[T any] struct {
	newContext func(SinkSettings) (SinkContext[T], error)
	c          *config
}

func runSink[T any](t tb, newContext func(SinkSettings) (SinkContext[T], error), c *config) {
	s := &sinkSuite[T]{newContext: newContext, c: c}
	var cases []testCase
	for _, g := range c.guarantees {
		cases = append(cases, testCase{name: "write/" + g.String(), run: func(t tb) { s.write(t, g) }})
	}
	cases = append(cases,
		testCase{name: "resume/same-parallelism", run: func(t tb) { s.resume(t, 2, 2, false) }},
		testCase{name: "resume/scale-up", long: true, run: func(t tb) { s.resume(t, 2, 4, false) }},
		testCase{name: "resume/scale-down", long: true, run: func(t tb) { s.resume(t, 4, 2, false) }},
		testCase{name: "resume/savepoint", run: func(t tb) { s.resume(t, 2, 2, true) }},
		testCase{name: "resume/savepoint-rescale", long: true, run: func(t tb) { s.resume(t, 2, 3, true) }},
	)
	failures := []struct {
		name  string
		long  bool
		fault func(n int64) []faultinject.Fault
		// crash: writers of failed attempts are abandoned without Close;
		// full: full failover instead of regional.
		crash, full bool
	}{
		{"before-prepare", false, func(n int64) []faultinject.Fault {
			return []faultinject.Fault{
				{Kind: faultinject.WriterAfterRecords, Subtask: 0, Records: n / 2},
				{Kind: faultinject.WriterAfterRecords, Subtask: 1, Records: n / 3},
			}
		}, false, false},
		{"during-prepare", true, func(int64) []faultinject.Fault {
			return []faultinject.Fault{
				{Kind: faultinject.DuringSnapshot, Subtask: 0, Checkpoint: 3},
				{Kind: faultinject.DuringSnapshot, Subtask: 1, Checkpoint: 8},
			}
		}, false, false},
		{"between-prepare-and-commit", false, func(int64) []faultinject.Fault {
			return []faultinject.Fault{
				{Kind: faultinject.BeforeCommit, Subtask: 0, Checkpoint: 3},
				{Kind: faultinject.BeforeCommit, Subtask: 1, Checkpoint: 8},
			}
		}, false, false},
		{"during-commit", false, func(int64) []faultinject.Fault {
			return []faultinject.Fault{
				{Kind: faultinject.DuringCommit, Subtask: 0, Checkpoint: 3},
				{Kind: faultinject.DuringCommit, Subtask: 1, Checkpoint: 8},
			}
		}, false, false},
		{"after-prepare", false, afterPrepare, true, false},
		{"after-prepare/full-failover", true, afterPrepare, true, true},
	}
	for _, g := range c.guarantees {
		for _, f := range failures {
			cases = append(cases, testCase{name: "failure/" + g.String() + "/" + f.name, long: f.long || g != c.strongest(),
				run: func(t tb) { s.failure(t, g, f.fault, f.crash, f.full) }})
		}
	}
	cases = append(cases,
		testCase{name: "recommit-restored", run: s.recommit},
		testCase{name: "nothing-visible-before-commit", run: s.visibility},
		testCase{name: "metrics", run: s.metrics},
		testCase{name: "cleanup-aborted", run: func(t tb) { s.cleanup(t, false) }},
		testCase{name: "cleanup-aborted/full-failover", run: func(t tb) { s.cleanup(t, true) }},
		testCase{name: "cleanup-aborted/scale-down", run: s.cleanupScaleDown},
		testCase{name: "restore/commit-in-flight", run: func(t tb) { s.commitInFlight(t, false) }},
		testCase{name: "restore/commit-in-flight-applied", run: func(t tb) { s.commitInFlight(t, true) }},
		testCase{name: "goroutine-leaks", long: true, run: s.leaks},
	)
	runCases(t, c, cases)
}

// sinkSplits is the number of splits of the suite's source in sink cases.
const sinkSplits = 4

// open makes the case's context.
func (s *sinkSuite[T]) open(t tb, g Guarantee) (SinkContext[T], *closer) {
	t.Helper()
	set := SinkSettings{Guarantee: g, TempDir: t.TempDir()}
	sc, err := s.newContext(set)
	skipIfUnsupported(t, err, fmt.Sprintf("create the sink context for %v", g))
	return sc, newCloser(t, sc.Close)
}

// data returns the records the suite's source emits, per split.
func (s *sinkSuite[T]) data(n int64) [][]Record {
	want := make([][]Record, sinkSplits)
	for i := range want {
		want[i] = generate(s.c.seed, i, 0, n)
	}
	return want
}

// pipeline writes want through the sink under test. The source is a data
// generator (replayable, exactly-once); with a probe, every record passes
// it right before the writer.
func (s *sinkSuite[T]) pipeline(sc SinkContext[T], want [][]Record, pr *probe, spy *commitSpy, wraps ...func(sink.Sink[T]) sink.Sink[T]) pipeline {
	per, n := int64(len(want[0])), int64(len(want))
	return func(env *stream.Environment, spec jobSpec) error {
		snk, err := sc.Sink()
		if err != nil {
			return fmt.Errorf("create the sink: %w", err)
		}
		gen := datagen.New(func(k int64) Record { return want[k/per][k%per] }, datagen.Count(per*n), datagen.Splits(int(n)))
		ds := stream.FromSource(env, wrapGate(gen, spec.gate), watermark.None[Record](), sourceName)
		vals := stream.Map(ds, func(r Record) T {
			if pr != nil {
				pr.add(r)
			}
			return sc.Value(r)
		}, stream.Name("from-record"))
		if pr != nil {
			snk = wrapProbe(snk, pr)
		}
		if spy != nil {
			snk = wrapSpy(snk, spy)
		}
		for _, w := range wraps {
			snk = w(snk)
		}
		stream.SinkTo(vals, faultinject.WrapSink(snk, spec.plan), sinkName)
		return nil
	}
}

// verify compares the committed view with want and, if the context can
// see them, checks that no attempt left anything pending.
func (s *sinkSuite[T]) verify(t tb, sc SinkContext[T], want [][]Record, g Guarantee) {
	t.Helper()
	got, err := sc.Committed()
	if err != nil {
		t.Fatalf("read the committed view: %v", err)
	}
	if err := compare(got, want, expect(g, s.c.unordered)); err != nil {
		t.Errorf("%v", err)
	}
}

// checkPending fails t if something is left pending. If the context cannot
// tell, it skips t when required, and does nothing otherwise.
func (s *sinkSuite[T]) checkPending(t tb, sc SinkContext[T], required bool) {
	t.Helper()
	left, err := sc.Pending()
	if errors.Is(err, errors.ErrUnsupported) && !required {
		return
	}
	skipIfUnsupported(t, err, "list pending attempts")
	if len(left) > 0 {
		t.Errorf("%d prepared attempt(s) left behind after the job finished, never committed or aborted: %s", len(left), strings.Join(left, ", "))
	}
}

func (s *sinkSuite[T]) write(t tb, g Guarantee) {
	sc, _ := s.open(t, g)
	want := s.data(s.c.records)
	run(t, s.c, s.pipeline(sc, want, nil, nil), jobSpec{parallelism: 2})
	s.verify(t, sc, want, g)
	s.checkPending(t, sc, false)
}

// resume writes about half the data at parallelism from, stops the job and
// writes the rest at parallelism to, restored from the first job's latest
// checkpoint or from its stop-with-savepoint.
func (s *sinkSuite[T]) resume(t tb, from, to int, savepoint bool) {
	g := s.c.strongest()
	sc, _ := s.open(t, g)
	want := s.data(max(s.c.records, 2500))
	p := s.pipeline(sc, want, nil, nil)
	gt := newGate(0)
	snap := stopHalfway(t, s.c, p, jobSpec{parallelism: from, gate: gt, savepoint: savepoint}, want)
	if got, err := sc.Committed(); err == nil {
		t.Logf("%d records committed before the stop", len(got))
	}
	run(t, s.c, p, jobSpec{parallelism: to, restore: snap, gate: gt})
	s.verify(t, sc, want, g)
	s.checkPending(t, sc, false) // the second job aborts what the first one left
}

// afterPrepare fails each writer once right after a successful
// PrepareCommit: what it prepared is left behind, never to be committed.
func afterPrepare(int64) []faultinject.Fault {
	return []faultinject.Fault{
		{Kind: faultinject.AfterPrepareCommit, Subtask: 0, Checkpoint: 3},
		{Kind: faultinject.AfterPrepareCommit, Subtask: 1, Checkpoint: 8},
	}
}

func (s *sinkSuite[T]) failure(t tb, g Guarantee, faults func(n int64) []faultinject.Fault, crash, full bool) {
	const parallelism = 2
	sc, _ := s.open(t, g)
	want := s.data(s.c.records)
	plan := faultinject.NewPlan(faults(s.c.records)...)
	if crash {
		plan = crashPlan(t, faults(s.c.records)...)
	}
	// Each reader emits its share in about a second, so that checkpoints
	// complete between the faults.
	gt := paced(float64(count(want))/parallelism, 15)
	spy := &commitSpy{}
	run(t, s.c, s.pipeline(sc, want, nil, spy), jobSpec{parallelism: parallelism, plan: plan, restarts: 10, gate: gt, fullFailover: full})
	if len(plan.Fired()) == 0 && !spy.committed() && needsCommitter(plan) {
		t.Skipf("the %v sink has no committer: there is no commit to fail", g)
	}
	requireFired(t, plan)
	s.verify(t, sc, want, g)
	s.checkPending(t, sc, false)
}

// needsCommitter reports whether every fault of p strikes a committer or
// a prepare that returned committables.
func needsCommitter(p *faultinject.Plan) bool {
	for _, f := range p.Faults() {
		if f.Kind != faultinject.BeforeCommit && f.Kind != faultinject.DuringCommit && f.Kind != faultinject.AfterPrepareCommit {
			return false
		}
	}
	return true
}

// recommit runs a job to its end, then a second job restored from the
// first one's last checkpoint: its committers get the restored
// committables, already committed, and must commit them again as a no-op.
func (s *sinkSuite[T]) recommit(t tb) {
	g := s.c.strongest()
	sc, _ := s.open(t, g)
	want := s.data(s.c.records)
	j := build(t, s.pipeline(sc, want, nil, nil), jobSpec{parallelism: 2})
	ctx, cancel := context.WithTimeout(t.Context(), s.c.timeout)
	defer cancel()
	if _, err := j.Run(ctx); err != nil {
		t.Fatalf("the first job failed: %v", err)
	}
	snap := j.Latest()
	if snap == nil {
		t.Fatalf("the first job finished without a completed checkpoint")
		return // unreachable: Fatalf ends the case
	}
	spy := &commitSpy{}
	run(t, s.c, s.pipeline(sc, want, nil, spy), jobSpec{parallelism: 2, restore: snap})
	if !spy.committed() {
		t.Skipf("the %v sink has no committer: nothing to commit again", g)
	}
	t.Logf("restored from checkpoint %d; the second job's committers got %v", snap.ID, spy)
	s.verify(t, sc, want, g)
}

// visibility runs at parallelism 1 and reads the committed view after each
// PrepareCommit and before each commit: nothing of a checkpoint may be
// visible before the checkpoint completed.
func (s *sinkSuite[T]) visibility(t tb) {
	if s.c.strongest() != ExactlyOnce {
		t.Skipf("only exactly-once sinks hide prepared data")
	}
	sc, _ := s.open(t, ExactlyOnce)
	want := s.data(s.c.records / 2)
	pr := newProbe(sc.Committed)
	gt := newGate(float64(count(want))) // about a second: many checkpoints
	run(t, s.c, s.pipeline(sc, want, pr, nil), jobSpec{parallelism: 1, gate: gt})
	checks, errs := pr.result()
	if checks == 0 {
		t.Errorf("the committer never committed a checkpoint: an exactly-once sink must make its data visible in its committer, after the checkpoint completed")
	}
	if len(errs) > 0 {
		t.Errorf("%d visibility violation(s); first: %s", len(errs), errs[0])
	}
	s.verify(t, sc, want, ExactlyOnce)
}

func (s *sinkSuite[T]) metrics(t tb) {
	g := s.c.strongest()
	sc, _ := s.open(t, g)
	want := s.data(s.c.records)
	reg := metrics.NewRegistry()
	run(t, s.c, s.pipeline(sc, want, nil, nil), jobSpec{parallelism: 2, reg: reg})
	if got, want := reg.Sum(metrics.NumRecordsSend, "operator", sinkName), int64(count(want)); got != want {
		t.Errorf("%s of the sink = %d, want %d (the records written)", metrics.NumRecordsSend, got, want)
	}
	s.verify(t, sc, want, g)
}

// cleanup injects failures at every stage — among them writers that fail
// right after a successful PrepareCommit, leaving a prepared transaction
// whose committables no checkpoint holds — in crash mode (failed writers
// are not closed), and checks that the attempts they killed left nothing
// pending: the sink must abort what it prepared but never committed when
// it recovers, not in Writer.Close. With full, every failure restarts the
// whole job; otherwise only the failed subtask's region restarts.
func (s *sinkSuite[T]) cleanup(t tb, full bool) {
	const parallelism = 2
	g := s.c.strongest()
	sc, _ := s.open(t, g)
	// Enough data (also with -short) for the writers to prepare
	// something at the checkpoints the faults wait for.
	n := max(s.c.records, 2000)
	want := s.data(n)
	plan := crashPlan(t,
		faultinject.Fault{Kind: faultinject.WriterAfterRecords, Subtask: 0, Records: n / 2},
		faultinject.Fault{Kind: faultinject.DuringSnapshot, Subtask: 1, Checkpoint: 4},
		faultinject.Fault{Kind: faultinject.AfterPrepareCommit, Subtask: 0, Checkpoint: 6},
		faultinject.Fault{Kind: faultinject.BeforeCommit, Subtask: 0, Checkpoint: 8},
		faultinject.Fault{Kind: faultinject.AfterPrepareCommit, Subtask: 1, Checkpoint: 10},
		faultinject.Fault{Kind: faultinject.DuringCommit, Subtask: 1, Checkpoint: 12},
	)
	gt := paced(float64(count(want))/parallelism, 20)
	spy := &commitSpy{}
	run(t, s.c, s.pipeline(sc, want, nil, spy), jobSpec{parallelism: parallelism, plan: plan, restarts: 10, gate: gt, fullFailover: full})
	if !firedKind(plan, faultinject.AfterPrepareCommit) && !spy.committed() {
		t.Skipf("the %v sink has no committer: it prepares nothing that a failure could leave behind", g)
	}
	requireKindFired(t, plan, faultinject.AfterPrepareCommit)
	s.verify(t, sc, want, g)
	s.checkPending(t, sc, true)
}

// cleanupScaleDown leaves prepared transactions of subtasks that no longer
// exist: a job at parallelism 4 fails (no restarts) right after subtask 3
// prepared checkpoint 3 or later, its writers abandoned; a job at
// parallelism 2 restored from its latest checkpoint must abort what
// subtasks 2 and 3 left behind, and write everything exactly once.
func (s *sinkSuite[T]) cleanupScaleDown(t tb) {
	g := s.c.strongest()
	sc, _ := s.open(t, g)
	want := s.data(max(s.c.records, 5000))
	spy := &commitSpy{}
	p := s.pipeline(sc, want, nil, spy)
	plan := crashPlan(t, faultinject.Fault{Kind: faultinject.AfterPrepareCommit, Subtask: 3, Checkpoint: 3})
	gt := paced(float64(count(want))/4, 15)
	j := build(t, p, jobSpec{parallelism: 4, plan: plan, gate: gt})
	ctx, cancel := context.WithTimeout(t.Context(), s.c.timeout)
	defer cancel()
	_, err := j.Run(ctx)
	if err == nil && !firedKind(plan, faultinject.AfterPrepareCommit) && !spy.committed() {
		t.Skipf("the %v sink has no committer: it prepares nothing that subtasks gone after a scale-down could leave behind", g)
	}
	if !errors.Is(err, faultinject.ErrInjected) {
		t.Fatalf("the first job (parallelism 4, no restarts) ended with %v, want the injected fault after subtask 3's PrepareCommit (plan %v)", err, plan)
	}
	snap := j.Latest()
	if snap == nil {
		t.Fatalf("the first job failed before it completed a checkpoint")
		return // unreachable: Fatalf ends the case
	}
	left, perr := sc.Pending()
	if perr == nil {
		t.Logf("the first job failed (%v); restoring at parallelism 2 from checkpoint %d; left pending: %v", err, snap.ID, left)
	}
	// The second job stands for a new process: the first one's abandoned
	// writers are gone by then, with what they held (connections, leases
	// of the prefix). Their Close runs only now, after what they left was
	// listed above; a sink that aborts leftovers only in Close fails
	// cleanup-aborted, where abandoned writers stay unclosed until the end.
	if err := plan.CloseAbandoned(); err != nil {
		t.Logf("close the first job's abandoned writers: %v", err)
	}
	if left, perr := sc.Pending(); perr == nil {
		t.Logf("pending once the first job's writers were closed: %v", left)
	}
	gt.release()
	run(t, s.c, p, jobSpec{parallelism: 2, restore: snap})
	s.verify(t, sc, want, g)
	s.checkPending(t, sc, true)
}

// commitInFlight holds the first commit of checkpoint 3 or later in the
// committer until at least two more checkpoints completed, then cancels
// the job and resumes from its latest checkpoint, which was taken while
// that commit was in flight: the restored job must commit what the held
// commit was committing, exactly once. With applied, the held commit
// reached the external system before the job was cancelled (the runtime
// never learnt that it succeeded), so the restored job commits it again;
// without, it never reached it.
func (s *sinkSuite[T]) commitInFlight(t tb, applied bool) {
	g := s.c.strongest()
	sc, _ := s.open(t, g)
	want := s.data(max(s.c.records, 1000))
	hold := newCommitHold(3, applied)
	p := s.pipeline(sc, want, nil, nil, func(snk sink.Sink[T]) sink.Sink[T] { return wrapHold(snk, hold) })
	gt := paced(float64(count(want))/2, 20)
	j := build(t, p, jobSpec{parallelism: 2, gate: gt})
	ctx, cancel := context.WithTimeout(t.Context(), s.c.timeout)
	defer cancel()
	h := j.Start(ctx)
	stop := func() {
		h.Cancel()
		hold.release()
		_, _ = h.Wait()
	}
	defer stop() // also on Fatalf: no job outlives its case
	var held int64
	var atHold int
	ok := waitFor(ctx, pauseTimeout, func() bool {
		if held == 0 {
			if held = hold.heldID(); held != 0 {
				atHold = h.Status().Checkpoints.Completed
			}
		}
		return (held != 0 && h.Status().Checkpoints.Completed >= atHold+2) || hold.noCommitter.Load()
	})
	if hold.noCommitter.Load() {
		t.Skipf("the %v sink has no committer: no commit can be in flight", g)
	}
	if !ok {
		t.Fatalf("no commit of checkpoint 3 or later was held and followed by two completed checkpoints within %s (held %d; status %+v)", pauseTimeout, held, h.Status())
	}
	stop()
	snap := j.Latest()
	if snap == nil || snap.ID <= held {
		t.Fatalf("the latest checkpoint (%v) is not later than the held commit's checkpoint %d", snap, held)
		return // unreachable: Fatalf ends the case
	}
	t.Logf("held the commit of checkpoint %d (applied=%v) while checkpoints up to %d completed; resuming from %d", held, applied, snap.ID, snap.ID)
	gt.release()
	run(t, s.c, p, jobSpec{parallelism: 2, restore: snap})
	s.verify(t, sc, want, g)
	s.checkPending(t, sc, false)
}

// requireKindFired fails t if no fault of kind k fired.
// firedKind reports whether a fault of kind k fired.
func firedKind(p *faultinject.Plan, k faultinject.Kind) bool {
	for _, f := range p.Fired() {
		if f.Kind == k {
			return true
		}
	}
	return false
}

func requireKindFired(t tb, p *faultinject.Plan, k faultinject.Kind) {
	t.Helper()
	if firedKind(p, k) {
		return
	}
	t.Errorf("no %v fault fired (plan %v): the case proved nothing about what such a failure leaves behind; raise RecordsPerSplit", k, p)
}

func (s *sinkSuite[T]) leaks(t tb) {
	check := leakCheck(t)
	g := s.c.strongest()
	sc, cl := s.open(t, g)
	want := s.data(s.c.records)
	run(t, s.c, s.pipeline(sc, want, nil, nil), jobSpec{parallelism: 4})
	s.verify(t, sc, want, g)
	cl.close(t)
	check()
}
