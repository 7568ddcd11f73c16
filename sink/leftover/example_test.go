package leftover_test

import (
	"fmt"

	"github.com/sluice-io/sluice/sink/leftover"
)

// A PostgreSQL sink prepares one transaction per subtask and checkpoint,
// with the gid <prefix>-<subtask>-<checkpoint>. Its job ran at parallelism
// 4 and failed after checkpoint 7 completed; it is restored from 7 at
// parallelism 2. Writer 1 lists pg_prepared_xacts, asks which of them it
// must roll back, and rolls those back; the committer commits what the
// restored committables name.
func Example() {
	scheme := leftover.Scheme{Prefix: "sluice-4f2a-orders-"}
	existing := []string{ // gids in pg_prepared_xacts
		"sluice-4f2a-orders-1-7",  // checkpoint 7: a restored committable commits it
		"sluice-4f2a-orders-1-8",  // prepared after checkpoint 7
		"sluice-4f2a-orders-3-8",  // old subtask 3: 3 % 2 == 1
		"sluice-4f2a-orders-0-8",  // old subtask 0: writer 0's
		"sluice-77c1-orders-1-8",  // another job's
		"sluice-4f2a-orders-1-8b", // not a name of this scheme
	}
	abort, err := leftover.Abort(leftover.Request{
		Parser:      scheme,
		Subtask:     1,
		Parallelism: 2,
		Restored:    true,
		Checkpoint:  7,
		Existing:    existing,
		Needed:      []string{"sluice-4f2a-orders-1-7"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, gid := range abort {
		fmt.Println("ROLLBACK PREPARED", gid)
	}
	// Output:
	// ROLLBACK PREPARED sluice-4f2a-orders-1-8
	// ROLLBACK PREPARED sluice-4f2a-orders-3-8
}

// A sink that numbers its names with a counter of its own (the file sink's
// part files) or a pool of ids (Kafka's transactional ids) learns from the
// restored writer states where each old writer's checkpointed names end.
// The job ran at parallelism 4 (and once at 6, whose subtask 5 left
// something behind); restored at parallelism 2, the runtime handed the
// states of old subtasks 0 and 3 to writer 1.
func Example_states() {
	scheme := leftover.Scheme{Prefix: ".part-4f2a-", Suffix: ".inprogress"}
	existing := []string{
		".part-4f2a-0-11.inprogress", // below subtask 0's next counter: resumed or committed
		".part-4f2a-0-12.inprogress", // written after the checkpoint
		".part-4f2a-1-30.inprogress", // old subtask 1: its state went to writer 0
		".part-4f2a-3-9.inprogress",
		".part-4f2a-5-2.inprogress", // no state has subtask 5: 5 % 2 == 1
	}
	abort, err := leftover.Abort(leftover.Request{
		Parser:              scheme,
		Subtask:             1,
		Parallelism:         2,
		Restored:            true,
		PreviousParallelism: 4,
		States:              []leftover.State{{Subtask: 0, From: 12}, {Subtask: 3, From: 9}},
		Existing:            existing,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, name := range abort {
		fmt.Println("remove", name)
	}
	// Output:
	// remove .part-4f2a-0-12.inprogress
	// remove .part-4f2a-3-9.inprogress
	// remove .part-4f2a-5-2.inprogress
}
