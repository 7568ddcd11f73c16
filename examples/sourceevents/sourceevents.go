package sourceevents

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"

	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/source/enumerate"
)

// Item is a record: item Seq of job Job.
type Item struct {
	Job string
	Seq int
}

func (it Item) String() string { return it.Job + "#" + strconv.Itoa(it.Seq) }

// Job is the split: a job of Size items, of which the reader emits Next
// next.
type Job struct {
	ID   string `json:"id"`
	Size int    `json:"size"`
	Next int    `json:"next"`
}

// SplitID returns the job's id.
func (j Job) SplitID() string { return j.ID }

// The events. Readers → enumerator:

// NeedWork asks the enumerator for a job (in place of the built-in
// ReaderContext.SendSplitRequest, to show the mechanism).
type NeedWork struct{}

// Done reports a finished job and how many of its items this reader
// emitted (all of them, unless the job was restored half-way).
type Done struct {
	Job   string
	Items int
}

// Paused acknowledges Pause with the number of records the reader has
// emitted since it started.
type Paused struct{ Emitted int }

// Enumerator → readers:

// Pause stops a reader until Resume; it answers with Paused.
type Pause struct{}

// Resume lets a paused reader continue.
type Resume struct{}

// EnumState is the enumerator's checkpoint: jobs not handed out yet, the
// tally of finished jobs, and where the milestone pause stands.
type EnumState struct {
	Pending []Job          `json:"pending"`
	Tally   map[string]int `json:"tally"`
	Phase   phase          `json:"phase"`
}

type phase int

const (
	working phase = iota // before the milestone
	pausing              // Pause sent, waiting for every reader's Paused
	paused               // every reader paused, waiting for a checkpoint
	resumed              // the milestone checkpoint completed
)

// Source hands out jobs on request and pauses its readers once, at a
// milestone. Create it with [New].
type Source struct {
	sizes      []int
	pauseAfter int
	report     *Report
}

var _ source.Source[Item, Job, EnumState] = (*Source)(nil)

// New returns a bounded source of len(sizes) jobs, job i ("job-i") with
// sizes[i] items. Once pauseAfter jobs are done, the enumerator pauses
// every reader until a checkpoint taken while all of them were paused has
// completed (pauseAfter ≤ 0: never). The pause needs checkpointing.
func New(sizes []int, pauseAfter int) *Source {
	return &Source{sizes: slices.Clone(sizes), pauseAfter: pauseAfter, report: &Report{}}
}

// Report returns what the enumerator saw so far; it is safe to call while
// the job runs.
func (s *Source) Report() ReportView { return s.report.view() }

func (s *Source) Boundedness() source.Boundedness { return source.Bounded }

func (s *Source) CreateEnumerator(ctx source.EnumeratorContext[Job]) (source.Enumerator[Job, EnumState], error) {
	st := EnumState{Tally: map[string]int{}}
	for i, n := range s.sizes {
		st.Pending = append(st.Pending, Job{ID: fmt.Sprint("job-", i), Size: n})
	}
	return newEnumerator(s, ctx, st), nil
}

func (s *Source) RestoreEnumerator(ctx source.EnumeratorContext[Job], st EnumState) (source.Enumerator[Job, EnumState], error) {
	if st.Tally == nil {
		st.Tally = map[string]int{}
	}
	return newEnumerator(s, ctx, st), nil
}

func (s *Source) CreateReader(ctx source.ReaderContext) (source.Reader[Item, Job], error) {
	return &reader{ctx: ctx}, nil
}

func (s *Source) SplitSerializer() serde.Versioned[Job] { return serde.JSON[Job](1) }
func (s *Source) EnumeratorStateSerializer() serde.Versioned[EnumState] {
	return serde.JSON[EnumState](1)
}

// enumerator runs on the coordinator goroutine only. The jobs not handed
// out yet live in the embedded enumerate.Fixed (pull assignment: a NeedWork
// event is answered as a split request would be), which also takes jobs
// back (AddSplitsBack) and tells readers no more jobs will come; st holds
// the rest of the state (st.Pending is filled in at a snapshot).
type enumerator struct {
	*enumerate.Fixed[Job]
	s         *Source
	ctx       source.EnumeratorContext[Job]
	st        EnumState
	acks      map[int]int // Paused acknowledgements by reader
	milestone int64       // the checkpoint taken with every reader paused
}

func newEnumerator(s *Source, ctx source.EnumeratorContext[Job], st EnumState) *enumerator {
	return &enumerator{Fixed: enumerate.NewFixed(ctx, st.Pending, source.Bounded), s: s, ctx: ctx, st: st}
}

// AddReader registers a reader: at the start, after a restore, or after
// the reader alone restarted. A new reader is not paused, so during the
// pause it must be told again, and the milestone waits for its answer.
func (e *enumerator) AddReader(subtask int) error {
	if err := e.Fixed.AddReader(subtask); err != nil {
		return err
	}
	if e.st.Phase == pausing || e.st.Phase == paused {
		if e.acks == nil {
			e.acks = map[int]int{}
		}
		delete(e.acks, subtask)
		e.st.Phase, e.milestone = pausing, 0
		e.ctx.SendEventToReader(subtask, Pause{})
	}
	return nil
}

func (e *enumerator) HandleSourceEvent(subtask int, ev source.Event) error {
	switch ev := ev.(type) {
	case NeedWork:
		return e.HandleSplitRequest(subtask, "")
	case Done:
		e.st.Tally[ev.Job] += ev.Items
		e.s.report.done(ev.Job, ev.Items)
		if e.st.Phase == working && e.s.pauseAfter > 0 && len(e.st.Tally) >= e.s.pauseAfter {
			e.pause()
		}
	case Paused:
		if e.st.Phase != pausing {
			return nil
		}
		e.acks[subtask] = ev.Emitted
		if len(e.acks) == e.ctx.Parallelism() {
			e.st.Phase = paused
			e.s.report.paused(e.acks)
		}
	default:
		return fmt.Errorf("sourceevents: unexpected event %T from reader %d", ev, subtask)
	}
	return nil
}

// pause tells every reader to pause and waits for their acknowledgements.
func (e *enumerator) pause() {
	e.st.Phase, e.acks = pausing, map[int]int{}
	for sub := range e.ctx.Parallelism() {
		e.ctx.SendEventToReader(sub, Pause{})
	}
}

// SnapshotState is called when a checkpoint starts, before the readers
// snapshot: the first one after every reader paused is the milestone.
func (e *enumerator) SnapshotState(checkpointID int64) (EnumState, error) {
	if e.st.Phase == paused && e.milestone == 0 {
		e.milestone = checkpointID
	}
	st := EnumState{Pending: e.Unassigned(), Tally: maps.Clone(e.st.Tally), Phase: e.st.Phase}
	return st, nil
}

// NotifyCheckpointComplete resumes the readers once the milestone
// checkpoint completed.
func (e *enumerator) NotifyCheckpointComplete(checkpointID int64) error {
	if e.st.Phase != paused || e.milestone == 0 || checkpointID < e.milestone {
		return nil
	}
	e.st.Phase = resumed
	e.s.report.resumed(e.milestone)
	for sub := range e.ctx.Parallelism() {
		e.ctx.SendEventToReader(sub, Resume{})
	}
	return nil
}

// batch is the most items a reader emits per PollNext.
const batch = 64

// reader runs on its subtask's goroutine only.
type reader struct {
	ctx     source.ReaderContext
	jobs    []Job
	started map[string]int // position each job had when the reader got it
	noMore  bool
	asked   bool
	paused  bool
	emitted int
}

func (r *reader) Start(context.Context) error {
	r.started = map[string]int{}
	r.ask()
	return nil
}

func (r *reader) ask() {
	if !r.asked && !r.noMore {
		r.asked = true
		r.ctx.SendEventToEnumerator(NeedWork{})
	}
}

func (r *reader) PollNext(out source.Output[Item]) (source.InputStatus, error) {
	switch {
	case r.paused:
		return source.NothingAvailable, nil
	case len(r.jobs) == 0 && r.noMore:
		return source.EndOfInput, nil
	case len(r.jobs) == 0:
		return source.NothingAvailable, nil
	}
	j := &r.jobs[0]
	so := out.ForSplit(j.ID)
	for n := 0; n < batch && j.Next < j.Size; n++ {
		so.Collect(Item{Job: j.ID, Seq: j.Next})
		j.Next++
		r.emitted++
	}
	if j.Next >= j.Size {
		r.ctx.SendEventToEnumerator(Done{Job: j.ID, Items: j.Size - r.started[j.ID]})
		delete(r.started, j.ID)
		out.ReleaseSplit(j.ID)
		r.jobs = r.jobs[1:]
		if len(r.jobs) == 0 {
			r.ask()
		}
	}
	return source.MoreAvailable, nil
}

// Available is never needed: the runtime polls again after every split,
// no-more-splits signal and event (Resume included).
func (r *reader) Available() <-chan struct{} { return nil }

func (r *reader) AddSplits(jobs []Job) error {
	for _, j := range jobs {
		r.started[j.ID] = j.Next
	}
	r.jobs = append(r.jobs, jobs...)
	r.asked = false
	return nil
}

func (r *reader) NotifyNoMoreSplits() { r.noMore = true }

func (r *reader) HandleSourceEvent(ev source.Event) error {
	switch ev.(type) {
	case Pause:
		r.paused = true
		r.ctx.SendEventToEnumerator(Paused{Emitted: r.emitted})
	case Resume:
		r.paused = false
	default:
		return fmt.Errorf("sourceevents: unexpected event %T", ev)
	}
	return nil
}

func (r *reader) SnapshotState(int64) ([]Job, error) { return slices.Clone(r.jobs), nil }

func (r *reader) Close() error { return nil }

// Report collects what the enumerator saw, for the program that runs the
// job. It is safe for concurrent use.
type Report struct {
	mu   sync.Mutex
	v    ReportView
	init bool
}

// ReportView is a copy of a Report.
type ReportView struct {
	// Tally holds the items reported done, by job.
	Tally map[string]int
	// BeforePause holds, by reader, the records it had emitted when it
	// paused.
	BeforePause map[int]int
	// Milestone is the checkpoint taken while every reader was paused;
	// Resumed says it completed and the readers were resumed.
	Milestone int64
	Resumed   bool
}

func (r *Report) with(fn func(v *ReportView)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.init {
		r.v.Tally, r.v.BeforePause, r.init = map[string]int{}, map[int]int{}, true
	}
	fn(&r.v)
}

func (r *Report) done(job string, items int) {
	r.with(func(v *ReportView) { v.Tally[job] += items })
}

func (r *Report) paused(acks map[int]int) {
	r.with(func(v *ReportView) { maps.Copy(v.BeforePause, acks) })
}

func (r *Report) resumed(milestone int64) {
	r.with(func(v *ReportView) { v.Milestone, v.Resumed = milestone, true })
}

func (r *Report) view() ReportView {
	var out ReportView
	r.with(func(v *ReportView) {
		out = ReportView{Tally: maps.Clone(v.Tally), BeforePause: maps.Clone(v.BeforePause), Milestone: v.Milestone, Resumed: v.Resumed}
	})
	return out
}
