package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// The alignment tests use a scripted source whose readers emit perPoll
// records of one split per PollNext (round-robin over their splits), with
// event time Pos*step of the split, and then the split's watermark (its
// largest timestamp minus one) themselves, so that a split's watermark
// moves with every poll instead of with the wall-clock watermark ticks.
// Every poll is logged, in real-time order across all readers (one mutex),
// and the bound is asserted on that log:
//
//	while the slow split is unfinished, every timestamp the fast split
//	emits is ≤ maxSlow + maxDrift + perPoll·stepFast,
//
// where maxSlow is the largest timestamp the slow split emitted before.
// Why this holds: a split (or a subtask) is polled only if, at its last
// alignment check, its watermark w was ≤ the group's maximum allowed
// watermark, which is the minimum of the reported watermarks plus
// maxDrift, and the slow side's report is at most its watermark maxSlow-1.
// Its last emitted timestamp was w+1 ≤ maxSlow+maxDrift, and the next
// poll adds at most perPoll records of stepFast each. Checks run after
// every poll that moved a split's watermark, so no poll is missed. The
// subtask tests hold the fast reader until the slow reader has started its
// second poll, i.e. until the slow subtask has reported once: before that,
// as in Flink, nothing bounds the fast one.

const (
	alignDrift   = 100 * time.Millisecond // 100 units of event time
	alignPerPoll = 10
)

// alignLog records what the test readers emitted, in order.
type alignLog struct {
	mu      sync.Mutex
	polls   []alignPoll
	starts  map[string]int // PollNext calls, by the reader's first split
	pauses  map[string]int // PauseOrResumeSplits, by split
	resumes map[string]int
	gates   map[string]chan struct{} // closed when starts[key] reaches 2
	ends    map[string]chan struct{} // closed when the split's last record is out
}

// alignPoll is one poll that emitted records of a split, or (event set)
// a pause or resume of the split.
type alignPoll struct {
	split string
	n     int   // records emitted
	last  int64 // largest timestamp emitted
	end   bool  // the split's last record
	event string
}

func newAlignLog() *alignLog {
	return &alignLog{starts: map[string]int{}, pauses: map[string]int{}, resumes: map[string]int{},
		gates: map[string]chan struct{}{}, ends: map[string]chan struct{}{}}
}

// ended reports whether the split emitted its last record, and returns a
// channel closed when it does.
func (l *alignLog) ended(split string) (bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return isDone(l.endC(split)), l.endC(split)
}

func (l *alignLog) endC(split string) chan struct{} {
	c := l.ends[split]
	if c == nil {
		c = make(chan struct{})
		l.ends[split] = c
	}
	return c
}

func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// gate returns a channel that is closed once the reader of split key has
// started its second PollNext.
func (l *alignLog) gate(key string) (open bool, ch <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.gates[key]
	if c == nil {
		c = make(chan struct{})
		l.gates[key] = c
	}
	return l.starts[key] >= 2, c
}

func (l *alignLog) started(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.starts[key]++
	if l.starts[key] == 2 {
		if c := l.gates[key]; c != nil {
			close(c)
		} else {
			c = make(chan struct{})
			close(c)
			l.gates[key] = c
		}
	}
}

func (l *alignLog) emitted(p alignPoll) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.polls = append(l.polls, p)
	if p.end {
		close(l.endC(p.split))
	}
}

func (l *alignLog) count(split string) (n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, p := range l.polls {
		if p.split == split {
			n += p.n
		}
	}
	return n
}

func (l *alignLog) pausedNow(split string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pauses[split] > l.resumes[split]
}

// checkBound asserts the bound above and returns the first violation, or
// "" if there is none.
func (l *alignLog) checkBound(fast, slow string, stepFast int64) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	maxSlow, slowSeen, slowDone := int64(0), false, false
	for i, p := range l.polls {
		switch {
		case p.event != "":
		case p.split == slow:
			maxSlow, slowSeen, slowDone = p.last, true, p.end
		case p.split == fast && !slowDone:
			if !slowSeen {
				return fmt.Sprintf("poll %d: %s emitted up to %d before %s emitted anything", i, fast, p.last, slow)
			}
			if limit := maxSlow + alignDrift.Milliseconds() + alignPerPoll*stepFast; p.last > limit {
				return fmt.Sprintf("poll %d: %s emitted timestamp %d > %d (%s's %d + drift %d + one poll %d)",
					i, fast, p.last, limit, slow, maxSlow, alignDrift.Milliseconds(), alignPerPoll*stepFast)
			}
		}
	}
	return ""
}

// pausedEarlyOnly checks that split was paused only before other emitted
// its first records: until every split of a reader has a watermark, the
// reader's watermark is Min, so the group's bound is Min+drift and a split
// with a watermark waits (as in Flink).
func (l *alignLog) pausedEarlyOnly(split, other string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := false
	for i, p := range l.polls {
		switch {
		case p.split == other && p.event == "":
			seen = true
		case p.split == split && p.event == "pause" && seen:
			return fmt.Sprintf("event %d: %s paused after %s emitted records", i, split, other)
		}
	}
	return ""
}

// alignSource is a scriptSource (enumerator: every split assigned at
// start, round-robin over the subtasks, in the order of splits) with
// readers that emit their own split watermarks and log their polls.
type alignSource struct {
	*scriptSource
	step     map[string]int64
	log      *alignLog
	noPauser bool
	// hold keeps a split from being read while it returns true; ch is
	// ready when that may have changed. It runs on the reader's goroutine.
	hold func(sp rangeSplit) (held bool, ch <-chan struct{})
}

func newAlignSource(log *alignLog, splits ...alignSplit) *alignSource {
	s := &alignSource{scriptSource: &scriptSource{}, step: map[string]int64{}, log: log}
	for _, sp := range splits {
		s.splits = append(s.splits, rangeSplit{ID: sp.id, End: sp.end})
		s.step[sp.id] = sp.step
	}
	return s
}

type alignSplit struct {
	id        string
	end, step int64
}

func (s *alignSource) CreateEnumerator(ctx sourceEnumCtx) (sourceEnum, error) {
	return (&pushAll{s.scriptSource}).CreateEnumerator(ctx)
}

func (s *alignSource) CreateReader(ctx source.ReaderContext) (source.Reader[rec, rangeSplit], error) {
	r := &alignReader{s: s, paused: map[string]bool{}, never: make(chan struct{})}
	if s.noPauser {
		return plainReader{r}, nil
	}
	return r, nil
}

// plainReader hides the reader's PauseOrResumeSplits.
type plainReader struct{ source.Reader[rec, rangeSplit] }

type alignReader struct {
	s      *alignSource
	splits []rangeSplit
	paused map[string]bool
	noMore bool
	wait   <-chan struct{}
	never  chan struct{}
	key    string // the first split's id
}

func (r *alignReader) Start(context.Context) error { return nil }

func (r *alignReader) PollNext(out source.Output[rec]) (source.InputStatus, error) {
	r.s.log.started(r.key)
	r.wait = r.never
	if len(r.splits) == 0 {
		if r.noMore {
			return source.EndOfInput, nil
		}
		return source.NothingAvailable, nil
	}
	k := -1
	for i, sp := range r.splits {
		out.ForSplit(sp.ID) // every split holds the reader's watermark back
		if k >= 0 || r.paused[sp.ID] {
			continue
		}
		if r.s.hold != nil {
			if held, ch := r.s.hold(sp); held {
				r.wait = ch
				continue
			}
		}
		k = i
	}
	if k < 0 {
		// Nothing to read: paused splits wait for the runtime to resume
		// them (it polls again then), held ones for their channel.
		return source.NothingAvailable, nil
	}
	r.splits = append(r.splits[k:], r.splits[:k]...)
	sp := &r.splits[0]
	so := out.ForSplit(sp.ID)
	step := r.s.step[sp.ID]
	p := alignPoll{split: sp.ID}
	for ; p.n < alignPerPoll && sp.Next < sp.End; p.n++ {
		p.last = sp.Next * step
		so.CollectAt(rec{sp.ID, sp.Next}, p.last)
		sp.Next++
	}
	so.EmitWatermark(p.last - 1)
	p.end = sp.Next >= sp.End
	r.s.log.emitted(p)
	if p.end {
		out.ReleaseSplit(sp.ID)
		r.splits = r.splits[1:]
	} else {
		r.splits = append(r.splits[1:], r.splits[0])
	}
	return source.MoreAvailable, nil
}

func (r *alignReader) PauseOrResumeSplits(pause, resume []string) error {
	r.s.log.mu.Lock()
	defer r.s.log.mu.Unlock()
	for _, id := range pause {
		r.paused[id] = true
		r.s.log.pauses[id]++
		r.s.log.polls = append(r.s.log.polls, alignPoll{split: id, event: "pause"})
	}
	for _, id := range resume {
		delete(r.paused, id)
		r.s.log.resumes[id]++
		r.s.log.polls = append(r.s.log.polls, alignPoll{split: id, event: "resume"})
	}
	return nil
}

func (r *alignReader) Available() <-chan struct{} { return r.wait }

func (r *alignReader) AddSplits(splits []rangeSplit) error {
	r.splits = append(r.splits, splits...)
	if r.key == "" && len(r.splits) > 0 {
		r.key = r.splits[0].ID
	}
	return nil
}

func (r *alignReader) NotifyNoMoreSplits()                       { r.noMore = true }
func (r *alignReader) SnapshotState(int64) ([]rangeSplit, error) { return slices.Clone(r.splits), nil }
func (r *alignReader) Close() error                              { return nil }

// eventSink records, per subtask and in order, the records with their
// timestamps and the watermark current at each, and checks nothing arrives
// behind the watermark.
type eventSink struct {
	mu   sync.Mutex
	recs []rec
	late []rec
	back []string
}

func (s *eventSink) CreateWriter(context.Context, sink.InitContext) (sink.Writer[rec], error) {
	return &eventWriter{s: s, wm: watermark.Min}, nil
}

type eventWriter struct {
	s  *eventSink
	wm int64
}

func (w *eventWriter) Write(ctx context.Context, v rec, c sink.Meta) error {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	w.s.recs = append(w.s.recs, v)
	if !c.HasTimestamp || c.Timestamp <= c.Watermark {
		w.s.late = append(w.s.late, v)
	}
	return nil
}

func (w *eventWriter) WriteWatermark(ctx context.Context, wm int64) error {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if wm < w.wm {
		w.s.back = append(w.s.back, fmt.Sprintf("%d after %d", wm, w.wm))
	}
	w.wm = wm
	return nil
}

func (w *eventWriter) Flush(context.Context, bool) error { return nil }
func (w *eventWriter) Close() error                      { return nil }

func (s *eventSink) check(t *testing.T, splits []rangeSplit) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	expectExactlyOnce(t, splits, s.recs)
	if len(s.late) > 0 {
		t.Errorf("%d records at or behind the watermark, first %v", len(s.late), s.late[0])
	}
	if len(s.back) > 0 {
		t.Errorf("watermark went back: %v", s.back[0])
	}
}

func alignEnv(opts ...stream.Option) *stream.Environment {
	return stream.New(append([]stream.Option{stream.WatermarkInterval(time.Millisecond), stream.BufferTimeout(time.Millisecond),
		stream.CheckpointEvery(5 * time.Millisecond), stream.Logger(engine.DiscardLogger())}, opts...)...)
}

func aligned(group string) watermark.Strategy[rec] {
	return watermark.Monotonous[rec]().WithWatermarkAlignment(group, alignDrift, time.Millisecond)
}

func execute(t *testing.T, env *stream.Environment) (*engine.Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	return env.Execute(ctx, "align")
}

// TestAlignSplitsOfOneReader (FLIP-217): one reader, a slow split (event
// time +1 per record) and a fast one (+10), read in turn. With alignment
// the fast split is paused whenever its watermark is more than the drift
// ahead of the slow one's and resumed when the slow one caught up; every
// fast timestamp stays within the bound (see the top of this file). The
// control run without alignment breaks the bound, so the test can fail.
func TestAlignSplitsOfOneReader(t *testing.T) {
	for _, align := range []bool{true, false} {
		t.Run(fmt.Sprint("aligned=", align), func(t *testing.T) {
			log := newAlignLog()
			src := newAlignSource(log, alignSplit{"slow", 3000, 1}, alignSplit{"fast", 300, 10})
			ws := watermark.Monotonous[rec]()
			if align {
				ws = aligned("g")
			}
			env := alignEnv()
			out := &eventSink{}
			stream.SinkTo(stream.FromSource(env, src, ws, "src"), out, "sink")
			if _, err := execute(t, env); err != nil {
				t.Fatal(err)
			}
			out.check(t, src.splits)
			violation := log.checkBound("fast", "slow", 10)
			if !align {
				if violation == "" {
					t.Fatal("without alignment the fast split stayed within the bound; the test proves nothing")
				}
				return
			}
			if violation != "" {
				t.Fatal(violation)
			}
			if log.pauses["fast"] == 0 || log.resumes["fast"] == 0 {
				t.Errorf("pauses %v, resumes %v; want the fast split paused and resumed", log.pauses, log.resumes)
			}
			if v := log.pausedEarlyOnly("slow", "fast"); v != "" {
				t.Error(v)
			}
		})
	}
}

// TestAlignSubtasks (FLIP-182): a fast and a slow split on two source
// subtasks — of one source, or of two sources in one alignment group. The
// fast subtask stops polling its reader while it is ahead by more than the
// drift, and every fast timestamp stays within the bound. Two sources in
// different groups are not aligned (the control: there the slow reader
// waits after two polls until the fast split is done, so the bound breaks
// for sure).
func TestAlignSubtasks(t *testing.T) {
	for _, tc := range []struct {
		name        string
		oneSource   bool
		groupB      string
		wantAligned bool
	}{
		{"one source, two subtasks", true, "g", true},
		{"two sources, one group", false, "g", true},
		{"two sources, two groups", false, "other", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := newAlignLog()
			hold := func(sp rangeSplit) (bool, <-chan struct{}) {
				switch {
				case sp.ID == "fast":
					// Not before the slow subtask reported once (it
					// reports after its first poll).
					open, ch := log.gate("slow")
					return !open, ch
				case !tc.wantAligned && sp.Next >= 2*alignPerPoll:
					// Unaligned: the slow reader waits after two polls
					// until the fast split is done.
					done, ch := log.ended("fast")
					return !done, ch
				}
				return false, nil
			}
			fastSplit, slowSplit := alignSplit{"fast", 300, 10}, alignSplit{"slow", 3000, 1}
			env := alignEnv(stream.Parallelism(2))
			out := &eventSink{}
			var all []rangeSplit
			if tc.oneSource {
				src := newAlignSource(log, fastSplit, slowSplit) // fast → subtask 0, slow → 1
				src.hold = hold
				all = src.splits
				stream.SinkTo(stream.FromSource(env, src, aligned("g"), "src"), out, "sink")
			} else {
				fast, slow := newAlignSource(log, fastSplit), newAlignSource(log, slowSplit)
				fast.hold, slow.hold = hold, hold
				all = append(slices.Clone(fast.splits), slow.splits...)
				stream.SinkTo(stream.FromSource(env, fast, aligned("g"), "fast", stream.WithParallelism(1)), out, "sink-fast", stream.WithParallelism(1))
				stream.SinkTo(stream.FromSource(env, slow, aligned(tc.groupB), "slow", stream.WithParallelism(1)), out, "sink-slow", stream.WithParallelism(1))
			}
			if _, err := execute(t, env); err != nil {
				t.Fatal(err)
			}
			out.check(t, all)
			violation := log.checkBound("fast", "slow", fastSplit.step)
			if tc.wantAligned && violation != "" {
				t.Fatal(violation)
			}
			if !tc.wantAligned && violation == "" {
				t.Fatal("sources in different groups stayed within the bound; the test proves nothing")
			}
			if n := len(log.pauses) + len(log.resumes); n != 0 {
				t.Errorf("split pauses %v, resumes %v; a reader with one split pauses as a whole", log.pauses, log.resumes)
			}
		})
	}
}

// TestAlignCheckpointsWhilePaused: the slow split reads two polls and then
// waits until the test releases it, so the fast side stays paused — the
// fast subtask (its drift metric above the maximum) or the fast split of
// the same reader. Two checkpoints triggered after the pause began
// complete while the fast side emits nothing; after the release the job
// finishes with every record once and within the bound.
func TestAlignCheckpointsWhilePaused(t *testing.T) {
	for _, splitLevel := range []bool{false, true} {
		t.Run(fmt.Sprint("split level=", splitLevel), func(t *testing.T) {
			log := newAlignLog()
			release := make(chan struct{})
			par := 2 // fast → subtask 0, slow → subtask 1
			splits := []alignSplit{{"fast", 1000, 10}, {"slow", 3000, 1}}
			if splitLevel {
				par = 1 // both on one reader, slow first
				splits[0], splits[1] = splits[1], splits[0]
			}
			src := newAlignSource(log, splits...)
			src.hold = func(sp rangeSplit) (bool, <-chan struct{}) {
				switch sp.ID {
				case "fast":
					open, ch := log.gate("slow")
					return !open, ch
				case "slow":
					select {
					case <-release:
					default:
						if sp.Next >= 2*alignPerPoll {
							return true, release
						}
					}
				}
				return false, nil
			}
			out := &eventSink{}
			env := alignEnv(stream.Parallelism(par))
			stream.SinkTo(stream.FromSource(env, src, aligned("g"), "src"), out, "sink")
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			h, err := env.Start(ctx, "paused")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { h.Cancel(); _, _ = h.Wait() })
			drift := func() int64 {
				return h.Metrics().Sum("watermarkAlignmentDrift", "operator", "src", "subtask", "0")
			}
			paused := func() bool {
				if splitLevel {
					return log.pausedNow("fast")
				}
				return drift() > alignDrift.Milliseconds()
			}
			for i := 0; !paused(); i++ {
				if i > 5000 {
					t.Fatalf("the fast side was not paused within 10s (drift %d, log pauses %v)", drift(), log.pauses)
				}
				time.Sleep(2 * time.Millisecond)
			}
			emitted, done := log.count("fast"), h.Status().Checkpoints.Completed
			waitCheckpoints(t, h, done+2)
			if n := log.count("fast"); n != emitted || !paused() {
				t.Errorf("while paused: fast emitted %d more records, still paused %v", n-emitted, paused())
			}
			close(release)
			res, err := h.Wait()
			if err != nil {
				t.Fatal(err)
			}
			if res.Checkpoints.Completed < done+2 {
				t.Errorf("%d checkpoints completed, want at least %d", res.Checkpoints.Completed, done+2)
			}
			out.check(t, src.splits)
			if v := log.checkBound("fast", "slow", 10); v != "" {
				t.Fatal(v)
			}
		})
	}
}

// TestAlignIdleSubtaskDoesNotHoldBack: the slow subtask reads two polls
// and then has no data until the fast split is done; the fast one starts
// after the slow one reported. The slow split goes idle (idleness
// timeout), so its subtask reports the maximum watermark, as in Flink, and
// the fast subtask reads on far beyond the slow one's watermark to its end
// instead of waiting forever.
func TestAlignIdleSubtaskDoesNotHoldBack(t *testing.T) {
	log := newAlignLog()
	src := newAlignSource(log, alignSplit{"fast", 300, 10}, alignSplit{"slow", 300, 1})
	src.hold = func(sp rangeSplit) (bool, <-chan struct{}) {
		switch {
		case sp.ID == "fast":
			open, ch := log.gate("slow")
			return !open, ch
		case sp.ID == "slow" && sp.Next >= 2*alignPerPoll:
			done, ch := log.ended("fast")
			return !done, ch
		}
		return false, nil
	}
	env := alignEnv(stream.Parallelism(2))
	out := &eventSink{}
	ws := aligned("g").WithIdleness(5 * time.Millisecond)
	stream.SinkTo(stream.FromSource(env, src, ws, "src"), out, "sink")
	if _, err := execute(t, env); err != nil {
		t.Fatal(err)
	}
	out.mu.Lock()
	out.late = nil // the slow split's records after its idleness are late, as they should be
	out.mu.Unlock()
	out.check(t, src.splits)
	if log.checkBound("fast", "slow", 10) == "" {
		t.Fatal("the fast split never went beyond the bound: the idle subtask held it back")
	}
}

// TestAlignBadConfiguration: invalid alignment settings fail the job at
// start with an error naming the source and the setting; a reader that
// holds several splits without implementing source.SplitPauser fails the
// job naming the source, unless unaligned source splits are allowed.
func TestAlignBadConfiguration(t *testing.T) {
	for _, tc := range []struct {
		name string
		ws   watermark.Strategy[rec]
		want string
	}{
		{"zero drift", watermark.Monotonous[rec]().WithWatermarkAlignment("g", 0, 0), "max allowed drift is 0s"},
		{"negative drift", watermark.Monotonous[rec]().WithWatermarkAlignment("g", -time.Second, 0), "max allowed drift is -1s"},
		{"drift below 1ms", watermark.Monotonous[rec]().WithWatermarkAlignment("g", time.Microsecond, 0), "at least 1ms"},
		{"no group", watermark.Monotonous[rec]().WithWatermarkAlignment("", time.Second, 0), "group name is empty"},
		{"negative interval", watermark.Monotonous[rec]().WithWatermarkAlignment("g", time.Second, -time.Second), "update interval -1s is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := alignEnv()
			src := newAlignSource(newAlignLog(), alignSplit{"a", 10, 1})
			stream.SinkTo(stream.FromSource(env, src, tc.ws, "orders"), &eventSink{}, "sink")
			_, err := env.Build("bad")
			if !errors.Is(err, engine.ErrInvalidJob) || !errors.Is(err, watermark.ErrInvalidAlignment) ||
				!strings.Contains(err.Error(), `source "orders"`) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v; want an invalid job naming source \"orders\" and %q", err, tc.want)
			}
		})
	}
	t.Run("no periodic watermarks", func(t *testing.T) {
		env := alignEnv(stream.WatermarkInterval(-1))
		src := newAlignSource(newAlignLog(), alignSplit{"a", 10, 1})
		stream.SinkTo(stream.FromSource(env, src, aligned("g"), "orders"), &eventSink{}, "sink")
		_, err := execute(t, env)
		if err == nil || !strings.Contains(err.Error(), "orders") || !strings.Contains(err.Error(), "needs periodic watermarks") {
			t.Fatalf("got %v; want a failure naming the source and the watermark interval", err)
		}
	})
	for _, allow := range []string{"", "job option", "strategy"} {
		t.Run("reader without SplitPauser, allowed="+allow, func(t *testing.T) {
			log := newAlignLog()
			src := newAlignSource(log, alignSplit{"slow", 300, 1}, alignSplit{"fast", 300, 10})
			src.noPauser = true
			var opts []stream.Option
			ws := aligned("g")
			switch allow {
			case "job option":
				opts = append(opts, stream.AllowUnalignedSourceSplits())
			case "strategy":
				ws = ws.WithUnalignedSourceSplits()
			}
			env := alignEnv(opts...)
			out := &eventSink{}
			stream.SinkTo(stream.FromSource(env, src, ws, "orders"), out, "sink")
			_, err := execute(t, env)
			if allow != "" {
				if err != nil {
					t.Fatal(err)
				}
				out.check(t, src.splits)
				return
			}
			if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), `source "orders"`) ||
				!strings.Contains(err.Error(), "SplitPauser") {
				t.Fatalf("got %v; want a failure naming the source and source.SplitPauser", err)
			}
		})
	}
}

// pauseCounting wraps a source so that its readers count the splits the
// runtime pauses and resumes.
type pauseCounting struct {
	*datagen.Source[int64]
	mu              sync.Mutex
	pauses, resumes map[string]int
}

func (p *pauseCounting) CreateReader(ctx source.ReaderContext) (source.Reader[int64, datagen.Split], error) {
	r, err := p.Source.CreateReader(ctx)
	return &countingPauser{Reader: r, p: p}, err
}

func (p *pauseCounting) counts(split string) (pauses, resumes int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pauses[split], p.resumes[split]
}

type countingPauser struct {
	source.Reader[int64, datagen.Split]
	p *pauseCounting
}

func (c *countingPauser) PauseOrResumeSplits(pause, resume []string) error {
	c.p.mu.Lock()
	for _, id := range pause {
		c.p.pauses[id]++
	}
	for _, id := range resume {
		c.p.resumes[id]++
	}
	c.p.mu.Unlock()
	return c.Reader.(source.SplitPauser).PauseOrResumeSplits(pause, resume)
}

var _ source.Source[int64, datagen.Split, datagen.EnumState] = (*pauseCounting)(nil)

// TestAlignDatagenSplits: a datagen reader with two endless splits whose
// event time advances 100 times faster on split-1, watermarks from the
// strategy's generators (so they move at the wall-clock watermark ticks).
// Alignment pauses split-1 and resumes it once split-0 caught up (split-0
// may be paused too: between two ticks it reads far more than the drift);
// the job then stops cleanly, every split's output a gap-free prefix.
func TestAlignDatagenSplits(t *testing.T) {
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Splits(2), datagen.PushAssignment(),
		datagen.Timestamps(func(i int64) int64 {
			if i%2 == 0 {
				return i / 2
			}
			return i / 2 * 100
		}))
	src := &pauseCounting{Source: gen, pauses: map[string]int{}, resumes: map[string]int{}}
	out := &prefixSink{next: map[int64]int64{0: 0, 1: 1}}
	env := alignEnv()
	ws := watermark.Monotonous[int64]().WithWatermarkAlignment("g", 50*time.Millisecond, time.Millisecond)
	stream.SinkTo(stream.FromSource[int64, datagen.Split, datagen.EnumState](env, src, ws, "gen"), out, "sink")
	h, err := env.Start(t.Context(), "datagen")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Cancel(); _, _ = h.Wait() })
	for i := 0; ; i++ {
		p, r := src.counts("split-1")
		if p > 0 && r > 0 {
			break
		}
		if i > 5000 {
			t.Fatalf("split-1 paused %d, resumed %d times within 10s; want both", p, r)
		}
		time.Sleep(2 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := h.Stop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Stopped {
		t.Fatalf("state %s, not stopped", res.State)
	}
	if out.err != nil {
		t.Fatal(out.err)
	}
	if out.next[0] == 0 || out.next[1] == 1 {
		t.Fatalf("next indexes %v: a split emitted nothing", out.next)
	}
}

// prefixSink checks that each of two interleaved datagen splits arrives as
// a gap-free, duplicate-free prefix (one subtask).
type prefixSink struct {
	next map[int64]int64
	err  error
}

func (s *prefixSink) CreateWriter(context.Context, sink.InitContext) (sink.Writer[int64], error) {
	return s, nil
}
func (s *prefixSink) Write(ctx context.Context, v int64, _ sink.Meta) error {
	if sp := v % 2; v != s.next[sp] && s.err == nil {
		s.err = fmt.Errorf("split-%d: got index %d, want %d", sp, v, s.next[sp])
	} else {
		s.next[sp] += 2
	}
	return nil
}
func (s *prefixSink) Flush(context.Context, bool) error { return nil }
func (s *prefixSink) Close() error                      { return nil }
