package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/source"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a Clock whose time moves only with Advance; due timers fire
// synchronously inside Advance.
type fakeClock struct {
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at            time.Time
	f             func()
	fired, killed bool
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Unix(1000, 0)} }

func (c *fakeClock) Now() time.Time { return c.now }

func (c *fakeClock) AfterFunc(d time.Duration, f func()) func() bool {
	t := &fakeTimer{at: c.now.Add(d), f: f}
	c.timers = append(c.timers, t)
	return func() bool {
		if t.fired || t.killed {
			return false
		}
		t.killed = true
		return true
	}
}

// pending returns the earliest pending timer, or nil.
func (c *fakeClock) pending() *fakeTimer {
	var first *fakeTimer
	for _, t := range c.timers {
		if !t.fired && !t.killed && (first == nil || t.at.Before(first.at)) {
			first = t
		}
	}
	return first
}

func (c *fakeClock) Advance(d time.Duration) {
	c.now = c.now.Add(d)
	for t := c.pending(); t != nil && !t.at.After(c.now); t = c.pending() {
		t.fired = true
		t.f()
	}
}

// seqSplit is the one split of a seqReader: the next value to emit.
type seqSplit struct{ Next int64 }

func (seqSplit) SplitID() string { return "seq" }

// seqReader emits 0, 1, 2, … in polls of sizes[i%len(sizes)] records,
// up to total (0: endless). It counts the notices it gets.
type seqReader struct {
	sizes     []int
	polls     int
	next      int64
	total     int64
	avail     chan struct{}
	idle      bool // return NothingAvailable until unset
	completed []int64
	aborted   []int64
	committed []int64
	closed    bool
}

func (r *seqReader) Start(context.Context) error { return nil }
func (r *seqReader) PollNext(out source.Output[int64]) (source.InputStatus, error) {
	if r.idle {
		return source.NothingAvailable, nil
	}
	n := r.sizes[r.polls%len(r.sizes)]
	r.polls++
	so := out.ForSplit("seq")
	for ; n > 0 && (r.total == 0 || r.next < r.total); n-- {
		so.Collect(r.next)
		r.next++
	}
	if r.total > 0 && r.next >= r.total {
		return source.EndOfInput, nil
	}
	return source.MoreAvailable, nil
}
func (r *seqReader) Available() <-chan struct{} { return r.avail }
func (r *seqReader) AddSplits([]seqSplit) error { return nil }
func (r *seqReader) NotifyNoMoreSplits()        {}
func (r *seqReader) SnapshotState(int64) ([]seqSplit, error) {
	return []seqSplit{{r.next}}, nil
}
func (r *seqReader) Close() error { r.closed = true; return nil }
func (r *seqReader) NotifyCheckpointComplete(id int64) error {
	r.completed = append(r.completed, id)
	return nil
}
func (r *seqReader) NotifyCheckpointAborted(id int64) error {
	r.aborted = append(r.aborted, id)
	return nil
}
func (r *seqReader) NotifyCheckpointCommitted(id int64) error {
	r.committed = append(r.committed, id)
	return nil
}

// eventReader adds the optional reader interfaces.
type eventReader struct {
	*seqReader
	events []source.Event
	paused []string
}

func (r *eventReader) HandleSourceEvent(e source.Event) error {
	r.events = append(r.events, e)
	return nil
}
func (r *eventReader) PauseOrResumeSplits(pause, _ []string) error {
	r.paused = append(r.paused, pause...)
	return nil
}

// seqSource hands out one seqReader per CreateReader.
type seqSource struct {
	newReader func() source.Reader[int64, seqSplit]
}

func (s *seqSource) Boundedness() source.Boundedness { return source.ContinuousUnbounded }
func (s *seqSource) CreateEnumerator(source.EnumeratorContext[seqSplit]) (source.Enumerator[seqSplit, int], error) {
	return nil, errors.New("not used")
}
func (s *seqSource) RestoreEnumerator(source.EnumeratorContext[seqSplit], int) (source.Enumerator[seqSplit, int], error) {
	return nil, errors.New("not used")
}
func (s *seqSource) CreateReader(source.ReaderContext) (source.Reader[int64, seqSplit], error) {
	return s.newReader(), nil
}
func (s *seqSource) SplitSerializer() serde.Versioned[seqSplit] { return serde.JSON[seqSplit](1) }
func (s *seqSource) EnumeratorStateSerializer() serde.Versioned[int] {
	return serde.JSON[int](1)
}

type readerCtx struct{ subtask, parallelism int }

func (c readerCtx) SubtaskIndex() int                  { return c.subtask }
func (c readerCtx) Parallelism() int                   { return c.parallelism }
func (c readerCtx) Attempt() int                       { return 0 }
func (c readerCtx) SendSplitRequest()                  {}
func (c readerCtx) JobID() string                      { return "job" }
func (c readerCtx) SendEventToEnumerator(source.Event) {}
func (c readerCtx) Metrics() metrics.Group             { return metrics.Discard() }

// recorder is an Output that keeps the records.
type recorder struct {
	recs     []int64
	released []string
	idle     int
}

func (o *recorder) Collect(v int64)                      { o.recs = append(o.recs, v) }
func (o *recorder) CollectAt(v int64, _ int64)           { o.recs = append(o.recs, v) }
func (o *recorder) EmitWatermark(int64)                  {}
func (o *recorder) MarkIdle()                            { o.idle++ }
func (o *recorder) ForSplit(string) source.Output[int64] { return o }
func (o *recorder) ReleaseSplit(id string)               { o.released = append(o.released, id) }

func isReady(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// newThrottled wraps a seqReader with the strategy and returns both.
func newThrottled(t *testing.T, s Strategy, ctx readerCtx, clk Clock, inner *seqReader, opts ...Option) source.Reader[int64, seqSplit] {
	t.Helper()
	src := Wrap[int64, seqSplit, int](&seqSource{newReader: func() source.Reader[int64, seqSplit] { return inner }}, s,
		append([]Option{WithClock(clk)}, opts...)...)
	if err := src.Err(); err != nil {
		t.Fatal(err)
	}
	r, err := src.CreateReader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func poll(t *testing.T, r source.Reader[int64, seqSplit], out *recorder) source.InputStatus {
	t.Helper()
	st, err := r.PollNext(out)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestPerSecondSteps walks a 100 records/s limiter (burst 10, one record
// per poll) through time by hand: the bucket starts empty and the first
// poll waits for a whole burst; a reader out of tokens gets a timer channel
// that the clock closes exactly when the tokens for its next poll are
// there; idle time saves at most one burst beyond the next poll.
func TestPerSecondSteps(t *testing.T) {
	clk := newFakeClock()
	inner := &seqReader{sizes: []int{1}}
	r := newThrottled(t, PerSecond(200), readerCtx{0, 2}, clk, inner) // 100/s for this reader
	out := &recorder{}
	for i, s := range []struct {
		advance time.Duration
		emitted int
	}{
		{0, 0},
		{99 * time.Millisecond, 0},
		{time.Millisecond, 10},     // the first burst
		{25 * time.Millisecond, 2}, // 2.5 tokens, 0.5 left
		{5 * time.Millisecond, 1},  // 1.0
		{time.Hour, 11},            // saved: a burst beyond the next poll's one token
		{9 * time.Millisecond, 0},  // 0.9
		{time.Millisecond, 1},      // 1.0
	} {
		clk.Advance(s.advance)
		before := len(out.recs)
		for n := 0; poll(t, r, out) == source.MoreAvailable; n++ {
			if n > 100 {
				t.Fatal("never out of tokens")
			}
		}
		if got := len(out.recs) - before; got != s.emitted {
			t.Fatalf("step %d: emitted %d, want %d", i, got, s.emitted)
		}
		if ch := r.Available(); isReady(ch) {
			t.Fatalf("step %d: Available ready without tokens", i)
		}
	}
	// The timer is due exactly when the next token is there.
	ch := r.Available()
	next := clk.pending()
	if next == nil || next.at.Sub(clk.Now()) != 10*time.Millisecond {
		t.Fatalf("timer %v, want due in 10ms", next)
	}
	clk.Advance(10*time.Millisecond - 1)
	if isReady(ch) {
		t.Fatal("Available ready before its time")
	}
	clk.Advance(1)
	if !isReady(ch) {
		t.Fatal("Available not ready when its timer was due")
	}
	if !slices.Equal(out.recs, seq(len(out.recs))) {
		t.Fatalf("records %v", out.recs)
	}
}

func seq(n int) []int64 {
	s := make([]int64, n)
	for i := range s {
		s[i] = int64(i)
	}
	return s
}

// TestPerSecondNeverAhead drives limiters of several rates and poll sizes
// through 10 simulated seconds, always advancing the clock to the reader's
// next wake-up. At every step the records emitted so far stay within the
// documented bound (rate·t plus one poll's growth over the previous poll or
// the burst), and at the end the reader is not behind by more than a burst
// and a poll: the long-run rate is the configured one.
func TestPerSecondNeverAhead(t *testing.T) {
	for _, tc := range []struct {
		rate  float64
		p     int
		sizes []int
	}{
		{100, 1, []int{1}},
		{1000, 1, []int{7}},
		{10_000, 1, []int{1024}},
		{10_000, 4, []int{1024}},
		{5000, 2, []int{1, 300, 2, 1500, 64}},
		{3, 1, []int{2}},
	} {
		t.Run(fmt.Sprintf("rate=%v/p=%d/sizes=%v", tc.rate, tc.p, tc.sizes), func(t *testing.T) {
			clk := newFakeClock()
			start := clk.Now()
			inner := &seqReader{sizes: tc.sizes}
			r := newThrottled(t, PerSecond(tc.rate), readerCtx{0, tc.p}, clk, inner)
			per := tc.rate / float64(tc.p)
			burst := max(1, math.Floor(per/10))
			out := &recorder{}
			maxPoll := slices.Max(tc.sizes)
			const horizon = 10 * time.Second
			for step := 0; ; step++ {
				if step > 1_000_000 {
					t.Fatal("too many steps")
				}
				st := poll(t, r, out)
				el := clk.Now().Sub(start).Seconds()
				if bound := per*el + float64(maxPoll); float64(len(out.recs)) > bound+1e-6 {
					t.Fatalf("after %.3fs: %d records, bound %.1f", el, len(out.recs), bound)
				}
				if st == source.MoreAvailable {
					continue
				}
				next := clk.pending()
				if st != source.NothingAvailable || next == nil {
					t.Fatalf("status %v, timer %v", st, next)
				}
				ch := r.Available()
				if next.at.Sub(start) > horizon {
					break
				}
				clk.Advance(next.at.Sub(clk.Now()))
				if !isReady(ch) {
					t.Fatal("Available not ready after its timer fired")
				}
			}
			el := clk.Now().Sub(start).Seconds()
			if low := per*el - burst - float64(maxPoll); float64(len(out.recs)) < low {
				t.Fatalf("after %.3fs: %d records, want at least %.1f", el, len(out.recs), low)
			}
			if !slices.Equal(out.recs, seq(len(out.recs))) {
				t.Fatal("records lost or reordered")
			}
		})
	}
}

// TestSteadyPollsAreExact: with polls of steady size no larger than the
// burst, a reader is never ahead of rate·t at all.
func TestSteadyPollsAreExact(t *testing.T) {
	clk := newFakeClock()
	start := clk.Now()
	inner := &seqReader{sizes: []int{50}}
	r := newThrottled(t, PerSubtaskPerSecond(1000), readerCtx{1, 3}, clk, inner) // burst 100
	out := &recorder{}
	for step := 0; clk.Now().Sub(start) < 5*time.Second; step++ {
		if step > 100_000 {
			t.Fatal("too many steps")
		}
		if poll(t, r, out) == source.MoreAvailable {
			// The first poll waits for the burst (100), every later one
			// for 50 tokens: never ahead of the rate.
			if el := clk.Now().Sub(start).Seconds(); float64(len(out.recs)) > 1000*el+1e-6 {
				t.Fatalf("after %.3fs: %d records", el, len(out.recs))
			}
			continue
		}
		clk.Advance(clk.pending().at.Sub(clk.Now()))
	}
	if got := len(out.recs); got < 4900 || got > 5050 {
		t.Fatalf("%d records in 5 s at 1000/s", got)
	}
}

// TestPerCheckpoint: a reader spends its share (10 records over 3 readers:
// 4, 3, 3), then waits for its next snapshot; completions do not renew.
// Overspending is repaid from the next share.
func TestPerCheckpoint(t *testing.T) {
	for _, tc := range []struct {
		subtask, share int
	}{{0, 4}, {1, 3}, {2, 3}} {
		clk := newFakeClock()
		inner := &seqReader{sizes: []int{1}}
		r := newThrottled(t, PerCheckpoint(10), readerCtx{tc.subtask, 3}, clk, inner)
		out := &recorder{}
		for cycle := range 3 {
			for i := range tc.share {
				if st := poll(t, r, out); st != source.MoreAvailable && i < tc.share-1 {
					t.Fatalf("subtask %d cycle %d: %v after %d records", tc.subtask, cycle, st, i+1)
				}
			}
			if st := poll(t, r, out); st != source.NothingAvailable {
				t.Fatalf("subtask %d cycle %d: share spent but %v", tc.subtask, cycle, st)
			}
			ch := r.Available()
			if isReady(ch) {
				t.Fatal("gate open before the checkpoint")
			}
			if err := r.(source.CheckpointListener).NotifyCheckpointComplete(int64(cycle)); err != nil {
				t.Fatal(err)
			}
			if isReady(ch) || poll(t, r, out) != source.NothingAvailable {
				t.Fatal("PerCheckpoint renewed on completion")
			}
			ch = r.Available()
			if _, err := r.SnapshotState(int64(cycle + 1)); err != nil {
				t.Fatal(err)
			}
			if !isReady(ch) {
				t.Fatal("gate still closed after the snapshot")
			}
			if want := (cycle + 1) * tc.share; len(out.recs) != want {
				t.Fatalf("subtask %d: %d records after cycle %d, want %d", tc.subtask, len(out.recs), cycle, want)
			}
		}
		if clk.pending() != nil {
			t.Fatal("a per-checkpoint limiter armed a timer")
		}
	}
}

// TestPerCompletedCheckpoint: Flink's gate opens on completion, not on a
// snapshot; the notice still reaches the wrapped reader.
func TestPerCompletedCheckpoint(t *testing.T) {
	inner := &seqReader{sizes: []int{2}}
	r := newThrottled(t, PerCompletedCheckpoint(4), readerCtx{0, 1}, newFakeClock(), inner)
	out := &recorder{}
	poll(t, r, out)
	if st := poll(t, r, out); st != source.NothingAvailable || len(out.recs) != 4 {
		t.Fatalf("%v with %d records, want NothingAvailable with 4", st, len(out.recs))
	}
	ch := r.Available()
	if _, err := r.SnapshotState(1); err != nil {
		t.Fatal(err)
	}
	if isReady(ch) || poll(t, r, out) != source.NothingAvailable {
		t.Fatal("PerCompletedCheckpoint renewed on a snapshot")
	}
	ch = r.Available()
	if err := r.(source.CheckpointListener).NotifyCheckpointComplete(1); err != nil {
		t.Fatal(err)
	}
	if !isReady(ch) {
		t.Fatal("gate still closed after the completion")
	}
	poll(t, r, out)
	poll(t, r, out)
	if len(out.recs) != 8 || !slices.Equal(inner.completed, []int64{1}) {
		t.Fatalf("%d records, inner completions %v", len(out.recs), inner.completed)
	}
}

// TestPerCheckpointDebt: polls of growing size overshoot the share; the
// overshoot is missing from the next shares, so the first k intervals hold
// at most k·share plus one poll.
func TestPerCheckpointDebt(t *testing.T) {
	inner := &seqReader{sizes: []int{1, 6, 2, 9, 1, 1, 3}}
	r := newThrottled(t, PerCheckpoint(5), readerCtx{0, 1}, newFakeClock(), inner)
	out := &recorder{}
	var perInterval []int
	for k := 1; k <= 40; k++ {
		before := len(out.recs)
		for i := 0; poll(t, r, out) == source.MoreAvailable; i++ {
			if i > 100 {
				t.Fatal("gate never closes")
			}
		}
		perInterval = append(perInterval, len(out.recs)-before)
		if len(out.recs) > k*5+9 {
			t.Fatalf("after %d intervals %d records, bound %d (intervals %v)", k, len(out.recs), k*5+9, perInterval)
		}
		if _, err := r.SnapshotState(int64(k)); err != nil {
			t.Fatal(err)
		}
	}
	if len(out.recs) < 40*5/2 {
		t.Fatalf("only %d records in 40 intervals of 5: %v", len(out.recs), perInterval)
	}
	t.Logf("records per interval: %v", perInterval)
}

// TestWaitsForInnerAndEnds: NothingAvailable of the wrapped reader hands
// out its Available channel; EndOfInput passes through.
func TestWaitsForInnerAndEnds(t *testing.T) {
	clk := newFakeClock()
	avail := make(chan struct{})
	inner := &seqReader{sizes: []int{3}, total: 7, avail: avail, idle: true}
	r := newThrottled(t, PerSubtaskPerSecond(1000), readerCtx{0, 1}, clk, inner)
	out := &recorder{}
	if st := poll(t, r, out); st != source.NothingAvailable || r.Available() == (<-chan struct{})(avail) {
		t.Fatalf("empty bucket: %v, want NothingAvailable waiting for the timer", st)
	}
	clk.Advance(100 * time.Millisecond) // the first burst
	if st := poll(t, r, out); st != source.NothingAvailable || r.Available() != (<-chan struct{})(avail) {
		t.Fatalf("idle inner reader: %v, want NothingAvailable with its channel", st)
	}
	inner.idle = false
	clk.Advance(time.Second)
	var sts []source.InputStatus
	for range 3 {
		sts = append(sts, poll(t, r, out))
	}
	want := []source.InputStatus{source.MoreAvailable, source.MoreAvailable, source.EndOfInput}
	if !slices.Equal(sts, want) || !slices.Equal(out.recs, seq(7)) {
		t.Fatalf("statuses %v, records %v; want %v and 0..6", sts, out.recs, want)
	}
}

// TestPassThrough: optional interfaces of the wrapped reader pass through
// exactly when it has them; notices reach it; Close stops the timer.
func TestPassThrough(t *testing.T) {
	clk := newFakeClock()
	plain := &seqReader{sizes: []int{1}}
	r := newThrottled(t, PerSecond(10), readerCtx{0, 1}, clk, plain)
	if _, ok := r.(source.ReaderEventHandler); ok {
		t.Error("plain reader became an event handler")
	}
	if _, ok := r.(source.SplitPauser); ok {
		t.Error("plain reader became a split pauser")
	}
	if err := r.(source.CheckpointAbortListener).NotifyCheckpointAborted(3); err != nil || !slices.Equal(plain.aborted, []int64{3}) {
		t.Errorf("abort notice: %v, inner got %v", err, plain.aborted)
	}
	if err := r.(source.CommitListener).NotifyCheckpointCommitted(4); err != nil || !slices.Equal(plain.committed, []int64{4}) {
		t.Errorf("committed notice: %v, inner got %v", err, plain.committed)
	}
	if poll(t, r, &recorder{}) != source.NothingAvailable || clk.pending() == nil {
		t.Fatal("no timer armed")
	}
	if err := r.Close(); err != nil || !plain.closed {
		t.Fatalf("Close: %v, inner closed %v", err, plain.closed)
	}
	if clk.pending() != nil {
		t.Error("Close left the timer armed")
	}

	ev := &eventReader{seqReader: &seqReader{sizes: []int{1}}}
	src := Wrap[int64, seqSplit, int](&seqSource{newReader: func() source.Reader[int64, seqSplit] { return ev }}, PerCheckpoint(5))
	r2, err := src.CreateReader(readerCtx{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	h, ok := r2.(source.ReaderEventHandler)
	if !ok {
		t.Fatal("event handler lost")
	}
	pa, ok := r2.(source.SplitPauser)
	if !ok {
		t.Fatal("split pauser lost")
	}
	if err := h.HandleSourceEvent("hello"); err != nil {
		t.Fatal(err)
	}
	if err := pa.PauseOrResumeSplits([]string{"seq"}, nil); err != nil {
		t.Fatal(err)
	}
	if len(ev.events) != 1 || !slices.Equal(ev.paused, []string{"seq"}) {
		t.Fatalf("events %v, paused %v", ev.events, ev.paused)
	}
	// The snapshot is the wrapped reader's.
	out := &recorder{}
	poll(t, r2, out)
	if ss, err := r2.SnapshotState(1); err != nil || len(ss) != 1 || ss[0].Next != 1 {
		t.Fatalf("snapshot %v, %v", ss, err)
	}
}

func TestInvalidStrategies(t *testing.T) {
	src := &seqSource{newReader: func() source.Reader[int64, seqSplit] { return &seqReader{sizes: []int{1}} }}
	for _, tc := range []struct {
		name string
		s    Strategy
		opts []Option
		ctx  readerCtx
	}{
		{"zero", Strategy{}, nil, readerCtx{0, 1}},
		{"PerSecond(0)", PerSecond(0), nil, readerCtx{0, 1}},
		{"PerSecond(NaN)", PerSecond(math.NaN()), nil, readerCtx{0, 1}},
		{"PerSubtaskPerSecond(+Inf)", PerSubtaskPerSecond(math.Inf(1)), nil, readerCtx{0, 1}},
		{"PerCheckpoint(0)", PerCheckpoint(0), nil, readerCtx{0, 1}},
		{"PerCompletedCheckpoint(-1)", PerCompletedCheckpoint(-1), nil, readerCtx{0, 1}},
		{"share of 0", PerCheckpoint(3), nil, readerCtx{3, 4}},
		{"Burst(0)", PerSecond(1), []Option{Burst(0)}, readerCtx{0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := Wrap[int64, seqSplit, int](src, tc.s, tc.opts...)
			_, err := w.CreateReader(tc.ctx)
			if !errors.Is(err, ErrInvalidStrategy) {
				t.Fatalf("CreateReader: %v, want ErrInvalidStrategy", err)
			}
			t.Log(err)
		})
	}
	// The share of 3 over 4 readers: readers 0-2 get one record each.
	if _, err := Wrap[int64, seqSplit, int](src, PerCheckpoint(3)).CreateReader(readerCtx{2, 4}); err != nil {
		t.Fatal(err)
	}
}
