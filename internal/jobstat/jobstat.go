// Package jobstat turns a running job's status and metrics into the
// snapshots the CLI shows: progress lines, the JSON status endpoint and the
// final summary. It keeps the history of completed checkpoints (with their
// duration and size) by watching the job's status.
package jobstat

import (
	"sort"
	"sync"
	"time"

	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/runtime"
)

// Job is what a View watches; *runtime.Handle implements it.
type Job interface {
	Status() runtime.Status
	Metrics() *metrics.Registry
}

// Checkpoint is one completed checkpoint as seen by the View.
type Checkpoint struct {
	ID         int64     `json:"id"`
	DurationMS int64     `json:"duration_ms"`
	SizeBytes  int64     `json:"size_bytes"`
	SeenAt     time.Time `json:"completed_at"` // when the View noticed it
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
	Lag         int64        `json:"lag,omitempty"`
	HasLag      bool         `json:"has_lag"`
	Completed   int          `json:"checkpoints_completed"`
	Failed      int          `json:"checkpoints_failed"`
	Last        *Checkpoint  `json:"last_checkpoint,omitempty"`
	Checkpoints []Checkpoint `json:"checkpoints"` // newest last, at most History
	Subtasks    []Subtask    `json:"subtasks"`
}

// History is how many checkpoints a View remembers.
const History = 20

// View watches one job. It is safe for concurrent use.
type View struct {
	job              Job
	sourceOp, sinkOp string
	start            time.Time

	mu              sync.Mutex
	history         []Checkpoint
	lastIn, lastOut int64
	lastAt          time.Time
	inRate, outRate float64
}

// New returns a view of job whose source and sink operators have these
// names.
func New(job Job, sourceOp, sinkOp string, start time.Time) *View {
	return &View{job: job, sourceOp: sourceOp, sinkOp: sinkOp, start: start, lastAt: start}
}

// Poll takes a snapshot and updates the rates (per second since the
// previous Poll) and the checkpoint history.
func (v *View) Poll(now time.Time) Snapshot {
	s := v.snapshot(now)
	v.mu.Lock()
	defer v.mu.Unlock()
	if dt := now.Sub(v.lastAt).Seconds(); dt > 0 {
		v.inRate = float64(s.RecordsIn-v.lastIn) / dt
		v.outRate = float64(s.RecordsOut-v.lastOut) / dt
	}
	v.lastIn, v.lastOut, v.lastAt = s.RecordsIn, s.RecordsOut, now
	s.InPerSec, s.OutPerSec = v.inRate, v.outRate
	s.Checkpoints = append([]Checkpoint(nil), v.history...)
	return s
}

// Current takes a snapshot without updating rates; the rates are those of
// the last Poll.
func (v *View) Current(now time.Time) Snapshot {
	s := v.snapshot(now)
	v.mu.Lock()
	defer v.mu.Unlock()
	s.InPerSec, s.OutPerSec = v.inRate, v.outRate
	s.Checkpoints = append([]Checkpoint(nil), v.history...)
	return s
}

func (v *View) snapshot(now time.Time) Snapshot {
	st := v.job.Status()
	s := Snapshot{Job: st.Name, State: string(st.State), Uptime: now.Sub(v.start), Restarts: st.Restarts,
		Completed: st.Checkpoints.Completed, Failed: st.Checkpoints.Failed, Subtasks: []Subtask{}}
	s.UptimeSeconds = s.Uptime.Seconds()
	if st.Checkpoints.LastID > 0 {
		v.mu.Lock()
		if n := len(v.history); n == 0 || v.history[n-1].ID != st.Checkpoints.LastID {
			v.history = append(v.history, Checkpoint{ID: st.Checkpoints.LastID, DurationMS: st.Checkpoints.LastDuration.Milliseconds(),
				SizeBytes: st.Checkpoints.LastSize, SeenAt: now.UTC()})
			if len(v.history) > History {
				v.history = v.history[len(v.history)-History:]
			}
		}
		last := v.history[len(v.history)-1]
		v.mu.Unlock()
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
