// Package engine executes sluice jobs in one process: it plans a job
// graph into tasks, runs them, checkpoints them, and restarts them.
//
// Most users build jobs with package stream, which fills a [Graph] and a
// [Config]; this package is what runs them.
//
// # Tasks
//
// Operators connected one-to-one with equal parallelism are chained into a
// vertex; each parallel instance of a vertex (a subtask) is one goroutine
// running a mailbox loop. The loop polls its head — a source reader, which
// never blocks, or the channels from upstream tasks — and between polls
// serves its mailbox: split assignments, checkpoint triggers, completion
// notices, commit results. Records cross tasks in batches over bounded
// channels, so a full channel slows the sender (backpressure); chained
// operators process a batch at a time with plain calls.
//
// # Checkpoints
//
// The coordinator goroutine of each attempt owns the enumerators and a
// checkpoint tracker. A checkpoint snapshots every enumerator first, then
// puts a trigger into every source subtask's mailbox; mailboxes are FIFO,
// and mails an enumerator sends while being snapshotted are held back until
// the triggers are out, so every split is in exactly one of the two
// snapshots. Sources snapshot their splits and send a barrier in line with
// their records; a task with inputs aligns the barrier on all of them;
// sinks flush and prepare. When every subtask has acknowledged, the
// checkpoint is stored (atomically, see package checkpoint) and only then
// complete: committers commit its committables, in checkpoint order, on a
// goroutine of their own, and readers and enumerators are notified.
//
// A bounded job whose sources all ended takes a final checkpoint and ends
// once its committables are committed.
//
// # Failover
//
// A task failure restarts, if the restart strategy allows, only the failed
// task's region — the subtasks connected to it by forward edges — from the
// latest completed checkpoint, while other regions keep running; splits
// assigned to its readers since that checkpoint go back to the enumerator
// (see [FailoverRegion]). A job whose tasks exchange records over rebalance
// or hash edges is one region, and coordinator-side failures restart the
// whole job ([FailoverFull] forces that always). Either way committables of
// the restore checkpoint are committed again and sinks abort anything
// newer.
//
// A panic in connector or user code — on a task goroutine, a committer or
// global committer goroutine, a readerbase fetcher, an enumerator call or
// one of its CallAsync functions — is recovered and fails the task (or,
// coordinator-side, the job) like an error: a [*TaskError] naming the
// operator and subtask wraps [ErrPanic] and the panic value; the stack is
// logged, not put in the error. It goes through the restart strategy.
//
// # Savepoints
//
// [Handle.TriggerSavepoint] and [Handle.StopWithSavepoint] write
// self-contained, relocatable snapshots that a job (at any parallelism)
// resumes from with Config.RestoreFrom; an intermediate savepoint commits
// nothing.
package engine
