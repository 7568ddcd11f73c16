// Package faultinject injects deterministic failures into any source or sink
// through their public APIs, to prove exactly-once delivery under failure.
//
// A [Plan] lists [Fault]s: a reader that fails after N records
// ([AfterRecords]), a reader snapshot or writer pre-commit that fails at a
// checkpoint ([DuringSnapshot]), a committer that fails between prepare and
// commit ([BeforeCommit]) or after committing ([DuringCommit]), a writer that
// fails after N records ([WriterAfterRecords]), a writer that fails right
// after a successful pre-commit, leaving a prepared transaction behind
// ([AfterPrepareCommit]). In crash mode ([Plan.Crash]) the writers of a
// failed attempt are abandoned without Close, as kill -9 abandons them.
// [WrapSource] and [WrapSink]
// return a source and a sink that behave like the wrapped ones except where
// the plan says they fail. Every fault fires at most once across all
// attempts of a job, so a job restarted by its restart strategy eventually
// runs clean; share one *Plan between attempts.
//
// Record counts are per attempt: a fault with Records = 100 fires in the
// first attempt whose reader (or writer) of that subtask handles more than
// 100 records — exactly 100 records get through, the 101st is withheld and
// the call fails. Checkpoint faults fire at the first matching call whose
// checkpoint id is at least Checkpoint (a subtask that finished earlier may
// not see checkpoint n itself).
//
// [RandomPlan] makes a reproducible plan from a seed. Errors of injected
// faults wrap [ErrInjected] and are [*InjectedError]s naming the fault.
//
// A Plan is safe for concurrent use; wrapped readers, writers and
// committers are used like the ones they wrap.
package faultinject
