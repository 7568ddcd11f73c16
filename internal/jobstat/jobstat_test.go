package jobstat

import (
	"testing"
	"time"

	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/runtime"
)

type fakeJob struct {
	reg *metrics.Registry
	st  runtime.Status
}

func (f *fakeJob) Status() runtime.Status     { return f.st }
func (f *fakeJob) Metrics() *metrics.Registry { return f.reg }

func TestPoll(t *testing.T) {
	reg := metrics.NewRegistry()
	job := reg.Root().With("job", "j")
	src := job.With("operator", "src").With("subtask", "0").Counter(metrics.NumRecordsIn)
	snk := job.With("operator", "snk").With("subtask", "0").Counter(metrics.NumRecordsSend)
	job.With("operator", "src").With("subtask", "0").Gauge(metrics.PendingRecords, func() int64 { return 42 })
	f := &fakeJob{reg: reg, st: runtime.Status{Name: "j", State: runtime.Running}}
	t0 := time.Unix(1000, 0)
	v := New(f, "src", "snk", t0)

	src.Add(100)
	snk.Add(50)
	s := v.Poll(t0.Add(time.Second))
	if s.RecordsIn != 100 || s.RecordsOut != 50 || s.InPerSec != 100 || s.OutPerSec != 50 || !s.HasLag || s.Lag != 42 || s.Last != nil {
		t.Errorf("first poll: got %+v", s)
	}
	src.Add(300)
	f.st.Checkpoints = runtime.CheckpointStats{Completed: 1, LastID: 7, LastDuration: 3 * time.Millisecond, LastSize: 10}
	s = v.Poll(t0.Add(3 * time.Second))
	if s.InPerSec != 150 || s.OutPerSec != 0 || s.Last == nil || s.Last.ID != 7 || len(s.Checkpoints) != 1 {
		t.Errorf("second poll: got %+v", s)
	}
	if c := v.Current(t0.Add(4 * time.Second)); c.InPerSec != 150 || len(c.Checkpoints) != 1 || c.Uptime != 4*time.Second {
		t.Errorf("Current: got %+v, want the last poll's rates and one checkpoint", c)
	}
	for id := int64(8); id < 8+History+5; id++ {
		f.st.Checkpoints.LastID = id
		v.Poll(t0.Add(5 * time.Second))
	}
	if s := v.Current(t0); len(s.Checkpoints) != History || s.Checkpoints[History-1].ID != 8+History+4 {
		t.Errorf("history: got %d entries, last %+v", len(s.Checkpoints), s.Checkpoints[len(s.Checkpoints)-1])
	}
}
