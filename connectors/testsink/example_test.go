package testsink_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/internal/sinkerase"
	"github.com/sluice-io/sluice/internal/sinkrt"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/sink"
)

// This example plays the runtime by hand: write, prepare at checkpoint 1,
// then commit after the checkpoint completed.
func ExampleNewTwoPhase() {
	store := testsink.NewStore[string]()
	s := sinkerase.Erase(testsink.NewTwoPhase(store))
	ctx := initContext{}

	w, _ := sinkerase.Open(context.Background(), s, ctx, nil)
	w.Write(context.Background(), "a", sink.Meta{})
	w.Write(context.Background(), "b", sink.Meta{})
	w.Flush(context.Background(), false)
	committables, _ := w.PrepareCommit(context.Background(), 1)
	fmt.Println("staged:", store.Staged(), "committed:", store.Committed())

	c, _ := s.NewCommitter(context.Background(), ctx)
	reqs := []*sinkrt.Request{{CheckpointID: 1, Data: committables[0]}}
	c.Commit(context.Background(), reqs)
	fmt.Println("staged:", store.Staged(), "committed:", store.Committed(), reqs[0].Outcome)

	c.Commit(context.Background(), reqs) // a restarted job commits again
	fmt.Println(reqs[0].Outcome)
	// Output:
	// staged: [orders/out/0/1] committed: []
	// staged: [] committed: [a b] committed
	// already-committed
}

// initContext is what the runtime tells a writer: subtask 0 of 1 of the
// first attempt of job "orders", sink operator "out".
type initContext struct{}

func (initContext) SubtaskIndex() int                   { return 0 }
func (initContext) Parallelism() int                    { return 1 }
func (initContext) Attempt() int                        { return 0 }
func (initContext) JobName() string                     { return "orders" }
func (initContext) JobID() string                       { return "0123456789abcdef" }
func (initContext) OperatorUID() string                 { return "out" }
func (initContext) OperatorName() string                { return "out" }
func (initContext) RestoredCheckpointID() (int64, bool) { return 0, false }
func (initContext) CheckpointInterval() time.Duration   { return 0 }
func (initContext) Metrics() metrics.Group              { return metrics.Discard() }
