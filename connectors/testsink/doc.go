// Package testsink holds sinks for tests and examples, writing into a
// [Store]: an in-memory external system that outlives job attempts.
//
// [NewTwoPhase] is a true two-phase-commit sink. Writers stage their records
// in the store at each checkpoint under a deterministic transaction id
// ("<job>/<operator>/<subtask>/<checkpoint>"); committers make them visible
// once the checkpoint completes; commits are idempotent; and a writer that
// starts after a failure aborts what its subtask prepared after the
// restored checkpoint. A test proves exactly-once by comparing
// [Store.Final] with the input: every record present, none twice, nothing
// left staged.
//
// [NewCollect] is a plain at-least-once sink that appends to the committed
// log at every flush.
//
// A Store is safe for concurrent use; writers and committers are used as
// the sink API says (writers from one subtask goroutine, committers from
// their own).
package testsink
