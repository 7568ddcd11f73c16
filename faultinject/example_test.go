package faultinject_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/internal/sinkerase"
	"github.com/sluice-io/sluice/internal/sinkrt"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/sink"
)

func ExampleRandomPlan() {
	plan := faultinject.RandomPlan(7, 3, faultinject.Kinds(), 2, 1000, 5)
	for _, f := range plan.Faults() {
		fmt.Println(f)
	}
	// Output:
	// BeforeCommit(subtask=1, checkpoint=5)
	// BeforeCommit(subtask=1, checkpoint=4)
	// AfterRecords(subtask=0, records=45)
}

// A committer that fails between prepare and commit: the first attempt
// commits nothing, the next one commits the restored committable.
func ExampleWrapSink() {
	store := testsink.NewStore[string]()
	plan := faultinject.NewPlan(faultinject.Fault{Kind: faultinject.BeforeCommit, Subtask: 0, Checkpoint: 1})
	s := sinkerase.Erase(faultinject.WrapSink(testsink.NewTwoPhase(store), plan))

	w, _ := sinkerase.Open(context.Background(), s, initContext{}, nil)
	w.Write(context.Background(), "hello", sink.Meta{})
	committables, _ := w.PrepareCommit(context.Background(), 1)
	reqs := []*sinkrt.Request{{CheckpointID: 1, Data: committables[0]}}

	c, _ := s.NewCommitter(context.Background(), initContext{})
	c.Commit(context.Background(), reqs)
	fmt.Println(reqs[0].Outcome, errors.Is(reqs[0].Err, faultinject.ErrInjected), store.Committed())

	c.Commit(context.Background(), reqs) // the restarted job's committer
	fmt.Println(reqs[0].Outcome, store.Committed())
	fmt.Println(plan)
	// Output:
	// failed-unknown true []
	// committed [hello]
	// faultinject.Plan{BeforeCommit(subtask=0, checkpoint=1) [fired]}
}

// initContext is a minimal sink.InitContext: subtask 0 of 1, first attempt.
type initContext struct{}

func (initContext) SubtaskIndex() int                   { return 0 }
func (initContext) Parallelism() int                    { return 1 }
func (initContext) Attempt() int                        { return 0 }
func (initContext) JobName() string                     { return "job" }
func (initContext) JobID() string                       { return "0123456789abcdef" }
func (initContext) OperatorUID() string                 { return "out" }
func (initContext) OperatorName() string                { return "out" }
func (initContext) RestoredCheckpointID() (int64, bool) { return 0, false }
func (initContext) CheckpointInterval() time.Duration   { return 0 }
func (initContext) Metrics() metrics.Group              { return metrics.Discard() }
