package jobstat

import (
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/metrics"
)

type fakeJob struct {
	reg *metrics.Registry
	st  engine.Status
}

func (f *fakeJob) Status() engine.Status      { return f.st }
func (f *fakeJob) Metrics() *metrics.Registry { return f.reg }

func TestPoll(t *testing.T) {
	reg := metrics.NewRegistry()
	job := reg.Root().With("job", "j")
	src := job.With("operator", "src").With("subtask", "0").Counter(metrics.NumRecordsIn)
	snk := job.With("operator", "snk").With("subtask", "0").Counter(metrics.NumRecordsSend)
	job.With("operator", "src").With("subtask", "0").Gauge(metrics.PendingRecords, func() int64 { return 42 })
	f := &fakeJob{reg: reg, st: engine.Status{Name: "j", State: engine.Running}}
	t0 := time.Unix(1000, 0)
	v := New(f, "src", "snk", t0)

	src.Add(100)
	snk.Add(50)
	s := v.Poll(t0.Add(time.Second))
	if s.RecordsIn != 100 || s.RecordsOut != 50 || s.InPerSec != 100 || s.OutPerSec != 50 || !s.HasLag || s.Lag != 42 || s.Last != nil {
		t.Errorf("first poll: got %+v", s)
	}
	src.Add(300)
	f.st.Checkpoints = engine.CheckpointStats{Completed: 1, LastID: 7, LastDuration: 3 * time.Millisecond, LastSize: 10,
		Recent: []engine.CompletedCheckpoint{{ID: 7, Completed: t0.Add(2 * time.Second), Duration: 3 * time.Millisecond, Size: 10}}}
	s = v.Poll(t0.Add(4 * time.Second))
	if s.InPerSec != 100 || s.OutPerSec != 12.5 || s.Last == nil || s.Last.ID != 7 || !s.Last.CompletedAt.Equal(t0.Add(2*time.Second)) || len(s.Checkpoints) != 1 {
		t.Errorf("second poll: got %+v", s)
	}
	// Beyond the window, rates are over its last RateWindow: samples at 1s
	// (100 in) and 4s (400 in) are kept; at 8s the base is the 1s sample,
	// the newest one at least RateWindow old: 700 in over 7s.
	src.Add(400)
	if c := v.Current(t0.Add(8 * time.Second)); c.InPerSec != 100 || c.Uptime != 8*time.Second {
		t.Errorf("Current at 8s: got rate %v uptime %v, want 100/s over the last 4s", c.InPerSec, c.Uptime)
	}
}

// TestRatesFromTheFirstSecond: a status read before any progress poll has
// rates (they were 0 until the first poll, 5s into a run without a
// terminal).
func TestRatesFromTheFirstSecond(t *testing.T) {
	reg := metrics.NewRegistry()
	src := reg.Root().With("job", "j").With("operator", "src").With("subtask", "0").Counter(metrics.NumRecordsIn)
	t0 := time.Unix(1000, 0)
	v := New(&fakeJob{reg: reg, st: engine.Status{State: engine.Running}}, "src", "snk", t0)
	src.Add(500)
	if c := v.Current(t0.Add(500 * time.Millisecond)); c.InPerSec != 1000 {
		t.Errorf("rate after 0.5s: got %v, want 1000/s", c.InPerSec)
	}
	if c := v.Current(t0.Add(time.Second)); c.InPerSec != 500 {
		t.Errorf("rate after 1s: got %v, want 500/s", c.InPerSec)
	}
}

// TestCheckpointsAsTheyCompleted: /status lists the runtime's record of
// completed checkpoints, including those completed between two reads.
func TestCheckpointsAsTheyCompleted(t *testing.T) {
	t0 := time.Unix(1000, 0)
	f := &fakeJob{reg: metrics.NewRegistry(), st: engine.Status{State: engine.Running}}
	v := New(f, "src", "snk", t0)
	for id := int64(1); id <= 5; id++ {
		kind := checkpoint.Checkpoint
		if id == 4 {
			kind = checkpoint.Savepoint
		}
		f.st.Checkpoints.Recent = append(f.st.Checkpoints.Recent, engine.CompletedCheckpoint{ID: id, Kind: kind,
			Completed: t0.Add(time.Duration(id) * time.Second), Duration: time.Duration(id) * time.Millisecond, Size: 100 * id})
	}
	f.st.Checkpoints.LastID, f.st.Checkpoints.Completed, f.st.Checkpoints.Savepoints = 5, 4, 1
	s := v.Current(t0.Add(10 * time.Second)) // one read after five completions
	if len(s.Checkpoints) != 5 {
		t.Fatalf("got %d checkpoints, want all 5: %+v", len(s.Checkpoints), s.Checkpoints)
	}
	for i, c := range s.Checkpoints {
		id := int64(i + 1)
		wantKind := "checkpoint"
		if id == 4 {
			wantKind = "savepoint"
		}
		if c.ID != id || c.Kind != wantKind || c.SizeBytes != 100*id || c.DurationMS != id || !c.CompletedAt.Equal(t0.Add(time.Duration(id)*time.Second)) {
			t.Errorf("checkpoint %d: got %+v", i, c)
		}
	}
	if s.Last == nil || s.Last.ID != 5 || s.Last.SizeBytes != 500 {
		t.Errorf("last: got %+v", s.Last)
	}
}

func TestReady(t *testing.T) {
	t0 := time.Unix(1000, 0)
	f := &fakeJob{reg: metrics.NewRegistry(), st: engine.Status{State: engine.Running}}
	v := New(f, "src", "snk", t0)
	if r := v.Ready(t0.Add(5*time.Second), 10*time.Second); !r.Ready || r.LastCheckpointAgeSeconds != 5 {
		t.Errorf("running, 5s old, no checkpoint yet: got %+v, want ready", r)
	}
	if r := v.Ready(t0.Add(11*time.Second), 10*time.Second); r.Ready || !strings.Contains(r.Reason, "no checkpoint completed for 11s") {
		t.Errorf("running 11s without a checkpoint: got %+v, want not ready", r)
	}
	if r := v.Ready(t0.Add(time.Hour), 0); !r.Ready {
		t.Errorf("no bound: got %+v, want ready", r)
	}
	f.st.Checkpoints.Recent = []engine.CompletedCheckpoint{{ID: 1, Completed: t0.Add(8 * time.Second)},
		{ID: 2, Kind: checkpoint.Savepoint, Completed: t0.Add(15 * time.Second)}}
	if r := v.Ready(t0.Add(17*time.Second), 10*time.Second); !r.Ready || r.LastCheckpointAgeSeconds != 9 {
		t.Errorf("checkpoint 9s ago: got %+v, want ready", r)
	}
	if r := v.Ready(t0.Add(19*time.Second), 10*time.Second); r.Ready {
		t.Errorf("checkpoint 11s ago (a savepoint 4s ago does not count): got %+v, want not ready", r)
	}
	f.st.State = engine.Restarting
	if r := v.Ready(t0.Add(9*time.Second), 10*time.Second); r.Ready || r.Reason != "the job is RESTARTING" || r.State != "RESTARTING" {
		t.Errorf("restarting: got %+v, want not ready", r)
	}
}
