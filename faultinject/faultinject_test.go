package faultinject

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/connectortest/fakes"
	"github.com/sluice-io/sluice/internal/sinkerase"
	"github.com/sluice-io/sluice/internal/sinkrt"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/source"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ident(i int64) int64 { return i }

// readAll polls r until EndOfInput or an error, at most maxPolls times.
func readAll(t *testing.T, r source.Reader[int64, datagen.Split], out source.Output[int64], maxPolls int) error {
	t.Helper()
	for range maxPolls {
		st, err := r.PollNext(out)
		if err != nil {
			return err
		}
		if st == source.EndOfInput {
			return nil
		}
	}
	t.Fatalf("reader did not end after %d polls", maxPolls)
	return nil
}

func newReader(t *testing.T, src source.Source[int64, datagen.Split, datagen.EnumState], sub, attempt int, splits []datagen.Split) source.Reader[int64, datagen.Split] {
	t.Helper()
	r, err := src.CreateReader(&fakes.ReaderContext{Subtask: sub, Parallel: 2, AttemptNum: attempt})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	r.Start(context.Background())
	r.AddSplits(splits)
	r.NotifyNoMoreSplits()
	return r
}

func injected(t *testing.T, err error, want Fault) {
	t.Helper()
	var ie *InjectedError
	if !errors.Is(err, ErrInjected) || !errors.As(err, &ie) || ie.Fault != want {
		t.Fatalf("error %v, want injected %v", err, want)
	}
	if !strings.Contains(err.Error(), want.String()) {
		t.Fatalf("error %q does not name the fault %v", err, want)
	}
}

func TestAfterRecords(t *testing.T) {
	tests := []struct {
		name    string
		records int64
	}{
		{"zero: fails at the first poll", 0},
		{"inside the first batch", 10},
		{"at a batch boundary", datagen.BatchSize},
		{"inside a later batch, across splits", 2500},
		{"after the last record: never fires", 5000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := Fault{Kind: AfterRecords, Subtask: 1, Records: tt.records}
			plan := NewPlan(f)
			gen := datagen.New(ident, datagen.Count(5000), datagen.Splits(3))
			src := WrapSource(gen, plan)

			// Subtask 0 is not affected.
			other := &fakes.Output[int64]{}
			if err := readAll(t, newReader(t, src, 0, 0, gen.InitialSplits()), other, 100); err != nil || len(other.Records) != 5000 {
				t.Fatalf("subtask 0: %v, %d records", err, len(other.Records))
			}

			out := &fakes.Output[int64]{}
			r := newReader(t, src, 1, 0, gen.InitialSplits())
			err := readAll(t, r, out, 100)
			if tt.records >= 5000 {
				if err != nil || len(plan.Fired()) != 0 {
					t.Fatalf("fired after the input ended: %v", err)
				}
				return
			}
			injected(t, err, f)
			if int64(len(out.Records)) != tt.records {
				t.Fatalf("%d records got through, want exactly %d", len(out.Records), tt.records)
			}
			if _, err := r.PollNext(out); !errors.Is(err, ErrInjected) {
				t.Fatalf("PollNext after the fault: %v", err)
			}
			if got := plan.Fired(); !slices.Equal(got, []Fault{f}) {
				t.Fatalf("Fired = %v", got)
			}
			// The next attempt runs clean: the fault fires once.
			out2 := &fakes.Output[int64]{}
			if err := readAll(t, newReader(t, src, 1, 1, gen.InitialSplits()), out2, 100); err != nil || len(out2.Records) != 5000 {
				t.Fatalf("attempt 1: %v, %d records", err, len(out2.Records))
			}
		})
	}
}

func TestAfterRecordsSeveralPerSubtask(t *testing.T) {
	// Counts are per attempt: 300 fires in attempt 0, 500 in attempt 1.
	f1 := Fault{Kind: AfterRecords, Subtask: 0, Records: 500}
	f2 := Fault{Kind: AfterRecords, Subtask: 0, Records: 300}
	plan := NewPlan(f1, f2)
	gen := datagen.New(ident, datagen.Count(1000))
	src := WrapSource(gen, plan)
	for attempt, want := range []struct {
		n int
		f *Fault
	}{{300, &f2}, {500, &f1}, {1000, nil}} {
		out := &fakes.Output[int64]{}
		err := readAll(t, newReader(t, src, 0, attempt, gen.InitialSplits()), out, 100)
		if len(out.Records) != want.n {
			t.Fatalf("attempt %d: %d records, want %d", attempt, len(out.Records), want.n)
		}
		if want.f == nil {
			if err != nil {
				t.Fatal(err)
			}
			continue
		}
		injected(t, err, *want.f)
	}
	if got := plan.Fired(); !slices.Equal(got, []Fault{f2, f1}) {
		t.Fatalf("Fired = %v", got)
	}
}

func TestDuringSnapshotReader(t *testing.T) {
	f := Fault{Kind: DuringSnapshot, Subtask: 0, Checkpoint: 2}
	plan := NewPlan(f)
	gen := datagen.New(ident, datagen.Count(100))
	src := WrapSource(gen, plan)
	r := newReader(t, src, 0, 0, gen.InitialSplits())
	results := []error{}
	for id := int64(1); id <= 3; id++ {
		_, err := r.SnapshotState(id)
		results = append(results, err)
	}
	if results[0] != nil || results[2] != nil {
		t.Fatalf("checkpoints 1 and 3: %v", results)
	}
	injected(t, results[1], f)
	// Subtask 1 at checkpoint 5: the fault already fired.
	if _, err := newReader(t, src, 1, 0, nil).SnapshotState(5); err != nil {
		t.Fatal(err)
	}
}

func TestDuringSnapshotFiresAtLaterCheckpoint(t *testing.T) {
	f := Fault{Kind: DuringSnapshot, Subtask: AnySubtask, Checkpoint: 3}
	plan := NewPlan(f)
	w, err := sinkerase.Open(context.Background(), sinkerase.Erase(WrapSink(testsink.NewCollect(testsink.NewStore[int]()), plan)), &fakes.InitContext{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.PrepareCommit(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	// Checkpoint 3 never reached this writer; 4 is the first at or after it.
	_, err = w.SnapshotState(context.Background(), 4)
	injected(t, err, f)
}

// twoPhase runs attempt 0 of a one-writer job into store with the plan.
func twoPhase(t *testing.T, plan *Plan, store *testsink.Store[int]) (sinkerase.Sink[int], *sinkerase.Writer[int]) {
	t.Helper()
	s := WrapSink(testsink.NewTwoPhase(store), plan)
	e := sinkerase.Erase(s)
	if e != s.(sinkerase.Sink[int]) {
		t.Fatal("sink.Erase does not return the wrapper itself")
	}
	w, err := sinkerase.Open(context.Background(), e, &fakes.InitContext{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e, w
}

func commitOnce(t *testing.T, e sinkerase.Sink[int], attempt int, reqs []*sinkrt.Request) {
	t.Helper()
	c, err := e.NewCommitter(context.Background(), &fakes.InitContext{AttemptNum: attempt})
	if err != nil || c == nil {
		t.Fatalf("NewCommitter: %v, %v", c, err)
	}
	defer c.Close()
	if err := c.Commit(context.Background(), reqs); err != nil {
		t.Fatal(err)
	}
}

func TestWriterFaults(t *testing.T) {
	t.Run("WriterAfterRecords", func(t *testing.T) {
		f := Fault{Kind: WriterAfterRecords, Subtask: 0, Records: 3}
		plan := NewPlan(f)
		_, ew := twoPhase(t, plan, testsink.NewStore[int]())
		w := ew.Front // the runtime writes through the front writer
		for i := range 3 {
			if err := w.Write(context.Background(), i, sink.Meta{}); err != nil {
				t.Fatal(err)
			}
		}
		injected(t, w.Write(context.Background(), 3, sink.Meta{}), f)
		injected(t, ew.Write(context.Background(), 4, sink.Meta{}), f) // stays failed
		_, w2 := twoPhase(t, plan, testsink.NewStore[int]())
		for i := range 10 {
			if err := w2.Write(context.Background(), i, sink.Meta{}); err != nil {
				t.Fatalf("attempt 1: %v", err)
			}
		}
	})
	t.Run("DuringSnapshot", func(t *testing.T) {
		f := Fault{Kind: DuringSnapshot, Subtask: 0, Checkpoint: 2}
		store := testsink.NewStore[int]()
		_, w := twoPhase(t, NewPlan(f), store)
		w.Write(context.Background(), 1, sink.Meta{})
		if _, err := w.PrepareCommit(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		w.Write(context.Background(), 2, sink.Meta{})
		_, err := w.PrepareCommit(context.Background(), 2)
		injected(t, err, f)
		if got := store.Staged(); !slices.Equal(got, []string{"job/sink/0/1"}) {
			t.Fatalf("staged %v: the failed prepare staged something", got)
		}
	})
}

func TestCommitFaults(t *testing.T) {
	tests := []struct {
		kind          Kind
		wantCommitted []int // after the failing Commit
		wantRetry     sinkrt.Outcome
	}{
		{BeforeCommit, []int{1}, sinkrt.Committed},
		{DuringCommit, []int{1, 2}, sinkrt.AlreadyCommitted},
	}
	for _, tt := range tests {
		t.Run(tt.kind.String(), func(t *testing.T) {
			f := Fault{Kind: tt.kind, Subtask: 0, Checkpoint: 2}
			plan := NewPlan(f)
			store := testsink.NewStore[int]()
			e, w := twoPhase(t, plan, store)
			var reqs [][]*sinkrt.Request
			for id := int64(1); id <= 2; id++ {
				w.Write(context.Background(), int(id), sink.Meta{})
				cs, err := w.PrepareCommit(context.Background(), id)
				if err != nil {
					t.Fatal(err)
				}
				reqs = append(reqs, []*sinkrt.Request{{CheckpointID: id, Data: cs[0]}})
			}
			commitOnce(t, e, 0, reqs[0]) // checkpoint 1: before the fault
			if reqs[0][0].Outcome != sinkrt.Committed {
				t.Fatalf("checkpoint 1: %v", reqs[0][0].Outcome)
			}
			commitOnce(t, e, 0, reqs[1])
			if r := reqs[1][0]; r.Outcome != sinkrt.FailedUnknown {
				t.Fatalf("checkpoint 2: %v", r.Outcome)
			}
			injected(t, reqs[1][0].Err, f)
			if got := store.Committed(); !slices.Equal(got, tt.wantCommitted) {
				t.Fatalf("committed after the fault: %v, want %v", got, tt.wantCommitted)
			}
			// The next attempt commits the restored committables again.
			reqs[1][0].Outcome, reqs[1][0].Err = sinkrt.Committed, nil
			commitOnce(t, e, 1, reqs[1])
			if got := reqs[1][0].Outcome; got != tt.wantRetry {
				t.Fatalf("re-commit: %v (%v), want %v", got, reqs[1][0].Err, tt.wantRetry)
			}
			got, err := store.Final()
			if err != nil || !slices.Equal(got, []int{1, 2}) {
				t.Fatalf("Final = %v, %v", got, err)
			}
			if fired := plan.Fired(); !slices.Equal(fired, []Fault{f}) {
				t.Fatalf("Fired = %v", fired)
			}
		})
	}
}

func TestWrapSinkPassThrough(t *testing.T) {
	store := testsink.NewStore[int]()
	plain := sinkerase.Erase(WrapSink(testsink.NewCollect(store), nil))
	if c, err := plain.NewCommitter(context.Background(), &fakes.InitContext{}); c != nil || err != nil {
		t.Fatalf("plain sink got a committer: %v, %v", c, err)
	}
	if d := plain.Describe(); !strings.HasPrefix(d, "faultinject(") {
		t.Fatalf("Describe = %q", d)
	}
	g := sinkerase.Erase(WrapSink(testsink.NewTwoPhase(store, testsink.WithGlobalCommit()), nil))
	if gc, err := g.NewGlobalCommitter(context.Background(), &fakes.InitContext{}); gc == nil || err != nil {
		t.Fatalf("global committer lost: %v, %v", gc, err)
	}
	// CreateWriter (the sink.Sink side) works too.
	w, err := WrapSink(testsink.NewCollect(store), nil).CreateWriter(context.Background(), &fakes.InitContext{})
	if err != nil {
		t.Fatal(err)
	}
	w.Write(context.Background(), 7, sink.Meta{})
	w.Flush(context.Background(), true)
	if got := store.Committed(); !slices.Equal(got, []int{7}) {
		t.Fatalf("committed %v", got)
	}
}

// optReader is a reader with optional interfaces chosen per test.
type optReader struct {
	source.Reader[int64, datagen.Split]
	events    []source.Event
	completed []int64
}

func (r *optReader) handle(e source.Event) error { r.events = append(r.events, e); return nil }
func (r *optReader) NotifyCheckpointComplete(id int64) error {
	r.completed = append(r.completed, id)
	return nil
}
func (r *optReader) pause(pause, resume []string) error { return nil }

type evReader struct{ *optReader }

func (r evReader) HandleSourceEvent(e source.Event) error { return r.handle(e) }

type paReader struct{ *optReader }

func (r paReader) PauseOrResumeSplits(p, q []string) error { return r.pause(p, q) }

type bothReader struct{ *optReader }

func (r bothReader) HandleSourceEvent(e source.Event) error  { return r.handle(e) }
func (r bothReader) PauseOrResumeSplits(p, q []string) error { return r.pause(p, q) }

type fixedSource struct {
	source.Source[int64, datagen.Split, datagen.EnumState]
	r source.Reader[int64, datagen.Split]
}

func (s fixedSource) CreateReader(source.ReaderContext) (source.Reader[int64, datagen.Split], error) {
	return s.r, nil
}

func TestReaderOptionalInterfaces(t *testing.T) {
	base := func() *optReader {
		r, _ := datagen.New(ident).CreateReader(&fakes.ReaderContext{})
		return &optReader{Reader: r}
	}
	tests := []struct {
		name         string
		make         func(*optReader) source.Reader[int64, datagen.Split]
		events, paus bool
	}{
		{"neither", func(o *optReader) source.Reader[int64, datagen.Split] { return o }, false, false},
		{"events", func(o *optReader) source.Reader[int64, datagen.Split] { return evReader{o} }, true, false},
		{"pauser", func(o *optReader) source.Reader[int64, datagen.Split] { return paReader{o} }, false, true},
		{"both", func(o *optReader) source.Reader[int64, datagen.Split] { return bothReader{o} }, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := base()
			src := WrapSource[int64](fixedSource{datagen.New(ident), tt.make(o)}, NewPlan())
			r, err := src.CreateReader(&fakes.ReaderContext{})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			eh, isEv := r.(source.ReaderEventHandler)
			_, isPa := r.(source.SplitPauser)
			if isEv != tt.events || isPa != tt.paus {
				t.Fatalf("event handler %v, pauser %v; want %v, %v", isEv, isPa, tt.events, tt.paus)
			}
			if isEv {
				eh.HandleSourceEvent("hello")
				if !slices.Equal(o.events, []source.Event{"hello"}) {
					t.Fatalf("event not forwarded: %v", o.events)
				}
			}
			cl, ok := r.(source.CheckpointListener)
			if !ok {
				t.Fatal("wrapped reader is no CheckpointListener")
			}
			cl.NotifyCheckpointComplete(9)
			if !slices.Equal(o.completed, []int64{9}) {
				t.Fatalf("checkpoint notice not forwarded: %v", o.completed)
			}
			if _, ok := r.(source.CheckpointAbortListener); !ok {
				t.Fatal("wrapped reader is no CheckpointAbortListener")
			}
		})
	}
}

func TestWrapSourceKeepsEnumerator(t *testing.T) {
	gen := datagen.New(ident, datagen.Count(10), datagen.Splits(2))
	src := WrapSource(gen, NewPlan(Fault{Kind: AfterRecords, Records: 1}))
	if src.Boundedness() != source.Bounded || src.SplitSerializer() == nil {
		t.Fatal("source methods not forwarded")
	}
	ectx := &fakes.EnumeratorContext[datagen.Split]{}
	ectx.Register(0)
	e, err := src.CreateEnumerator(ectx)
	if err != nil {
		t.Fatal(err)
	}
	e.Start(context.Background())
	e.HandleSplitRequest(0, "local")
	if len(ectx.Assigned[0]) != 1 {
		t.Fatalf("assigned %v", ectx.Assigned)
	}
}

func TestRandomPlan(t *testing.T) {
	kinds := Kinds()
	a := RandomPlan(42, 50, kinds, 4, 1000, 10)
	b := RandomPlan(42, 50, kinds, 4, 1000, 10)
	c := RandomPlan(43, 50, kinds, 4, 1000, 10)
	if !slices.Equal(a.Faults(), b.Faults()) {
		t.Fatal("same seed, different plans")
	}
	if slices.Equal(a.Faults(), c.Faults()) {
		t.Fatal("different seeds, same plan")
	}
	seen := map[Kind]bool{}
	for _, f := range a.Faults() {
		seen[f.Kind] = true
		if f.Subtask < 0 || f.Subtask >= 4 {
			t.Fatalf("subtask out of range: %v", f)
		}
		if f.Kind.countsRecords() {
			if f.Records < 1 || f.Records > 1000 || f.Checkpoint != 0 {
				t.Fatalf("bad record fault %v", f)
			}
		} else if f.Checkpoint < 1 || f.Checkpoint > 10 || f.Records != 0 {
			t.Fatalf("bad checkpoint fault %v", f)
		}
	}
	if len(seen) != len(kinds) {
		t.Fatalf("50 faults used only kinds %v", seen)
	}
	only := RandomPlan(1, 5, []Kind{BeforeCommit}, 1, 0, 3)
	for _, f := range only.Faults() {
		if f.Kind != BeforeCommit || f.Subtask != 0 {
			t.Fatalf("unexpected %v", f)
		}
	}
}

func TestRandomPlanPanics(t *testing.T) {
	for _, tt := range []struct {
		kinds       []Kind
		p           int
		maxR, maxCk int64
	}{
		{nil, 1, 1, 1},
		{Kinds(), 0, 1, 1},
		{[]Kind{AfterRecords}, 1, 0, 1},
		{[]Kind{DuringCommit}, 1, 1, 0},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("RandomPlan(%v, %d, %d, %d) did not panic", tt.kinds, tt.p, tt.maxR, tt.maxCk)
				}
			}()
			RandomPlan(1, 1, tt.kinds, tt.p, tt.maxR, tt.maxCk)
		}()
	}
}

func TestPlanFiresOnceUnderConcurrency(t *testing.T) {
	f := Fault{Kind: BeforeCommit, Subtask: AnySubtask, Checkpoint: 1}
	plan := NewPlan(f)
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins := 0
	for i := range 16 {
		wg.Go(func() {
			if plan.fireAt(BeforeCommit, i, 1, "test") != nil {
				mu.Lock()
				wins++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if wins != 1 || len(plan.Fired()) != 1 || len(plan.Pending()) != 0 {
		t.Fatalf("%d wins, fired %v", wins, plan.Fired())
	}
}

func TestPlanString(t *testing.T) {
	plan := NewPlan(
		Fault{Kind: AfterRecords, Subtask: 1, Records: 100},
		Fault{Kind: DuringCommit, Subtask: AnySubtask, Checkpoint: 3},
	)
	plan.fireAt(DuringCommit, 0, 3, "test")
	want := "faultinject.Plan{AfterRecords(subtask=1, records=100), DuringCommit(subtask=any, checkpoint=3) [fired]}"
	if got := plan.String(); got != want {
		t.Fatalf("String = %q\nwant     %q", got, want)
	}
	var none *Plan
	if none.String() != "faultinject.Plan{}" || none.Fired() != nil || none.fireAt(AfterRecords, 0, 0, "") != nil {
		t.Fatal("nil plan")
	}
	if got := fmt.Sprint(Kind(9)); got != "Kind(9)" {
		t.Fatal(got)
	}
}

// closeCounter counts Close calls of the writer it wraps.
type closeCounter struct {
	sinkrt.Writer
	closed *int
}

func (c closeCounter) Close() error { *c.closed++; return c.Writer.Close() }

func TestAfterPrepareCommit(t *testing.T) {
	f := Fault{Kind: AfterPrepareCommit, Subtask: 0, Checkpoint: 2}
	store := testsink.NewStore[int]()
	_, w := twoPhase(t, NewPlan(f), store)
	w.Write(context.Background(), 1, sink.Meta{})
	if cs, err := w.PrepareCommit(context.Background(), 1); err != nil || len(cs) != 1 {
		t.Fatalf("PrepareCommit(1) = %d committables, %v; want 1, nil", len(cs), err)
	}
	// Nothing written: nothing prepared, the fault does not fire.
	if cs, err := w.PrepareCommit(context.Background(), 2); err != nil || len(cs) != 0 {
		t.Fatalf("empty PrepareCommit(2) = %d committables, %v; want 0, nil", len(cs), err)
	}
	w.Write(context.Background(), 2, sink.Meta{})
	cs, err := w.PrepareCommit(context.Background(), 3)
	injected(t, err, f)
	if cs != nil {
		t.Errorf("the failed PrepareCommit returned %d committables, want none", len(cs))
	}
	// The real PrepareCommit ran: checkpoint 2's transaction is staged and
	// left behind.
	if got := store.Staged(); !slices.Equal(got, []string{"job/sink/0/1", "job/sink/0/3"}) {
		t.Fatalf("staged %v, want checkpoint 1's and 3's transactions", got)
	}
}

func TestCrashAbandonsWriters(t *testing.T) {
	for _, crash := range []bool{false, true} {
		f := Fault{Kind: WriterAfterRecords, Subtask: 0, Records: 1}
		plan := NewPlan(f)
		if crash {
			plan.Crash()
		}
		s := WrapSink(testsink.NewTwoPhase(testsink.NewStore[int]()), plan)
		inner := sinkerase.Erase(s)
		closed := 0
		newWriter := func() *sinkerase.Writer[int] {
			w, err := sinkerase.Open(context.Background(), inner, &fakes.InitContext{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			return w
		}
		// A writer closed before any fault fired is closed even in crash mode.
		before := newWriter()
		if err := before.Close(); err != nil {
			t.Fatal(err)
		}
		w := newWriter()
		cw := w.Front.(*writer[int])
		cw.Writer = closeCounter{cw.Writer, &closed}
		if err := w.Front.Write(context.Background(), 1, sink.Meta{}); err != nil {
			t.Fatal(err)
		}
		injected(t, w.Front.Write(context.Background(), 2, sink.Meta{}), f)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		want := 1
		if crash {
			want = 0
		}
		if closed != want {
			t.Errorf("crash=%v: inner Close ran %d times after the fault, want %d", crash, closed, want)
		}
		if err := plan.CloseAbandoned(); err != nil {
			t.Fatal(err)
		}
		if closed != 1 {
			t.Errorf("crash=%v: inner Close ran %d times after CloseAbandoned, want 1", crash, closed)
		}
	}
}

// committedReader wants commit notices (source.CommitListener).
type committedReader struct {
	source.Reader[int64, datagen.Split]
	committed []int64
}

func (r *committedReader) NotifyCheckpointCommitted(id int64) error {
	r.committed = append(r.committed, id)
	return nil
}

// TestWrappedReaderForwardsCommitNotices: a wrapped reader that commits
// something once the checkpoint's output is committed (the Kafka source's
// group offsets, the PostgreSQL CDC source's slot LSN) must still get the
// notices through the wrapper.
func TestWrappedReaderForwardsCommitNotices(t *testing.T) {
	r, _ := datagen.New(ident).CreateReader(&fakes.ReaderContext{})
	cr := &committedReader{Reader: r}
	src := WrapSource[int64](fixedSource{datagen.New(ident), cr}, NewPlan())
	w, err := src.CreateReader(&fakes.ReaderContext{})
	if err != nil {
		t.Fatal(err)
	}
	cl, ok := w.(source.CommitListener)
	if !ok {
		t.Fatalf("the wrapped reader %T is not a source.CommitListener", w)
	}
	if err := cl.NotifyCheckpointCommitted(4); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cr.committed, []int64{4}) {
		t.Fatalf("the wrapped reader got commit notices %v, want [4]", cr.committed)
	}
}
