package leftover_test

import (
	"fmt"

	"github.com/sluice-io/sluice/sink/leftover"
)

// A job ran at parallelism 4 and failed after its checkpoint 7; it is
// restored at parallelism 2. The runtime handed the writer states of old
// subtasks 1 and 3 to new subtask 1. The sink names its prepared
// transactions <prefix>-<subtask>-<checkpoint>, so the names a state holds
// are those up to its checkpoint and everything from checkpoint 8 on is a
// leftover. The connector lists what exists (a PostgreSQL sink would read
// pg_prepared_xacts), asks which of it this writer aborts, and aborts
// those.
func Example() {
	scheme := leftover.Scheme{Prefix: "sluice-4f2a-orders-"}
	existing := []string{
		"sluice-4f2a-orders-1-7", // checkpoint 7: its restored committable commits it
		"sluice-4f2a-orders-1-8", // prepared after checkpoint 7
		"sluice-4f2a-orders-3-8",
		"sluice-4f2a-orders-0-8",  // old subtask 0: its state went to writer 0
		"sluice-4f2a-orders-5-2",  // an earlier run at parallelism 6: 5 % 2 == 1
		"sluice-77c1-orders-1-8",  // another job
		"sluice-4f2a-orders-1-8b", // not a name of this scheme
	}
	abort, err := leftover.Abort(leftover.Request{
		Parser:              scheme,
		Subtask:             1,
		Parallelism:         2,
		Restored:            true,
		PreviousParallelism: 4,
		States:              []leftover.State{{Subtask: 1, From: 8}, {Subtask: 3, From: 8}},
		Existing:            existing,
		Needed:              []string{"sluice-4f2a-orders-1-7"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, name := range abort {
		fmt.Println("abort", name)
	}
	// Output:
	// abort sluice-4f2a-orders-1-8
	// abort sluice-4f2a-orders-3-8
	// abort sluice-4f2a-orders-5-2
}
