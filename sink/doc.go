// Package sink is sluice's Sink API, the Go form of Flink's FLIP-143/191
// two-phase-commit sinks.
//
// A [Sink] makes one [Writer] per parallel subtask. A plain sink writes and
// flushes; that gives at-most-once or, if Flush hands everything over,
// at-least-once delivery.
//
// Exactly-once needs two phases:
//
//  1. At checkpoint n every [CommittingWriter] prepares: it makes what it
//     got durable but invisible and returns committables (a transaction id,
//     a temporary file name). They are stored in checkpoint n.
//  2. Once checkpoint n is complete, each subtask's [Committer] commits n's
//     committables, in checkpoint order. After a failure, the committables
//     of the restored checkpoint are committed again, so a commit must be
//     idempotent: committing something already committed is a success
//     ([CommitRequest.SignalAlreadyCommitted]).
//
// Anything prepared that is not in a completed checkpoint must be aborted
// when the writer starts again ([InitContext.Attempt] and
// [InitContext.RestoredCheckpointID] tell it that it is restarting).
//
// A two-phase sink implements [TwoPhase] and is handed to the stream API
// through [NewTwoPhase] (or [NewStatefulTwoPhase]), which is how the runtime
// learns its committable type.
package sink
