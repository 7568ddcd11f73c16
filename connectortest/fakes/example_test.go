package fakes_test

import (
	"context"
	"fmt"
	"os"

	"github.com/sluice-io/sluice/connectors/print"
	"github.com/sluice-io/sluice/connectortest/fakes"
	"github.com/sluice-io/sluice/sink"
)

// A sink writer driven by hand: InitContext says it is subtask 1 of 2 of
// a restarted job, so the print sink prefixes its lines with "2> ".
func ExampleInitContext() {
	ic := &fakes.InitContext{Subtask: 1, Parallel: 2, AttemptNum: 1, Restored: 7, HasRestored: true}
	w, err := print.New[string](print.To(os.Stdout)).CreateWriter(context.Background(), ic)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	_ = w.Write(context.Background(), "hello", sink.Meta{})
	_ = w.Flush(context.Background(), true)
	id, ok := ic.RestoredCheckpointID()
	fmt.Println(ic.JobName(), ic.Attempt(), id, ok)
	// Output:
	// 2> hello
	// job 1 7 true
}
