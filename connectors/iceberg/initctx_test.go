package iceberg

import (
	"time"

	"github.com/sluice-io/sluice/metrics"
)

// testInit is a sink.InitContext for calling the sink directly.
type testInit struct{ job string }

func (testInit) SubtaskIndex() int { return 0 }
func (testInit) Parallelism() int  { return 1 }
func (testInit) Attempt() int      { return 0 }
func (testInit) JobName() string   { return "test" }
func (i testInit) JobID() string {
	if i.job == "" {
		return "test-job"
	}
	return i.job
}
func (testInit) OperatorName() string                { return "iceberg" }
func (testInit) OperatorUID() string                 { return "iceberg" }
func (testInit) RestoredCheckpointID() (int64, bool) { return 0, false }
func (testInit) Metrics() metrics.Group              { return metrics.Discard() }
func (testInit) CheckpointInterval() time.Duration   { return 0 }
