// Package source is sluice's split-based Source API, the Go form of Flink's
// FLIP-27.
//
// A [Source] is a factory for two roles:
//
//   - one [Enumerator] per source, running in the coordinator, that discovers
//     [Split]s and assigns them to readers — on request (pull) or as soon as
//     they are found (push) — and snapshots which splits are still
//     unassigned;
//   - one [Reader] per parallel subtask, running on the subtask's
//     goroutine, that reads its splits and snapshots them with their current
//     positions.
//
// At a checkpoint the coordinator snapshots every enumerator first and then
// asks each reader, through a FIFO mailbox, to snapshot; a split assigned
// before the enumerator's snapshot is therefore in a reader's snapshot, and
// one assigned after it is in the enumerator's, never both and never
// neither.
//
// Readers never block: [Reader.PollNext] returns MoreAvailable,
// NothingAvailable (then the runtime waits on [Reader.Available]) or
// EndOfInput. Package readerbase turns blocking fetches into such a reader;
// most connectors should start there. The runtime snapshots a reader only
// between two PollNext calls, so the records of one call — with readerbase,
// one fetched batch — are the unit of a snapshot: a split's position is
// snapshotted after a batch, never between two of its elements.
//
// Enumerators and readers exchange custom [Event]s both ways:
// [EnumeratorContext.SendEventToReader] and
// [ReaderContext.SendEventToEnumerator], received through the optional
// [ReaderEventHandler] and [EnumeratorEventHandler] interfaces.
//
// Optional notices: [CheckpointListener] (a checkpoint completed),
// [CommitListener] (readers only: every sink committed a checkpoint's
// output, the point at which to commit positions to an external system
// that a fresh run starts from) and [CheckpointAbortListener].
package source
