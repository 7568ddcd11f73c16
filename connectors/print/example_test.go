package print_test

import (
	"context"
	"os"
	"time"

	"github.com/sluice-io/sluice/connectors/print"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/sink"
)

func ExampleNew() {
	s := print.New[string](print.To(os.Stdout), print.Prefix("orders"))
	w, _ := s.CreateWriter(context.Background(), subtask{index: 1, of: 4})
	w.Write(context.Background(), "apple", sink.Meta{})
	w.Write(context.Background(), "pear", sink.Meta{})
	w.Close()
	// Output:
	// orders:2> apple
	// orders:2> pear
}

// subtask is a minimal sink.InitContext.
type subtask struct{ index, of int }

func (s subtask) SubtaskIndex() int                 { return s.index }
func (s subtask) Parallelism() int                  { return s.of }
func (subtask) Attempt() int                        { return 0 }
func (subtask) JobName() string                     { return "job" }
func (subtask) JobID() string                       { return "0123456789abcdef" }
func (subtask) OperatorUID() string                 { return "print" }
func (subtask) OperatorName() string                { return "print" }
func (subtask) RestoredCheckpointID() (int64, bool) { return 0, false }
func (subtask) CheckpointInterval() time.Duration   { return 0 }
func (subtask) Metrics() metrics.Group              { return metrics.Discard() }
