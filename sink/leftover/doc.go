// Package leftover decides which prepared transactions a two-phase sink
// writer aborts when it starts: the ones that earlier attempts of its job
// prepared and that no completed checkpoint holds.
//
// An exactly-once sink prepares data at every checkpoint under names it
// can find again: Kafka transactional ids, PostgreSQL prepared-transaction
// gids, the file sink's hidden in-progress files. After a failure, a
// restart or a rescale, what was prepared after the restored checkpoint
// (or, with nothing restored, everything prepared) must be aborted —
// once, by exactly one writer, and never what a restored committable
// still commits, and never another job's. This package holds that
// decision as pure functions; listing the names and aborting them stays
// with the connector.
//
// # Names
//
// A [Scheme] names prepared transactions
//
//	<Prefix><subtask>-<seq><Suffix>
//
// where subtask is the writer that prepared it and seq a number that grows
// with what the writer prepares (a checkpoint id, a part-file counter, or
// a slot of a fixed pool of transactional ids). The prefix identifies the
// job and the sink (derive it from sink.InitContext's JobID and
// OperatorUID): a name with another prefix, or one that does not parse, is
// never aborted.
//
// # Who aborts what
//
// The names of old subtask j (the writer that prepared them, possibly at
// another parallelism) are the responsibility of exactly one new writer:
//
//   - Nothing restored (a fresh start, or a restart before the first
//     completed checkpoint): writer j % parallelism, every seq. Old
//     subtasks at or above the parallelism (a higher earlier parallelism)
//     are spread over the writers like that, each to one.
//   - Restored, with names numbered by checkpoint id
//     ([Request.Checkpoint]): writer j % parallelism, names with seq
//     greater than the restored checkpoint's id. Checkpoint ids never
//     repeat, so those were prepared after it, whichever writer holds
//     j's state (if the sink has any). The rules below are for names
//     numbered otherwise (a counter, a pool of ids), where only a
//     writer's state says where its checkpointed names end.
//   - Restored, and a restored writer state of old subtask j reached this
//     writer ([State]): this writer, names with seq >= State.From. The
//     runtime hands every restored writer state to exactly one writer, and
//     that writer is the one that knows where j's checkpointed names end
//     (and commits j's pending transactions before aborting the rest). A
//     state also travels with its leftovers when j still runs at the new
//     parallelism: the sink runtime creates every writer of an attempt
//     before any of them writes, so new writer j does not prepare anything
//     that the state's holder could take for a leftover.
//   - Restored, and j is at or above the previous parallelism (the
//     parallelism of the checkpoint restored from, when the writer knows
//     it): no state of j exists, so writer j % parallelism, every seq.
//   - Otherwise (j's state went to another writer, or the previous
//     parallelism is unknown and no state of j reached this writer): not
//     this writer.
//
// This is the rule the Kafka sink has always used for its transactional
// ids; the file sink uses it for its in-progress files.
//
// Names in [Request.Needed] — those that restored committables or writer
// states still commit or resume — are never aborted, whoever owns them.
package leftover
