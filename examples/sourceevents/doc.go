// Package sourceevents is a worked example of source events, the custom
// messages between a source's enumerator and its readers
// (source.ReaderContext.SendEventToEnumerator and
// source.EnumeratorContext.SendEventToReader, received through
// source.EnumeratorEventHandler and source.ReaderEventHandler).
//
// The source is a bounded work queue. Its splits are jobs of a number of
// items; the records are the items. Events flow both ways:
//
//   - work on request: a reader that has no job sends [NeedWork]; the
//     enumerator answers with a job (AssignSplits) or, once none is left,
//     with SignalNoMoreSplits;
//   - finished work: a reader that finished a job sends [Done] with the
//     number of items it emitted; the enumerator keeps a tally;
//   - pause and resume: once a given number of jobs is done (a milestone),
//     the enumerator sends [Pause] to every reader; each stops emitting and
//     answers [Paused] with the records it has emitted. When all have
//     paused, the next checkpoint (the enumerator learns that one starts
//     from its SnapshotState) captures exactly the work up to the
//     milestone; when it completes (NotifyCheckpointComplete) the
//     enumerator sends [Resume].
//
// Events are delivered in order with split assignments and checkpoint
// triggers (one FIFO mailbox per reader), and the runtime polls a reader
// again after every event, so a reader need not signal Available for them.
// Events are not part of checkpoints: after a failure the tally may count
// a job twice or miss one (and so the milestone may come late, or not at
// all), and a reader that starts during the pause — after a restore, or
// restarted alone — must be paused again (AddReader does it). Whatever must survive a failure belongs in the split or
// enumerator state, as the jobs' positions do. See README.md.
package sourceevents
