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
// The kinds of sinks are distinct types, and the compiler checks their
// writers: a [TwoPhase] sink's CreateWriter returns a [CommittingWriter], a
// [Stateful] sink's a [StatefulWriter], a [StatefulTwoPhase] sink's a
// [StatefulCommittingWriter]. They are handed to the stream API through
// [NewTwoPhase], [NewStateful] and [NewStatefulTwoPhase], which is how the
// runtime learns the committable and state types (give the type arguments:
// Go does not infer them from a struct). A two-phase sink that also
// implements [GlobalCommitting] gets one global step per checkpoint.
//
// Every method that may block takes a [context.Context] first: the
// subtask's (the job's, for a global committer), cancelled when the job is
// cancelled or the subtask fails over. A writer or committer blocked on an
// external system returns when it is done. [InitContext] tells a writer or
// committer where it runs; [Meta] describes the record being written.
//
// Unit tests can drive writers and committers by hand with
// connectortest/fakes (fakes.InitContext); package connectortest checks a
// sink's guarantees through real jobs.
package sink
