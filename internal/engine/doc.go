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
// # How the coordinator is organised
//
// Each attempt (a run of the tasks between two global failures) has one
// coordinator goroutine: the one calling attempt.run, which sets the tasks
// up, steps on messages until the job ends or fails, and tears down. Only
// it touches the attempt's state, so nothing there is locked. Its state is
// split into parts with one job each; a part decides and never performs
// (no goroutines, mails or connector calls in it), so each is tested with
// table tests and could run with tasks in other processes:
//
//   - the checkpoint tracker (tracker.go): when a checkpoint may start,
//     which acknowledgements are missing, timeouts, tolerable failures;
//   - sink commit tracking (sinkCommits, commits.go): how far each sink
//     subtask committed, and the global commit to start next;
//   - savepoints (savepoints, savepoint.go): queued savepoint and stop
//     requests, and which checkpoint is a savepoint;
//   - failover (failover, failover.go): subtask generations, finished
//     subtasks, regions down or ready to restart, split assignments to hand
//     back after a regional restart;
//   - coordView (checkpoints.go) combines them to decide about periodic
//     checkpoints, savepoints and the final checkpoint.
//
// The attempt performs what they decide: checkpoints.go triggers, stores
// and completes checkpoints, region.go cancels and rebuilds regions,
// enumerators.go runs the enumerators, commits.go the global committers.
//
// Messages are typed (messages.go). Tasks and helper goroutines put a
// coordMsg into the coordinator's inbox, which never blocks the sender:
// splitRequestMsg, readerEventMsg, ackMsg, taskFinishedMsg, taskExitedMsg
// and committedMsg from tasks (each carries its sender's generation, and
// the coordinator drops those of tasks a regional restart replaced);
// asyncMsg, savedMsg, globalDoneMsg and regionReadyMsg from the
// coordinator's own helper goroutines. The coordinator talks to a task
// through its mailbox (a mail: splits, events, trigger, complete, abort,
// shutdown), which the task serves between polls.
//
// Goroutines and their owners: every task runs on a goroutine of its own,
// started by the attempt and awaited in teardown (per region too, for a
// regional restart); a sink subtask's committer goroutine belongs to its
// task, which stops and waits for it on close. The attempt owns, and
// teardown cancels and waits for, the goroutines that do blocking work
// for the coordinator: enumerator CallAsync calls, storing a checkpoint,
// one global commit per sink at a time, and waiting for a failed region's
// tasks to exit.
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
// # Task hosts
//
// Subtasks may run in other processes than their coordinator: on task
// hosts ([Config.Placement], [TaskHost]). The coordinator places each
// failover region on one host by a fixed rule (placement.go: spread
// round-robin when an attempt starts; a restarting region keeps its live
// host or moves to the least loaded one). On the coordinator's side a
// subtask on another host is a stand-in task whose mails go through a
// [Remote] (remote.go): every mail and every message back crosses a [Conn]
// in its wire form (wire.go), and the host ([Job.ServeTasks],
// remotehost.go) runs the real tasks in a host-side attempt whose inbox is
// forwarded. Exits of remote subtasks release the same wait groups as local
// ones, so teardown and regional failover work unchanged; a host whose
// link breaks is lost and its subtasks fail with [ErrHostLost]. [Loopback]
// runs a host in process through the wire form, for tests.
//
// With a record exchange ([Config.Network], network.go) the unit of
// placement is the forward chain instead of the region, so a job with a
// rebalance or hash edge spreads over its hosts: a channel of such an edge
// between two hosts is an internal/cluster/exchange stream (credit flow
// control, events in line), one in a process stays a Go channel. Such an
// edge needs a record codec (Graph.SetEdgeCodec); a broken channel fails
// its task with [ErrEdgeBroken], and the job, one failover region,
// restarts from its latest checkpoint.
//
// # Savepoints
//
// [Handle.TriggerSavepoint] and [Handle.StopWithSavepoint] write
// self-contained, relocatable snapshots that a job (at any parallelism)
// resumes from with Config.RestoreFrom; an intermediate savepoint commits
// nothing.
package engine
