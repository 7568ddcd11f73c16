package hybrid

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/source"
)

const second = int64(1) << 40 // values of the second source start here

type chainSpec struct {
	n0, n1 int64 // records of the first and second source
	s0, s1 int   // their splits
	push1  bool  // the second source pushes its splits
}

func (c chainSpec) build(t *testing.T) *Source[int64] {
	t.Helper()
	first := datagen.New(func(i int64) int64 { return i }, datagen.Count(c.n0), datagen.Splits(c.s0))
	opts := []datagen.Option{datagen.Count(c.n1), datagen.Splits(c.s1)}
	if c.push1 {
		opts = append(opts, datagen.PushAssignment())
	}
	next := datagen.New(func(i int64) int64 { return second + i }, opts...)
	src, err := New(Of(first)).AddSource(Of(next)).Build()
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func (c chainSpec) input() []int64 {
	var in []int64
	for i := range c.n0 {
		in = append(in, i)
	}
	for i := range c.n1 {
		in = append(in, second+i)
	}
	return in
}

// TestSimChain: a chain of two bounded sources is read exactly once, at
// several parallelisms (more readers than splits too) and schedules; every
// reader ends.
func TestSimChain(t *testing.T) {
	for _, c := range []chainSpec{
		{n0: 3000, s0: 4, n1: 2000, s1: 3},
		{n0: 3000, s0: 4, n1: 2000, s1: 3, push1: true},
		{n0: 10, s0: 1, n1: 10, s1: 1},
	} {
		for _, p := range []int{1, 2, 5} {
			for seed := range uint64(4) {
				t.Run(fmt.Sprintf("%+v/p=%d/seed=%d", c, p, seed), func(t *testing.T) {
					s := newSim(t, c.build(t), p, seed, 0, nil)
					s.runToEnd()
					expectOnce(t, s.all(), c.input())
					if cur := s.enum.(*enumerator[int64]).cur; cur != 1 {
						t.Fatalf("enumerator at source %d at the end", cur)
					}
					s.close()
				})
			}
		}
	}
}

// TestSimThreeSources: the switch repeats along a longer chain.
func TestSimThreeSources(t *testing.T) {
	mk := func(base, n int64, splits int, opts ...datagen.Option) Child[int64] {
		return Of(datagen.New(func(i int64) int64 { return base + i }, append([]datagen.Option{datagen.Count(n), datagen.Splits(splits)}, opts...)...))
	}
	src, err := New(mk(0, 700, 2)).AddSource(mk(1000, 1500, 3, datagen.PushAssignment())).AddSource(mk(5000, 900, 1)).Build()
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	for _, r := range [][2]int64{{0, 700}, {1000, 1500}, {5000, 900}} {
		for i := range r[1] {
			want = append(want, r[0]+i)
		}
	}
	for seed := range uint64(5) {
		s := newSim(t, src, 3, seed, 0, nil)
		s.runToEnd()
		expectOnce(t, s.all(), want)
		s.close()
	}
}

// TestSimRestoreAnywhere takes a checkpoint after every step of a run
// (with random schedules), lets the run go on for a while after the
// checkpoint completed, fails it, and restores from the checkpoint — up to
// three times per run, sometimes at another parallelism. The committed
// output of every attempt plus the last attempt's output must equal the
// input exactly. Checkpoints fall before the switch, while it is in
// flight (the enumerator switched between its snapshot and the readers'),
// and after it; each kind must occur.
func TestSimRestoreAnywhere(t *testing.T) {
	c := chainSpec{n0: 4000, s0: 3, n1: 3000, s1: 4}
	src := c.build(t)
	kinds := map[string]int{}
	for seed := range uint64(6) {
		for k := 0; k < 40; k++ {
			t.Run(fmt.Sprintf("seed=%d/k=%d", seed, k), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, uint64(k)))
				p := 3
				var committed []int64
				var ck *simCkpt
				at := k
				for attempt := 0; ; attempt++ {
					s := newSim(t, src, p, seed*100+uint64(k), attempt, ck)
					if attempt == 3 {
						s.runToEnd()
						expectOnce(t, append(committed, s.all()...), c.input())
						s.close()
						return
					}
					for range at {
						s.step()
					}
					before := s.enum.(*enumerator[int64]).cur
					next := s.checkpoint(int64(attempt + 1))
					for i := 0; !next.complete(p); i++ {
						if i > 10_000 {
							t.Fatal("checkpoint never completes")
						}
						s.step()
					}
					after := s.enum.(*enumerator[int64]).cur
					switch {
					case before == 0 && after == 0:
						kinds["before"]++
					case before == 0:
						kinds["during"]++
					default:
						kinds["after"]++
					}
					for range rng.IntN(10) {
						s.step()
					}
					committed = append(committed, s.committed(next)...)
					s.close()
					ck, at = next, rng.IntN(15)
					if rng.IntN(3) == 0 {
						p = 2 + rng.IntN(3) // restore at 2, 3 or 4
					}
				}
			})
		}
	}
	t.Logf("checkpoints by phase: %v", kinds)
	for _, kind := range []string{"before", "during", "after"} {
		if kinds[kind] == 0 {
			t.Errorf("no checkpoint %s the switch", kind)
		}
	}
}

// TestSimRegionalRestart: readers fail one at a time and restart alone
// from the latest completed checkpoint while the enumerator keeps running
// (the runtime's regional failover): their splits assigned after the
// checkpoint come back through AddSplitsBack — of a source that may be
// finished by then — and a restarted reader may hold restored splits of a
// source the enumerator has left. The enumerator steps such a reader
// through the earlier source and then to the current one. Every record
// ends up in the output exactly once.
func TestSimRegionalRestart(t *testing.T) {
	c := chainSpec{n0: 6000, s0: 4, n1: 4000, s1: 3}
	src := c.build(t)
	stale := 0
	for seed := range uint64(200) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			s := newSim(t, src, 3, seed, 0, nil)
			id := int64(0)
			for failures := 0; !s.allEnded() && failures < 4; {
				if s.steps > 10_000 {
					t.Fatal("no progress")
				}
				s.step()
				switch rng.IntN(6) {
				case 0:
					id++
					s.checkpoint(id)
				case 1:
					sub := rng.IntN(3)
					e := s.enum.(*enumerator[int64])
					for _, b := range lastSplits(s, sub) {
						if b < e.cur {
							stale++
						}
					}
					s.restartRegion(sub)
					failures++
				}
			}
			s.runToEnd()
			expectOnce(t, s.all(), c.input())
			s.close()
		})
	}
	t.Logf("%d restarts restored splits of a source the enumerator had left", stale)
	if stale == 0 {
		t.Error("no restart restored splits of an earlier source; the case is not covered")
	}
}

// lastSplits returns the sources of reader sub's splits in the latest
// completed checkpoint.
func lastSplits(s *sim, sub int) []int {
	var ck *simCkpt
	for _, c := range s.ckpts {
		if c.complete(s.p) && (ck == nil || c.id > ck.id) {
			ck = c
		}
	}
	if ck == nil {
		return nil
	}
	ss, _ := serde.UnmarshalAll(s.src.SplitSerializer(), ck.splits[sub])
	var out []int
	for _, sp := range ss {
		out = append(out, sp.Source)
	}
	return out
}

// TestSimSnapshotBeforeSwitchArrives: a restored reader snapshots its
// restored splits even before the enumerator told it which source to read
// (Flink's reader returns nothing then and would lose them).
func TestSimSnapshotBeforeSwitchArrives(t *testing.T) {
	c := chainSpec{n0: 20_000, s0: 2, n1: 1000, s1: 1}
	src := c.build(t)
	a := newSim(t, src, 2, 1, 0, nil)
	holding := func() bool {
		for _, r := range a.readers {
			if ss, err := r.SnapshotState(0); err != nil || len(ss) == 0 {
				return false
			}
		}
		return true
	}
	for i := 0; !holding(); i++ {
		if i > 1000 {
			t.Fatal("readers never hold splits at the same time")
		}
		a.step()
	}
	ck := a.checkpoint(1)
	a.deliver(0, -1)
	a.deliver(1, -1)
	committed := a.committed(ck)
	a.close()
	if len(ck.splits[0]) == 0 || len(ck.splits[1]) == 0 {
		t.Fatalf("the checkpoint holds reader splits %v", ck.splits)
	}
	b := newSim(t, src, 2, 2, 1, ck)
	for i := range 2 {
		b.poll(i) // announces itself; no switch yet
	}
	ck2 := b.checkpoint(2)
	b.deliver(0, -1)
	b.deliver(1, -1)
	if !ck2.complete(2) {
		t.Fatal("checkpoint 2 incomplete")
	}
	for i := range 2 {
		if len(ck2.splits[i]) != len(ck.splits[i]) {
			t.Fatalf("reader %d snapshotted %d splits before its switch, restored %d", i, len(ck2.splits[i]), len(ck.splits[i]))
		}
	}
	b.close()
	cc := newSim(t, src, 2, 3, 2, ck2)
	cc.runToEnd()
	expectOnce(t, append(committed, cc.all()...), c.input())
	cc.close()
}

// TestSimHandover: the factory of the second source starts it where the
// first one ended, from the previous enumerator; after a restore past the
// switch it gets no enumerator, and the restored state carries the
// position.
func TestSimHandover(t *testing.T) {
	var prevs []any
	factory := func(sc SwitchContext) (Child[int64], error) {
		prevs = append(prevs, sc.PreviousEnumerator())
		if sc.Index() != 1 {
			return Child[int64]{}, fmt.Errorf("index %d", sc.Index())
		}
		if prev, ok := sc.PreviousEnumerator().(*EndEnumerator); ok {
			return Of[int64](NewOffsetSource(prev.End(), 2500, 3, true)), nil
		}
		return Of[int64](NewOffsetSource(0, 2500, 3, false)), nil
	}
	src, err := New(Of[int64](NewEndSource(1500, 2))).AddSourceFactory(factory, source.Bounded).Build()
	if err != nil {
		t.Fatal(err)
	}
	want := make([]int64, 4000)
	for i := range want {
		want[i] = int64(i)
	}
	s := newSim(t, src, 2, 1, 0, nil)
	s.runToEnd()
	expectOnce(t, s.all(), want)
	s.close()
	if len(prevs) != 1 || prevs[0] == nil {
		t.Fatalf("factory calls got %v, want one previous enumerator", prevs)
	}

	// Restore from a checkpoint after the switch.
	prevs = nil
	s = newSim(t, src, 2, 2, 0, nil)
	for i := 0; s.enum.(*enumerator[int64]).cur == 0; i++ {
		if i > 1000 {
			t.Fatal("no switch")
		}
		s.step()
	}
	ck := s.checkpoint(1)
	for !ck.complete(2) {
		s.step()
	}
	committed := s.committed(ck)
	s.close()
	r := newSim(t, src, 2, 3, 1, ck)
	r.runToEnd()
	expectOnce(t, append(committed, r.all()...), want)
	r.close()
	if len(prevs) != 2 || prevs[0] == nil || prevs[1] != nil {
		t.Fatalf("factory got %v, want the previous enumerator, then nil on restore", prevs)
	}
}

// TestSimGivenBackSplits: a reader fails after the switch and its split of
// the first source comes back (AddSplitsBack, as for a regional restart).
// The enumerator keeps it, snapshots it, switches the new reader back to
// the first source to read it, then to the current one.
func TestSimGivenBackSplits(t *testing.T) {
	c := chainSpec{n0: 2000, s0: 2, n1: 2000, s1: 2}
	src := c.build(t)
	s := newSim(t, src, 2, 4, 0, nil)
	for i := 0; s.enum.(*enumerator[int64]).cur == 0; i++ {
		if i > 1000 {
			t.Fatal("no switch")
		}
		s.step()
	}
	// Reader 1 fails. Its mails die with it; one split of source 0 comes
	// back with records [100, 250) still to read.
	if err := s.readers[1].Close(); err != nil {
		t.Fatal(err)
	}
	s.mail[1] = nil
	s.inbox = slices.DeleteFunc(s.inbox, func(m coordMsg) bool { return m.sub == 1 })
	back, err := wrapSplit(0, datagen.New(func(i int64) int64 { return i }).SplitSerializer(), datagen.Split{Num: 0, Next: 100, End: 250, Stride: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.enum.AddSplitsBack([]Split{back}, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.enum.AddReader(1); err != nil {
		t.Fatal(err)
	}
	st, err := s.enum.SnapshotState(9)
	if err != nil || len(st.Pending) != 1 || st.Pending[0].SplitID() != "0:split-0" {
		t.Fatalf("snapshot %+v, %v: want the given-back split pending", st, err)
	}
	raw, err := serde.Marshal(src.EnumeratorStateSerializer(), st)
	if err != nil {
		t.Fatal(err)
	}
	r, err := src.CreateReader(&simReaderCtx{s, 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.readers[1], s.ended[1] = r, false
	before := len(s.out[1])
	s.runToEnd()
	got := map[int64]bool{}
	for _, v := range s.out[1][before:] {
		got[v] = true
	}
	for v := int64(100); v < 250; v++ {
		if !got[v] {
			t.Fatalf("the new reader did not read given-back record %d", v)
		}
	}
	if st, _ := s.enum.SnapshotState(10); len(st.Pending) != 0 {
		t.Fatalf("still pending after the reader read them: %v", st.Pending)
	}
	s.close()

	// The pending split survives a restore of the enumerator state.
	rst, err := serde.Unmarshal(src.EnumeratorStateSerializer(), raw)
	if err != nil {
		t.Fatal(err)
	}
	if len(rst.Pending) != 1 || rst.Pending[0].ID != "split-0" || rst.Source != 1 {
		t.Fatalf("restored %+v", rst)
	}
}

// echo is a source without data that exercises source events: each reader
// says hello to its enumerator when it starts, the enumerator answers with
// an event and no-more-splits, and starts a periodic async call.
type echo struct {
	name  string
	enums []*echoEnum
	recvd map[int][]source.Event // by subtask, what readers got
}

type none struct{}

func (none) SplitID() string { return "none" }

func (e *echo) Boundedness() source.Boundedness { return source.Bounded }
func (e *echo) CreateEnumerator(ctx source.EnumeratorContext[none]) (source.Enumerator[none, int], error) {
	en := &echoEnum{ctx: ctx, name: e.name}
	e.enums = append(e.enums, en)
	return en, nil
}
func (e *echo) RestoreEnumerator(ctx source.EnumeratorContext[none], _ int) (source.Enumerator[none, int], error) {
	return e.CreateEnumerator(ctx)
}
func (e *echo) CreateReader(ctx source.ReaderContext) (source.Reader[int64, none], error) {
	return &echoReader{ctx: ctx, e: e}, nil
}
func (e *echo) SplitSerializer() serde.Versioned[none]          { return serde.JSON[none](1) }
func (e *echo) EnumeratorStateSerializer() serde.Versioned[int] { return serde.JSON[int](1) }

type echoEnum struct {
	ctx     source.EnumeratorContext[none]
	name    string
	got     map[int]source.Event
	handled int // async handler runs
	asyncOK bool
	closed  bool
}

func (e *echoEnum) Start(context.Context) error {
	e.got = map[int]source.Event{}
	e.ctx.CallAsync(func(ctx context.Context) (any, error) {
		return nil, ctx.Err()
	}, func(_ any, err error) {
		e.handled++
		e.asyncOK = err == nil
	}, 0, 0)
	return nil
}
func (e *echoEnum) HandleSplitRequest(int, string) error { return nil }
func (e *echoEnum) AddSplitsBack([]none, int) error      { return nil }
func (e *echoEnum) AddReader(int) error                  { return nil }
func (e *echoEnum) SnapshotState(int64) (int, error)     { return 0, nil }
func (e *echoEnum) Close() error                         { e.closed = true; return nil }
func (e *echoEnum) HandleSourceEvent(sub int, ev source.Event) error {
	if e.closed {
		return errors.New("event after close")
	}
	e.got[sub] = ev
	e.ctx.SendEventToReader(sub, e.name+" ack")
	e.ctx.SignalNoMoreSplits(sub)
	return nil
}

type echoReader struct {
	ctx    source.ReaderContext
	e      *echo
	noMore bool
}

func (r *echoReader) Start(context.Context) error {
	r.ctx.SendEventToEnumerator(fmt.Sprintf("hello from %d", r.ctx.SubtaskIndex()))
	return nil
}
func (r *echoReader) PollNext(source.Output[int64]) (source.InputStatus, error) {
	if r.noMore {
		return source.EndOfInput, nil
	}
	return source.NothingAvailable, nil
}
func (r *echoReader) Available() <-chan struct{}          { return nil }
func (r *echoReader) AddSplits([]none) error              { return nil }
func (r *echoReader) NotifyNoMoreSplits()                 { r.noMore = true }
func (r *echoReader) SnapshotState(int64) ([]none, error) { return nil, nil }
func (r *echoReader) Close() error                        { return nil }
func (r *echoReader) HandleSourceEvent(ev source.Event) error {
	r.e.recvd[r.ctx.SubtaskIndex()] = append(r.e.recvd[r.ctx.SubtaskIndex()], ev)
	return nil
}

// TestSimEvents: the sources' own events go both ways, tagged with the
// right subtask; signals of one source reach only its readers; an async
// call of a source whose enumerator was closed at the switch runs neither
// its function's work nor its handler.
func TestSimEvents(t *testing.T) {
	a := &echo{name: "a", recvd: map[int][]source.Event{}}
	b := &echo{name: "b", recvd: map[int][]source.Event{}}
	src, err := New(Of[int64](a)).AddSource(Of[int64](b)).Build()
	if err != nil {
		t.Fatal(err)
	}
	s := newSim(t, src, 3, 7, 0, nil)
	// Source a's async call runs while a is current.
	if len(s.async) != 1 {
		t.Fatalf("%d async calls", len(s.async))
	}
	res, err := s.async[0].fn(context.Background())
	s.async[0].handler(res, err)
	s.runToEnd()
	if len(s.async) != 2 {
		t.Fatalf("%d async calls, want one per source", len(s.async))
	}
	// Now a is closed: its second run is cancelled and not handled.
	res, err = s.async[0].fn(context.Background())
	s.async[0].handler(res, err)
	if en := a.enums[0]; en.handled != 1 || !en.asyncOK || !en.closed || err == nil {
		t.Fatalf("source a async: handled %d (ok %v), closed %v, fn error %v", en.handled, en.asyncOK, en.closed, err)
	}
	for _, e := range []*echo{a, b} {
		en := e.enums[0]
		for sub := range 3 {
			if en.got[sub] != fmt.Sprintf("hello from %d", sub) {
				t.Fatalf("source %s enumerator got %v from %d", e.name, en.got[sub], sub)
			}
			if got := e.recvd[sub]; !slices.Equal(got, []source.Event{e.name + " ack"}) {
				t.Fatalf("source %s reader %d got %v", e.name, sub, got)
			}
		}
	}
	// Pausing needs the current reader's support.
	if err := s.readers[0].(source.SplitPauser).PauseOrResumeSplits([]string{"x"}, nil); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("pause: %v", err)
	}
	s.close()
}

// TestSimRestoredAheadFails: a reader restored with splits of a source
// after the enumerator's is an inconsistent checkpoint; the job fails with
// an error that says so instead of reading wrong data.
func TestSimRestoredAheadFails(t *testing.T) {
	c := chainSpec{n0: 100, s0: 1, n1: 100, s1: 1}
	src := c.build(t)
	s := newSim(t, src, 1, 1, 0, nil)
	st, err := s.enum.SnapshotState(1)
	if err != nil {
		t.Fatal(err)
	}
	s.close()
	enc, _ := serde.Marshal(src.EnumeratorStateSerializer(), st)
	ahead, _ := wrapSplit(1, datagen.New(func(i int64) int64 { return i }).SplitSerializer(), datagen.Split{Num: 0, Next: 5, End: 100, Stride: 1})
	sp, _ := serde.Marshal(src.SplitSerializer(), ahead)
	r := newSim(t, src, 1, 1, 1, &simCkpt{enum: enc, splits: map[int][][]byte{0: {sp}}})
	r.poll(0)
	m := r.inbox[0]
	r.inbox = nil
	err = r.enum.(source.EnumeratorEventHandler).HandleSourceEvent(m.sub, m.event)
	if err == nil || !strings.Contains(err.Error(), "inconsistent") {
		t.Fatalf("got %v, want an inconsistent-checkpoint error", err)
	}
	r.close()
}

func TestSerializers(t *testing.T) {
	sp := Split{Source: 3, ID: "partition-7", Version: 2, Data: []byte{0, 1, 2, 255}}
	b, err := serde.Marshal(splitSerde, sp)
	if err != nil {
		t.Fatal(err)
	}
	got, err := serde.Unmarshal(splitSerde, b)
	if err != nil || got.Source != 3 || got.ID != sp.ID || got.Version != 2 || string(got.Data) != string(sp.Data) {
		t.Fatalf("split round trip: %+v, %v", got, err)
	}
	empty := Split{ID: "x"}
	if b, _ := serde.Marshal(splitSerde, empty); true {
		if got, err := serde.Unmarshal(splitSerde, b); err != nil || got.ID != "x" || len(got.Data) != 0 {
			t.Fatalf("empty split: %+v, %v", got, err)
		}
	}
	st := EnumState{Source: 1, Version: 4, State: []byte("state"), Pending: []Split{sp, empty}}
	b, err = serde.Marshal(stateSerde, st)
	if err != nil {
		t.Fatal(err)
	}
	gst, err := serde.Unmarshal(stateSerde, b)
	if err != nil || gst.Source != 1 || gst.Version != 4 || string(gst.State) != "state" || len(gst.Pending) != 2 || gst.Pending[0].ID != sp.ID {
		t.Fatalf("state round trip: %+v, %v", gst, err)
	}
	for n := 4; n < len(b); n++ {
		if _, err := serde.Unmarshal(stateSerde, b[:n]); !errors.Is(err, ErrCorruptState) {
			t.Fatalf("state truncated to %d bytes: %v", n, err)
		}
	}
	if _, err := stateSerde.Deserialize(2, b[4:]); !errors.Is(err, serde.ErrUnknownVersion) {
		t.Fatalf("version 2: %v", err)
	}
	if _, err := splitSerde.Deserialize(2, nil); !errors.Is(err, serde.ErrUnknownVersion) {
		t.Fatalf("split version 2: %v", err)
	}
}

func TestBuildErrors(t *testing.T) {
	bounded := Of(datagen.New(func(i int64) int64 { return i }, datagen.Count(5)))
	unbounded := Of(datagen.New(func(i int64) int64 { return i }))
	factory := func(SwitchContext) (Child[int64], error) { return unbounded, nil }
	for _, tc := range []struct {
		name string
		b    *Builder[int64]
	}{
		{"unbounded first", New(unbounded).AddSource(bounded)},
		{"unbounded factory in the middle", New(bounded).AddSourceFactory(factory, source.ContinuousUnbounded).AddSource(bounded)},
		{"zero source", New(bounded).AddSource(Child[int64]{})},
		{"nil factory", New(bounded).AddSourceFactory(nil, source.Bounded)},
		{"empty", &Builder[int64]{}},
	} {
		if _, err := tc.b.Build(); !errors.Is(err, ErrInvalidChain) {
			t.Errorf("%s: %v, want ErrInvalidChain", tc.name, err)
		}
	}
	src, err := New(bounded).AddSourceFactory(factory, source.ContinuousUnbounded).Build()
	if err != nil || src.Boundedness() != source.ContinuousUnbounded || src.NumSources() != 2 {
		t.Fatalf("bounded then unbounded: %v, %v", src, err)
	}
	// A factory whose source does not have the declared boundedness fails
	// the switch.
	bad, err := New(bounded).AddSourceFactory(factory, source.Bounded).Build()
	if err != nil {
		t.Fatal(err)
	}
	s := newSim(t, bad, 1, 1, 0, nil)
	s.poll(0)
	var switchErr error
	for i := 0; i < 100 && switchErr == nil; i++ {
		for _, m := range s.inbox {
			if m.request {
				switchErr = s.enum.HandleSplitRequest(m.sub, "")
			} else {
				switchErr = s.enum.(source.EnumeratorEventHandler).HandleSourceEvent(m.sub, m.event)
			}
			if switchErr != nil {
				break
			}
		}
		s.inbox = nil
		s.deliver(0, -1)
		s.poll(0)
	}
	if switchErr == nil || !strings.Contains(switchErr.Error(), "declared bounded") {
		t.Fatalf("switch error %v", switchErr)
	}
	s.close()
}
