// Package jobstat turns a running job's status and metrics into the
// snapshots the CLI shows: progress lines, the JSON status endpoint and the
// final summary. Its checkpoint history is the runtime's record of the last
// checkpoints as they completed (engine.CheckpointStats.Recent), so it does
// not depend on how often anyone looks. Record rates are measured over the
// last RateWindow (from the job's start while it is younger), so they are
// there from the first second.
package jobstat

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/metrics"
)

// Job is what a View watches; *engine.Handle implements it.
type Job interface {
	Status() engine.Status
	Metrics() *metrics.Registry
}

// Checkpoint is one completed checkpoint or savepoint.
type Checkpoint struct {
	ID          int64     `json:"id"`
	Kind        string    `json:"kind"` // "checkpoint" or "savepoint"
	DurationMS  int64     `json:"duration_ms"`
	SizeBytes   int64     `json:"size_bytes"`
	CompletedAt time.Time `json:"completed_at"`
}

// Subtask holds one subtask's record counts.
type Subtask struct {
	Operator    string `json:"operator"`
	Subtask     string `json:"subtask"`
	RecordsIn   int64  `json:"records_in"`
	RecordsOut  int64  `json:"records_out"`
	RecordsSend int64  `json:"records_send"`
}

// Snapshot is the job at one moment.
type Snapshot struct {
	Job           string        `json:"job"`
	State         string        `json:"state"`
	Uptime        time.Duration `json:"-"`
	UptimeSeconds float64       `json:"uptime_seconds"`
	Restarts      int           `json:"restarts"`
	RecordsIn     int64         `json:"records_in"`  // emitted by the source
	RecordsOut    int64         `json:"records_out"` // handed to the sink
	InPerSec      float64       `json:"records_in_per_second"`
	OutPerSec     float64       `json:"records_out_per_second"`
	// Lag is the sum of the sources' pendingRecords gauges; HasLag says
	// whether any source reports it.
	Lag       int64       `json:"lag,omitempty"`
	HasLag    bool        `json:"has_lag"`
	Completed int         `json:"checkpoints_completed"`
	Failed    int         `json:"checkpoints_failed"`
	Last      *Checkpoint `json:"last_checkpoint,omitempty"`
	// Checkpoints are the last completed checkpoints and savepoints as
	// they completed, oldest first (at most engine.RecentCheckpoints).
	Checkpoints []Checkpoint `json:"checkpoints"`
	Subtasks    []Subtask    `json:"subtasks"`
}

// RateWindow is the span record rates are measured over.
const RateWindow = 5 * time.Second

// View watches one job. It is safe for concurrent use.
type View struct {
	job              Job
	sourceOp, sinkOp string
	start            time.Time

	mu      sync.Mutex
	samples []sample // oldest first; samples[0] is at least RateWindow old once the job is
}

// sample is the record counts at one time.
type sample struct {
	at      time.Time
	in, out int64
}

// New returns a view of job whose source and sink operators have these
// names. start is when the job started (its counts were zero then).
func New(job Job, sourceOp, sinkOp string, start time.Time) *View {
	return &View{job: job, sourceOp: sourceOp, sinkOp: sinkOp, start: start, samples: []sample{{at: start}}}
}

// Poll takes a snapshot. It is Current; the name stays for the progress
// display, which polls.
func (v *View) Poll(now time.Time) Snapshot { return v.Current(now) }

// Current takes a snapshot. Its rates are per second over the last
// RateWindow, or since the job started if that is more recent.
func (v *View) Current(now time.Time) Snapshot {
	s := v.snapshot(now)
	s.InPerSec, s.OutPerSec = v.rates(now, s.RecordsIn, s.RecordsOut)
	return s
}

// rates measures the rates at now from the oldest sample in the window and
// keeps a sample at most every second, so at most RateWindow/1s+2 are kept.
func (v *View) rates(now time.Time, in, out int64) (inRate, outRate float64) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for len(v.samples) > 1 && !v.samples[1].at.After(now.Add(-RateWindow)) {
		v.samples = v.samples[1:]
	}
	base := v.samples[0]
	if dt := now.Sub(base.at).Seconds(); dt > 0 {
		inRate, outRate = max(0, float64(in-base.in)/dt), max(0, float64(out-base.out)/dt)
	}
	if last := v.samples[len(v.samples)-1]; now.Sub(last.at) >= time.Second {
		v.samples = append(v.samples, sample{now, in, out})
	}
	return inRate, outRate
}

// Readiness is the answer of Ready.
type Readiness struct {
	Ready  bool   `json:"ready"`
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	// LastCheckpointAgeSeconds is the time since the last checkpoint
	// completed (or since the job started, before the first one).
	LastCheckpointAgeSeconds float64 `json:"last_checkpoint_age_seconds"`
}

// Ready reports whether the job is running and, if maxAge > 0, a
// checkpoint completed within maxAge (counted from the job's start before
// the first one). Savepoints do not count: they commit nothing.
func (v *View) Ready(now time.Time, maxAge time.Duration) Readiness {
	st := v.job.Status()
	last := v.start
	for _, c := range st.Checkpoints.Recent {
		if c.Kind == checkpoint.Checkpoint && c.Completed.After(last) {
			last = c.Completed
		}
	}
	age := max(0, now.Sub(last))
	r := Readiness{Ready: true, State: string(st.State), LastCheckpointAgeSeconds: age.Seconds()}
	switch {
	case st.State != engine.Running:
		r.Ready, r.Reason = false, fmt.Sprintf("the job is %s", st.State)
	case maxAge > 0 && age > maxAge:
		r.Ready, r.Reason = false, fmt.Sprintf("no checkpoint completed for %s (bound %s)", age.Round(time.Millisecond), maxAge)
	}
	return r
}

func (v *View) snapshot(now time.Time) Snapshot {
	st := v.job.Status()
	s := Snapshot{Job: st.Name, State: string(st.State), Uptime: now.Sub(v.start), Restarts: st.Restarts,
		Completed: st.Checkpoints.Completed, Failed: st.Checkpoints.Failed, Subtasks: []Subtask{}, Checkpoints: []Checkpoint{}}
	s.UptimeSeconds = s.Uptime.Seconds()
	for _, c := range st.Checkpoints.Recent {
		s.Checkpoints = append(s.Checkpoints, Checkpoint{ID: c.ID, Kind: c.Kind.String(), DurationMS: c.Duration.Milliseconds(),
			SizeBytes: c.Size, CompletedAt: c.Completed.UTC()})
	}
	if st.Checkpoints.LastID > 0 {
		last := Checkpoint{ID: st.Checkpoints.LastID, Kind: checkpoint.Checkpoint.String(),
			DurationMS: st.Checkpoints.LastDuration.Milliseconds(), SizeBytes: st.Checkpoints.LastSize}
		for _, c := range s.Checkpoints {
			if c.ID == last.ID {
				last = c
			}
		}
		s.Last = &last
	}
	subs := map[[2]string]*Subtask{}
	for _, m := range v.job.Metrics().Snapshot() {
		op, sub := m.Label("operator"), m.Label("subtask")
		switch m.Name {
		case metrics.PendingRecords:
			s.Lag += m.Value
			s.HasLag = true
			continue
		case metrics.NumRecordsIn, metrics.NumRecordsOut, metrics.NumRecordsSend:
		default:
			continue
		}
		if m.Name == metrics.NumRecordsIn && op == v.sourceOp {
			s.RecordsIn += m.Value
		}
		if m.Name == metrics.NumRecordsSend && op == v.sinkOp {
			s.RecordsOut += m.Value
		}
		if op == "" || sub == "" || sub == "coordinator" {
			continue
		}
		k := [2]string{op, sub}
		t := subs[k]
		if t == nil {
			t = &Subtask{Operator: op, Subtask: sub}
			subs[k] = t
		}
		switch m.Name {
		case metrics.NumRecordsIn:
			t.RecordsIn += m.Value
		case metrics.NumRecordsOut:
			t.RecordsOut += m.Value
		case metrics.NumRecordsSend:
			t.RecordsSend += m.Value
		}
	}
	for _, t := range subs {
		s.Subtasks = append(s.Subtasks, *t)
	}
	sort.Slice(s.Subtasks, func(i, j int) bool {
		a, b := s.Subtasks[i], s.Subtasks[j]
		if a.Operator != b.Operator {
			return a.Operator < b.Operator
		}
		return len(a.Subtask) < len(b.Subtask) || len(a.Subtask) == len(b.Subtask) && a.Subtask < b.Subtask
	})
	return s
}
