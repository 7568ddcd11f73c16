package engine

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/watermark"
)

// Watermark alignment (FLIP-182, FLIP-217) in one process.
//
// Flink's source subtasks send their watermark to the source coordinator
// every update interval, and the coordinator sends back the group's
// maximum allowed watermark. Here every attempt keeps one small registry of
// groups (alignGroups), and each aligned source subtask owns one slot in
// its group: an atomic int64 holding the watermark it last reported. A
// subtask publishes into its slot and reads the other slots itself, on its
// own goroutine — no messages through the coordinator.
//
// When it checks. After every PollNext or periodic watermark emit that
// changed a split's watermark (the report is one atomic store, the read a
// few atomic loads), and at the first watermark tick at least
// UpdateInterval after the previous check, so that a paused subtask or split
// sees the group move on. What it checks (as SourceOperator does): the
// group's maximum allowed watermark is the minimum over the reported
// watermarks plus MaxDrift (Max on overflow, Min+MaxDrift when no subtask
// reported yet); a subtask whose combined watermark is beyond it stops
// polling its reader, and, while the reader holds several splits, each
// split whose watermark is beyond it is paused through source.SplitPauser.
//
// What a subtask reports: its combined (emitted) watermark; Max when all of
// its outputs are idle or its input ended, so that it does not hold the
// group back; nothing while it has no watermark yet (a subtask that never
// reported does not hold the group back either, as in Flink).
//
// How a subtask pauses without blocking: while waiting, the head's poll
// returns NothingAvailable without calling the reader and its available
// channel is nil, so the task loop serves its mailbox (triggers, splits,
// completions) and its timers; the watermark tick re-checks, and after a
// resume (of the subtask or of a split) available is ready once, so the
// task polls again even if the reader would not signal. A source subtask
// rebuilt by a restart joins its group again with its report reset.

// alignGroups is an attempt's registry of alignment groups. The zero value
// is ready to use.
type alignGroups struct {
	mu     sync.Mutex
	groups map[string]*alignGroup
}

type alignKey struct {
	source  string
	subtask int
}

// alignGroup holds the reports of the source subtasks of one group.
type alignGroup struct {
	slots map[alignKey]*alignSlot // guarded by alignGroups.mu
	// view is every slot, for lock-free reading; replaced (copied) when a
	// slot is added.
	view atomic.Pointer[[]*alignSlot]
}

// alignSlot is one source subtask's last report; watermark.Min means none.
type alignSlot struct{ wm atomic.Int64 }

// join registers a source subtask in a group (again, after a restart of
// that subtask: its report is reset) and returns its slot.
func (r *alignGroups) join(group, src string, subtask int) (*alignGroup, *alignSlot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.groups == nil {
		r.groups = map[string]*alignGroup{}
	}
	g := r.groups[group]
	if g == nil {
		g = &alignGroup{slots: map[alignKey]*alignSlot{}}
		r.groups[group] = g
	}
	k := alignKey{src, subtask}
	s := g.slots[k]
	if s == nil {
		s = &alignSlot{}
		g.slots[k] = s
		var view []*alignSlot
		if v := g.view.Load(); v != nil {
			view = slices.Clone(*v)
		}
		view = append(view, s)
		g.view.Store(&view)
	}
	s.wm.Store(watermark.Min)
	return g, s
}

// min is the minimum over the reported watermarks, or Min if nobody
// reported yet.
func (g *alignGroup) min() int64 {
	m, any := watermark.Max, false
	if v := g.view.Load(); v != nil {
		for _, s := range *v {
			if w := s.wm.Load(); w != watermark.Min {
				any = true
				m = min(m, w)
			}
		}
	}
	if !any {
		return watermark.Min
	}
	return m
}

// aligner is the alignment state of one source subtask. It is used from
// the subtask's goroutine only, except driftGauge.
type aligner struct {
	source     string
	cfg        watermark.Alignment
	drift      int64 // cfg.MaxDrift in milliseconds
	group      *alignGroup
	slot       *alignSlot
	pauser     source.SplitPauser // the reader, if it can pause splits
	readerType string

	next       time.Time // the next periodic check
	maxAllowed int64     // the group's bound at the last check
	waiting    bool      // the subtask is paused: its reader is not polled
	kick       bool      // something was resumed: report the reader available once
	ended      bool      // the reader reached the end of its input
	splitsOff  bool      // the reader cannot pause splits, which is allowed
	held       map[string]struct{}
	paused     map[string]struct{}
	driftGauge atomic.Int64
}

// readyChan is always ready.
var readyChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func newAligner(env *taskEnv, a watermark.Alignment, reader any) (*aligner, error) {
	name := env.v.head().name
	if wi := env.att.job.cfg.WatermarkInterval; wi <= 0 {
		return nil, fmt.Errorf("watermark alignment group %q needs periodic watermarks, but the watermark interval is %s", a.Group, wi)
	}
	g, slot := env.att.align.join(a.Group, name, env.subtask)
	al := &aligner{source: name, cfg: a, drift: a.MaxDrift.Milliseconds(), group: g, slot: slot,
		readerType: fmt.Sprintf("%T", reader), maxAllowed: watermark.Max,
		held: map[string]struct{}{}, paused: map[string]struct{}{}}
	al.pauser, _ = reader.(source.SplitPauser)
	env.metrics.Gauge(metrics.WatermarkAlignmentDrift, al.driftGauge.Load)
	return al, nil
}

// add records splits the reader now holds. A reader that holds several
// splits must be able to pause them one by one, unless that is allowed.
func (al *aligner) add(ids []string) error {
	for _, id := range ids {
		al.held[id] = struct{}{}
	}
	if len(al.held) > 1 && al.pauser == nil && !al.cfg.AllowUnalignedSplits {
		return fmt.Errorf("source %q: watermark alignment group %q: the reader (%s) holds %d splits but does not implement source.SplitPauser, so its splits cannot be aligned; "+
			"implement PauseOrResumeSplits, or allow unaligned source splits (stream.AllowUnalignedSourceSplits, watermark.Strategy.WithUnalignedSourceSplits): %w",
			al.source, al.cfg.Group, al.readerType, len(al.held), errors.ErrUnsupported)
	}
	return nil
}

// released forgets a finished split.
func (al *aligner) released(id string) {
	delete(al.held, id)
	delete(al.paused, id)
}

// alignAdd records added splits.
func (h *readerHead[T, S]) alignAdd(splits []S) error {
	ids := make([]string, len(splits))
	for i, s := range splits {
		ids[i] = s.SplitID()
	}
	return h.al.add(ids)
}

// alignAfterPoll runs after every PollNext of an aligned reader.
func (h *readerHead[T, S]) alignAfterPoll(st source.InputStatus) error {
	if st == source.EndOfInput {
		al := h.al
		if !al.ended {
			al.ended, al.waiting = true, false
			al.slot.wm.Store(watermark.Max) // never holds the group back again
			al.driftGauge.Store(0)
		}
		return nil
	}
	if h.out.wmDirty {
		return h.align()
	}
	return nil
}

// alignTick runs at every periodic watermark emit of an aligned reader.
func (h *readerHead[T, S]) alignTick() {
	al := h.al
	if al.ended {
		return
	}
	now := time.Now()
	if !h.out.wmDirty && now.Before(al.next) {
		return
	}
	al.next = now.Add(al.cfg.UpdateInterval)
	if err := h.align(); err != nil {
		h.out.env.fail(err)
	}
}

// align reports the subtask's watermark, reads the group's bound, and
// pauses or resumes the subtask and its splits.
func (h *readerHead[T, S]) align() error {
	al, o := h.al, h.out
	o.wmDirty = false
	if al.ended {
		return nil
	}
	wm := o.comb.Current()
	report := wm
	if o.idle {
		report = watermark.Max
	}
	if report != watermark.Min {
		al.slot.wm.Store(report)
	}
	low := al.group.min()
	if low > watermark.Max-al.drift {
		al.maxAllowed = watermark.Max // all idle or ended
	} else {
		al.maxAllowed = low + al.drift
	}
	if wm != watermark.Min && low != watermark.Min && low != watermark.Max {
		al.driftGauge.Store(wm - low)
	} else {
		al.driftGauge.Store(0)
	}
	if wait := wm > al.maxAllowed; wait != al.waiting {
		al.waiting = wait
		if !wait {
			al.kick = true
		}
		for id, s := range o.splits {
			_, p := al.paused[id]
			pauseIdleness(s.gen, wait || p)
		}
		pauseIdleness(o.main.gen, wait)
	}
	return h.alignSplits()
}

// alignSplits pauses the splits beyond the group's bound and resumes the
// paused ones that are within it again (SourceOperator's
// checkSplitWatermarkAlignment). Splits are paused only while the reader
// holds several: a single split cannot overtake another, the subtask
// pauses instead.
func (h *readerHead[T, S]) alignSplits() error {
	al, o := h.al, h.out
	if al.splitsOff {
		return nil
	}
	var pause, resume []string
	for id := range al.paused {
		if wm, _ := o.comb.Watermark(id); wm <= al.maxAllowed {
			resume = append(resume, id)
		}
	}
	if len(al.held) > 1 {
		for id := range al.held {
			if _, p := al.paused[id]; p {
				continue
			}
			if wm, ok := o.comb.Watermark(id); ok && wm > al.maxAllowed {
				pause = append(pause, id)
			}
		}
	}
	if len(pause) == 0 && len(resume) == 0 {
		return nil
	}
	if al.pauser == nil {
		// add failed the job unless unaligned splits are allowed.
		al.splitsOff = true
		return nil
	}
	slices.Sort(pause)
	slices.Sort(resume)
	if err := al.pauser.PauseOrResumeSplits(pause, resume); err != nil {
		if al.cfg.AllowUnalignedSplits && errors.Is(err, errors.ErrUnsupported) {
			al.splitsOff = true
			if len(al.paused) > 0 {
				_ = al.pauser.PauseOrResumeSplits(nil, slices.Sorted(maps.Keys(al.paused)))
				for id := range al.paused {
					h.splitIdleness(id, false)
				}
				clear(al.paused)
				al.kick = true
			}
			return nil
		}
		return fmt.Errorf("source %q: watermark alignment group %q: pause splits %q, resume splits %q: %w", al.source, al.cfg.Group, pause, resume, err)
	}
	for _, id := range pause {
		al.paused[id] = struct{}{}
		h.splitIdleness(id, true)
	}
	for _, id := range resume {
		delete(al.paused, id)
		h.splitIdleness(id, false)
	}
	if len(resume) > 0 {
		al.kick = true
	}
	return nil
}

func (h *readerHead[T, S]) splitIdleness(id string, paused bool) {
	if s, ok := h.out.splits[id]; ok {
		pauseIdleness(s.gen, paused || h.al.waiting)
	}
}

// pauseIdleness stops or restarts a generator's idleness timer, so that a
// split held back by alignment is not declared idle for lack of records.
func pauseIdleness(g watermark.Generator, paused bool) {
	if p, ok := g.(watermark.IdlenessPauser); ok {
		p.PauseIdleness(paused)
	}
}
