package datagen

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluice-io/sluice/connectortest/fakes"
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/source"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ident(i int64) int64 { return i }

func TestBoundedSplitsCoverRangeOnce(t *testing.T) {
	tests := []struct {
		count  int64
		splits int
	}{
		{1, 1}, {10, 1}, {10, 3}, {10, 10}, {3, 5}, {1000, 7}, {1 << 20, 64},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d/%d", tt.count, tt.splits), func(t *testing.T) {
			src := New(ident, Count(tt.count), Splits(tt.splits))
			splits := src.InitialSplits()
			if len(splits) != tt.splits {
				t.Fatalf("%d splits, want %d", len(splits), tt.splits)
			}
			next := int64(0)
			for i, sp := range splits {
				if sp.Num != i || sp.SplitID() != fmt.Sprintf("split-%d", i) || sp.Stride != 1 {
					t.Fatalf("split %d = %+v (%s)", i, sp, sp.SplitID())
				}
				if sp.Next != next {
					t.Fatalf("split %d starts at %d, want %d", i, sp.Next, next)
				}
				if size := sp.Remaining(); size != tt.count/int64(tt.splits) && size != tt.count/int64(tt.splits)+1 {
					t.Fatalf("split %d has %d indexes: uneven", i, size)
				}
				for k := sp.Next; k < sp.End; k++ {
					if got := src.SplitOf(k); got != i {
						t.Fatalf("SplitOf(%d) = %d, want %d", k, got, i)
					}
				}
				next = sp.End
			}
			if next != tt.count {
				t.Fatalf("splits end at %d, want %d", next, tt.count)
			}
			if src.SplitOf(-1) != -1 || src.SplitOf(tt.count) != -1 {
				t.Fatal("SplitOf outside [0, Count) is not -1")
			}
		})
	}
}

func TestUnboundedSplitMapping(t *testing.T) {
	src := New(ident, Splits(3))
	if src.Boundedness() != source.ContinuousUnbounded {
		t.Fatal("no Count is not unbounded")
	}
	r, out := newTestReader(t, src, &fakes.ReaderContext{})
	if err := r.AddSplits(src.InitialSplits()); err != nil {
		t.Fatal(err)
	}
	const polls = 9
	for range polls {
		if st, err := r.PollNext(out); st != source.MoreAvailable || err != nil {
			t.Fatalf("PollNext = %v, %v", st, err)
		}
	}
	if len(out.Records) != polls*BatchSize {
		t.Fatalf("%d records, want %d", len(out.Records), polls*BatchSize)
	}
	last := map[string]int64{}
	for _, rec := range out.Records {
		if want := fmt.Sprintf("split-%d", src.SplitOf(rec.Value)); rec.Split != want {
			t.Fatalf("index %d emitted on %s, want %s", rec.Value, rec.Split, want)
		}
		if prev, ok := last[rec.Split]; ok && rec.Value != prev+3 {
			t.Fatalf("%s: %d after %d, want stride 3", rec.Split, rec.Value, prev)
		}
		last[rec.Split] = rec.Value
	}
	// Taking turns: after 9 polls each split emitted 3 batches.
	for i, sp := range mustSnapshot(t, r) {
		if sp.Next != int64(i)+3*BatchSize*3 || !sp.Unbounded() {
			t.Fatalf("split %d after 3 batches: %+v", i, sp)
		}
	}
	if len(out.Released) != 0 {
		t.Fatalf("unbounded splits released: %v", out.Released)
	}
}

// harness is a tiny single-goroutine runtime: one enumerator, p readers.
type harness struct {
	t       *testing.T
	src     *Source[int64]
	ectx    *fakes.EnumeratorContext[Split]
	enum    source.Enumerator[Split, EnumState]
	rctx    []*fakes.ReaderContext
	readers []source.Reader[int64, Split]
	out     *fakes.Output[int64]
	done    []bool
	sent    map[int]int // splits delivered per subtask
	noMore  map[int]int // no-more-splits delivered per subtask
}

// newHarness starts the enumerator the way the runtime does: readers
// registered, Start, then AddReader for each; with addFirst, AddReader
// comes before Start (the order of Flink's and the API's first draft).
func newHarness(t *testing.T, src *Source[int64], p int, addFirst bool) *harness {
	h := &harness{t: t, src: src, ectx: &fakes.EnumeratorContext[Split]{Parallel: p},
		out: &fakes.Output[int64]{}, done: make([]bool, p), sent: map[int]int{}, noMore: map[int]int{}}
	var err error
	if h.enum, err = src.CreateEnumerator(h.ectx); err != nil {
		t.Fatal(err)
	}
	addReaders := func() {
		for i := range p {
			if err := h.enum.AddReader(i); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range p {
		h.ectx.Register(i)
	}
	if addFirst {
		addReaders()
	}
	if err := h.enum.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !addFirst {
		addReaders()
	}
	for i := range p {
		c := &fakes.ReaderContext{Subtask: i, Parallel: p}
		r, err := src.CreateReader(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		h.rctx, h.readers = append(h.rctx, c), append(h.readers, r)
		t.Cleanup(func() { r.Close() })
	}
	return h
}

// deliver routes split requests to the enumerator and assignments and
// no-more-splits signals to the readers.
func (h *harness) deliver() {
	for i, c := range h.rctx {
		for ; c.SplitRequest > 0; c.SplitRequest-- {
			if err := h.enum.HandleSplitRequest(i, "local"); err != nil {
				h.t.Fatal(err)
			}
		}
	}
	for i, r := range h.readers {
		if as := h.ectx.Assigned[i]; len(as) > h.sent[i] {
			if err := r.AddSplits(as[h.sent[i]:]); err != nil {
				h.t.Fatal(err)
			}
			h.sent[i] = len(as)
		}
		if h.ectx.NoMoreSplits[i] > h.noMore[i] {
			h.noMore[i] = h.ectx.NoMoreSplits[i]
			r.NotifyNoMoreSplits()
		}
	}
}

// run polls until every reader ended, or fails after maxRounds.
func (h *harness) run(maxRounds int) {
	for range maxRounds {
		h.deliver()
		all := true
		for i, r := range h.readers {
			if h.done[i] {
				continue
			}
			st, err := r.PollNext(h.out)
			if err != nil {
				h.t.Fatal(err)
			}
			h.done[i] = st == source.EndOfInput
			all = all && h.done[i]
		}
		if all {
			return
		}
	}
	h.t.Fatalf("readers not done after %d rounds: %v", maxRounds, h.done)
}

// checkExactlyOnce checks that out holds each index of [0, count) once, in
// increasing order per split, tagged with the right split.
func checkExactlyOnce(t *testing.T, src *Source[int64], recs []fakes.Record[int64], count int64) {
	t.Helper()
	seen := make([]bool, count)
	last := map[string]int64{}
	for _, r := range recs {
		v := r.Value
		if v < 0 || v >= count || seen[v] {
			t.Fatalf("index %d out of range or duplicated", v)
		}
		seen[v] = true
		if r.Split != fmt.Sprintf("split-%d", src.SplitOf(v)) {
			t.Fatalf("index %d on %q", v, r.Split)
		}
		if prev, ok := last[r.Split]; ok && v <= prev {
			t.Fatalf("%s: %d after %d", r.Split, v, prev)
		}
		last[r.Split] = v
	}
	if i := slices.Index(seen, false); i >= 0 {
		t.Fatalf("index %d missing (%d of %d records)", i, len(recs), count)
	}
}

func TestBoundedAssignment(t *testing.T) {
	tests := []struct {
		name   string
		count  int64
		splits int
		p      int
		push   bool
	}{
		{"pull one reader", 5000, 4, 1, false},
		{"pull more splits than readers", 10_000, 7, 3, false},
		{"pull more readers than splits", 3000, 2, 5, false},
		{"pull fewer records than splits", 3, 8, 2, false},
		{"push one reader", 5000, 4, 1, true},
		{"push more splits than readers", 10_000, 7, 3, true},
		{"push more readers than splits", 3000, 2, 5, true},
		{"push fewer records than splits", 3, 8, 2, true},
	}
	for _, tt := range tests {
		for _, addFirst := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/addReaderFirst=%v", tt.name, addFirst), func(t *testing.T) {
				testBoundedAssignment(t, tt.count, tt.splits, tt.p, tt.push, addFirst)
			})
		}
	}
}

func testBoundedAssignment(t *testing.T, count int64, splits, p int, push, addFirst bool) {
	opts := []Option{Count(count), Splits(splits)}
	if push {
		opts = append(opts, PushAssignment())
	}
	h := newHarness(t, New(ident, opts...), p, addFirst)
	h.run(100 + int(count)/BatchSize*4)
	checkExactlyOnce(t, h.src, h.out.Records, count)

	for i := range p {
		if n := h.ectx.NoMoreSplits[i]; n != 1 {
			t.Errorf("subtask %d got no-more-splits %d times, want 1", i, n)
		}
	}
	if len(h.out.Released) != splits {
		t.Errorf("released %d splits, want %d", len(h.out.Released), splits)
	}
	if push {
		if h.ectx.Assignments > 1 {
			t.Errorf("push made %d AssignSplits calls, want 1", h.ectx.Assignments)
		}
		for sub, ss := range h.ectx.Assigned {
			for _, sp := range ss {
				if sp.Num%p != sub {
					t.Errorf("push gave split %d to subtask %d", sp.Num, sub)
				}
			}
		}
	} else if want := p + splits; sumRequests(h) != want {
		// each reader asks at start, and again after each split
		t.Errorf("%d split requests, want %d", sumRequests(h), want)
	}
	st, _ := h.enum.SnapshotState(1)
	if len(st.Unassigned) != 0 {
		t.Errorf("enumerator still holds %v", st.Unassigned)
	}
}

func sumRequests(h *harness) int {
	n := 0
	for _, sp := range h.ectx.Assigned {
		n += len(sp)
	}
	for _, k := range h.ectx.NoMoreSplits {
		n += k
	}
	return n
}

func newTestReader(t *testing.T, src *Source[int64], c *fakes.ReaderContext) (*reader[int64], *fakes.Output[int64]) {
	t.Helper()
	r, err := src.CreateReader(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r.(*reader[int64]), &fakes.Output[int64]{}
}

func mustSnapshot(t *testing.T, r source.Reader[int64, Split]) []Split {
	t.Helper()
	ss, err := r.SnapshotState(1)
	if err != nil {
		t.Fatal(err)
	}
	return ss
}

func TestSnapshotRestoreMidSplit(t *testing.T) {
	const count = 5000
	for _, polls := range []int{0, 1, 2, 4} {
		t.Run(fmt.Sprint(polls), func(t *testing.T) {
			src := New(ident, Count(count), Splits(2), Timestamps(func(i int64) int64 { return 1000 + i }))
			r1, out := newTestReader(t, src, &fakes.ReaderContext{})
			if err := r1.AddSplits(src.InitialSplits()); err != nil {
				t.Fatal(err)
			}
			for range polls {
				if _, err := r1.PollNext(out); err != nil {
					t.Fatal(err)
				}
			}
			snap := mustSnapshot(t, r1)
			// The snapshot goes through the checkpoint serializer.
			raw, err := serde.MarshalAll(src.SplitSerializer(), snap)
			if err != nil {
				t.Fatal(err)
			}
			// Records after the snapshot are lost with the failed attempt.
			if _, err := r1.PollNext(&fakes.Output[int64]{}); err != nil {
				t.Fatal(err)
			}
			restored, err := serde.UnmarshalAll(src.SplitSerializer(), raw)
			if err != nil {
				t.Fatal(err)
			}
			r2, _ := newTestReader(t, src, &fakes.ReaderContext{AttemptNum: 1})
			if err := r2.AddSplits(restored); err != nil {
				t.Fatal(err)
			}
			r2.NotifyNoMoreSplits()
			for i := 0; ; i++ {
				if i > 100 {
					t.Fatal("restored reader does not end")
				}
				st, err := r2.PollNext(out)
				if err != nil {
					t.Fatal(err)
				}
				if st == source.EndOfInput {
					break
				}
			}
			checkExactlyOnce(t, src, out.Records, count)
			for _, rec := range out.Records {
				if !rec.HasTimestamp || rec.Timestamp != 1000+rec.Value {
					t.Fatalf("record %d has timestamp %d (%v)", rec.Value, rec.Timestamp, rec.HasTimestamp)
				}
			}
		})
	}
}

func TestEnumeratorSnapshotAndAddSplitsBack(t *testing.T) {
	src := New(ident, Count(400), Splits(4))
	ectx := &fakes.EnumeratorContext[Split]{Parallel: 2}
	ectx.Register(0, 1)
	e, err := src.CreateEnumerator(ectx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []int{1, 0} {
		if err := e.HandleSplitRequest(sub, "local"); err != nil {
			t.Fatal(err)
		}
	}
	if got := ectx.Assigned[1][0].Num; got != 0 {
		t.Fatalf("first request got split %d, want 0", got)
	}
	st, err := e.SnapshotState(1)
	if err != nil {
		t.Fatal(err)
	}
	if got := nums(st.Unassigned); !slices.Equal(got, []int{2, 3}) {
		t.Fatalf("snapshot holds %v, want [2 3]", got)
	}
	// Reader 1 fails: split 0 comes back with its progress.
	back := ectx.Assigned[1][0]
	back.Next = 42
	ectx.Unregister(1)
	if err := e.AddSplitsBack([]Split{back}, 1); err != nil {
		t.Fatal(err)
	}
	st2, _ := e.SnapshotState(2)
	if got := nums(st2.Unassigned); !slices.Equal(got, []int{0, 2, 3}) || st2.Unassigned[0].Next != 42 {
		t.Fatalf("after AddSplitsBack: %+v", st2.Unassigned)
	}
	if len(st.Unassigned) != 2 {
		t.Fatal("AddSplitsBack changed an earlier snapshot")
	}

	// Restore from the serialized snapshot of checkpoint 2.
	raw, err := serde.Marshal(src.EnumeratorStateSerializer(), st2)
	if err != nil {
		t.Fatal(err)
	}
	st3, err := serde.Unmarshal(src.EnumeratorStateSerializer(), raw)
	if err != nil {
		t.Fatal(err)
	}
	ectx2 := &fakes.EnumeratorContext[Split]{Parallel: 2}
	ectx2.Register(0, 1)
	e2, err := src.RestoreEnumerator(ectx2, st3)
	if err != nil {
		t.Fatal(err)
	}
	if err := e2.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		if err := e2.HandleSplitRequest(0, "local"); err != nil {
			t.Fatal(err)
		}
	}
	if got := nums(ectx2.Assigned[0]); !slices.Equal(got, []int{0, 2, 3}) || ectx2.Assigned[0][0].Next != 42 {
		t.Fatalf("restored enumerator assigned %+v", ectx2.Assigned[0])
	}
	if ectx2.NoMoreSplits[0] != 1 {
		t.Fatalf("no-more-splits sent %d times, want 1", ectx2.NoMoreSplits[0])
	}
}

func nums(ss []Split) []int {
	out := make([]int, len(ss))
	for i, s := range ss {
		out[i] = s.Num
	}
	return out
}

func TestPushAddSplitsBackAndReregister(t *testing.T) {
	src := New(ident, Count(100), Splits(4), PushAssignment())
	ectx := &fakes.EnumeratorContext[Split]{Parallel: 2}
	e, _ := src.CreateEnumerator(ectx)
	ectx.Register(0)
	if err := e.AddReader(0); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Only reader 0 is registered: it gets 0 and 2; 1 and 3 wait for reader 1.
	if got := nums(ectx.Assigned[0]); !slices.Equal(got, []int{0, 2}) {
		t.Fatalf("reader 0 got %v", got)
	}
	if ectx.NoMoreSplits[0] != 1 || ectx.NoMoreSplits[1] != 0 {
		t.Fatalf("no-more-splits: %v", ectx.NoMoreSplits)
	}
	st, _ := e.SnapshotState(1)
	if got := nums(st.Unassigned); !slices.Equal(got, []int{1, 3}) {
		t.Fatalf("unassigned %v", got)
	}
	ectx.Register(1)
	if err := e.AddReader(1); err != nil {
		t.Fatal(err)
	}
	if got := nums(ectx.Assigned[1]); !slices.Equal(got, []int{1, 3}) || ectx.NoMoreSplits[1] != 1 {
		t.Fatalf("reader 1 got %v, no-more %d", got, ectx.NoMoreSplits[1])
	}
	// Reader 0 fails; its splits come back and go to its replacement.
	ectx.Unregister(0)
	if err := e.AddSplitsBack(ectx.Assigned[0], 0); err != nil {
		t.Fatal(err)
	}
	if len(ectx.Assigned[0]) != 2 {
		t.Fatal("splits assigned to an unregistered reader")
	}
	ectx.Register(0)
	if err := e.AddReader(0); err != nil {
		t.Fatal(err)
	}
	if got := nums(ectx.Assigned[0]); !slices.Equal(got, []int{0, 2, 0, 2}) || ectx.NoMoreSplits[0] != 2 {
		t.Fatalf("replacement got %v, no-more %d", got, ectx.NoMoreSplits[0])
	}
}

func TestUnboundedReaderWithoutSplitIdles(t *testing.T) {
	for _, push := range []bool{false, true} {
		t.Run(fmt.Sprint("push=", push), func(t *testing.T) {
			opts := []Option{Splits(1)}
			if push {
				opts = append(opts, PushAssignment())
			}
			h := newHarness(t, New(ident, opts...), 2, false)
			for range 3 {
				h.deliver()
				for _, r := range h.readers {
					if _, err := r.PollNext(h.out); err != nil {
						t.Fatal(err)
					}
				}
			}
			if len(h.ectx.NoMoreSplits) != 0 {
				t.Fatalf("unbounded source signalled no more splits: %v", h.ectx.NoMoreSplits)
			}
			idle := h.readers[1]
			st, _ := idle.PollNext(h.out)
			if st != source.NothingAvailable || h.out.Idle != 1 {
				t.Fatalf("reader without split: %v, idle marks %d", st, h.out.Idle)
			}
			ch := idle.Available()
			if isClosed(ch) {
				t.Fatal("Available of a reader without splits is ready")
			}
			// Reader 0 fails; its split comes back and goes to reader 1.
			sp := mustSnapshot(t, h.readers[0])
			h.ectx.Unregister(0)
			if err := h.enum.AddSplitsBack(sp, 0); err != nil {
				t.Fatal(err)
			}
			if push {
				// push: the split waits for its owner, subtask 0.
				if len(h.ectx.Assigned[1]) != 0 {
					t.Fatal("push moved a split to another owner")
				}
				return
			}
			h.deliver()
			if !isClosed(ch) {
				t.Fatal("Available not ready after AddSplits")
			}
			if st, _ := idle.PollNext(h.out); st != source.MoreAvailable {
				t.Fatalf("PollNext after AddSplits = %v", st)
			}
			last := h.out.Records[len(h.out.Records)-1]
			if last.Value != sp[0].Next+BatchSize-1 {
				t.Fatalf("continued at %d, want %d", last.Value, sp[0].Next+BatchSize-1)
			}
		})
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func TestRateLimitedReader(t *testing.T) {
	clk := &fakeClock{t: time.Unix(0, 0)}
	// 100/s over 2 readers: 50/s each, burst 5, wake for 1 token.
	src := New(ident, RatePerSecond(100))
	src.cfg.now = clk.now
	r, out := newTestReader(t, src, &fakes.ReaderContext{Parallel: 2})
	if err := r.AddSplits(src.InitialSplits()); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		advance time.Duration
		want    source.InputStatus
		emitted int
	}{
		{0, source.MoreAvailable, 5},
		{0, source.NothingAvailable, 5},
		{10 * time.Millisecond, source.NothingAvailable, 5},
		{10 * time.Millisecond, source.MoreAvailable, 6},
		{time.Hour, source.MoreAvailable, 11},
		{0, source.NothingAvailable, 11},
	}
	for i, s := range steps {
		clk.t = clk.t.Add(s.advance)
		st, err := r.PollNext(out)
		if err != nil || st != s.want || len(out.Records) != s.emitted {
			t.Fatalf("step %d: %v, %v, %d records; want %v, %d", i, st, err, len(out.Records), s.want, s.emitted)
		}
		if st == source.MoreAvailable && !isClosed(r.Available()) {
			t.Fatalf("step %d: Available not ready after MoreAvailable", i)
		}
	}
	<-r.Available() // the real timer (20 ms) fires; no timing assertion
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestRateLimitedCloseStopsTimer(t *testing.T) {
	src := New(ident, RatePerSecond(0.001)) // one token, then ~1000 s
	r, out := newTestReader(t, src, &fakes.ReaderContext{})
	r.AddSplits(src.InitialSplits())
	if st, _ := r.PollNext(out); st != source.MoreAvailable || len(out.Records) != 1 {
		t.Fatalf("first poll: %v, %d records", st, len(out.Records))
	}
	if st, _ := r.PollNext(out); st != source.NothingAvailable {
		t.Fatalf("second poll: %v", st)
	}
	r.Close() // goleak in TestMain checks that nothing is left behind
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		gen  func(int64) int64
		opts []Option
		want string
	}{
		{"count", ident, []Option{Count(-1)}, "Count"},
		{"splits", ident, []Option{Splits(0)}, "Splits"},
		{"rate", ident, []Option{RatePerSecond(math.Inf(1))}, "RatePerSecond"},
		{"gen", nil, nil, "generator"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := New(tt.gen, tt.opts...)
			if err := src.Err(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Err() = %v, want mention of %s", err, tt.want)
			}
			if _, err := src.CreateEnumerator(&fakes.EnumeratorContext[Split]{}); err == nil {
				t.Fatal("CreateEnumerator accepted a bad config")
			}
			if _, err := src.CreateReader(&fakes.ReaderContext{}); err == nil {
				t.Fatal("CreateReader accepted a bad config")
			}
		})
	}
}

func TestEmptyReaderEndsAndAvailable(t *testing.T) {
	src := New(ident, Count(10))
	r, out := newTestReader(t, src, &fakes.ReaderContext{})
	if st, _ := r.PollNext(out); st != source.NothingAvailable {
		t.Fatalf("no splits yet: %v", st)
	}
	ch := r.Available()
	if isClosed(ch) {
		t.Fatal("Available ready without splits")
	}
	r.NotifyNoMoreSplits()
	if !isClosed(ch) {
		t.Fatal("NotifyNoMoreSplits did not make Available ready")
	}
	if st, _ := r.PollNext(out); st != source.EndOfInput {
		t.Fatalf("after no-more-splits: %v", st)
	}
}

// TestUnboundedMoreSplitsThanReaders: an unbounded source with more splits
// than readers hands out every split, pulled or pushed, and every split
// produces records. Unbounded splits never end, so a pulling reader that
// asked only after finishing a split never got a second one (issue 11:
// splits 2 and 3 of 4 unassigned at parallelism 2).
func TestUnboundedMoreSplitsThanReaders(t *testing.T) {
	for _, push := range []bool{false, true} {
		for _, tc := range []struct{ splits, p int }{{4, 2}, {5, 2}, {7, 3}, {3, 1}} {
			t.Run(fmt.Sprintf("push=%v/splits=%d/p=%d", push, tc.splits, tc.p), func(t *testing.T) {
				opts := []Option{Splits(tc.splits)}
				if push {
					opts = append(opts, PushAssignment())
				}
				h := newHarness(t, New(ident, opts...), tc.p, false)
				readEverySplit(t, h, 4*tc.splits, tc.splits)
				held := 0
				for _, r := range h.readers {
					held += len(mustSnapshot(t, r))
				}
				if held != tc.splits {
					t.Errorf("readers hold %d splits, want %d", held, tc.splits)
				}
			})
		}
	}
}

// TestUnboundedResumeStrandedSplits: a checkpoint written before the fix of
// TestUnboundedMoreSplitsThanReaders holds splits 0 and 1 in the readers
// and 2 and 3 unassigned in the enumerator. Resumed from it (pulled, at
// parallelism 1, 2 and 3), every split is read again. (Readers ask once at
// Start, so at parallelism 2 and 3 this worked before the fix too; at 1 a
// split stayed unassigned.)
func TestUnboundedResumeStrandedSplits(t *testing.T) {
	for _, p := range []int{1, 2, 3} {
		t.Run(fmt.Sprint("p=", p), func(t *testing.T) {
			src := New(ident, Splits(4))
			all := src.InitialSplits()
			held := []Split{all[0], all[1]}
			held[0].Next, held[1].Next = 400, 401 // some progress
			h := &harness{t: t, src: src, ectx: &fakes.EnumeratorContext[Split]{Parallel: p},
				out: &fakes.Output[int64]{}, done: make([]bool, p), sent: map[int]int{}, noMore: map[int]int{}}
			for i := range p {
				h.ectx.Register(i)
			}
			var err error
			if h.enum, err = src.RestoreEnumerator(h.ectx, EnumState{Unassigned: []Split{all[2], all[3]}}); err != nil {
				t.Fatal(err)
			}
			if err := h.enum.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			for i := range p {
				if err := h.enum.AddReader(i); err != nil {
					t.Fatal(err)
				}
				c := &fakes.ReaderContext{Subtask: i, Parallel: p}
				r, err := src.CreateReader(c)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { r.Close() })
				// The runtime spreads restored splits round-robin and adds
				// them before Start.
				var mine []Split
				for j, sp := range held {
					if j%p == i {
						mine = append(mine, sp)
					}
				}
				if len(mine) > 0 {
					if err := r.AddSplits(mine); err != nil {
						t.Fatal(err)
					}
				}
				if err := r.Start(context.Background()); err != nil {
					t.Fatal(err)
				}
				h.rctx, h.readers = append(h.rctx, c), append(h.readers, r)
			}
			readEverySplit(t, h, 16, 4)
		})
	}
}

// readEverySplit delivers the enumerator's mail and polls every reader for
// the given number of rounds, then checks that the enumerator holds no
// split and that each of splits produced records.
func readEverySplit(t *testing.T, h *harness, rounds, splits int) {
	t.Helper()
	for range rounds {
		h.deliver()
		for _, r := range h.readers {
			if _, err := r.PollNext(h.out); err != nil {
				t.Fatal(err)
			}
		}
	}
	st, _ := h.enum.SnapshotState(1)
	if len(st.Unassigned) != 0 {
		t.Errorf("enumerator still holds %v", nums(st.Unassigned))
	}
	per := map[string]int{}
	for _, r := range h.out.Records {
		per[r.Split]++
	}
	for i := range splits {
		if id := fmt.Sprintf("split-%d", i); per[id] == 0 {
			t.Errorf("%s produced no records (records per split: %v)", id, per)
		}
	}
}
