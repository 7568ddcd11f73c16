// Package readerbase turns blocking, split-based reads into a non-blocking
// [source.Reader]: it is sluice's form of Flink's SourceReaderBase,
// SplitFetcherManager, SplitReader, RecordEmitter and element queue.
//
// # Threading model
//
//	fetcher goroutine(s)            bounded queue           task goroutine
//	SplitReader.Fetch(ctx) ──▶ [batch][batch] (capacity n) ──▶ Reader.PollNext
//	  blocking I/O                backpressure: a full           RecordEmitter.Emit
//	                              queue blocks the fetcher       → out.ForSplit(id)
//	                                                             → split state advances
//
// A [SplitReader] does the blocking I/O. It runs on a fetcher goroutine
// owned by the [Reader]: one for all splits ([SingleFetcher], the default)
// or one per split ([FetcherPerSplit]). Each [SplitReader.Fetch] returns a
// [Batch] of elements grouped by split; the fetcher puts it into a bounded
// queue whose capacity is counted in batches ([QueueCapacity], default 2).
// A fetcher with a full queue waits, which is the backpressure; a fetcher
// without an unpaused split waits for work without calling Fetch.
//
// The subtask's goroutine (the task goroutine) calls [Reader.PollNext],
// which never blocks: it takes one batch from the queue and runs every
// element through the connector's [RecordEmitter], which emits records and
// advances the split's mutable state. If the queue is empty it returns
// NothingAvailable, and [Reader.Available] gives a channel that is ready
// when a batch arrives or the reader's state changes. All split states live
// on the task goroutine and are touched only there, without locks, so
// [Reader.SnapshotState] sees exactly the progress of the emitted records.
// Batches still in the queue at a snapshot are not part of it; after a
// restore they are read again from the snapshot's positions, neither lost
// nor duplicated. A snapshot never falls inside a batch: PollNext emits a
// whole batch and the runtime snapshots between PollNext calls, so the
// batch is the unit of a snapshot: the split state after the batch's last
// element is what a checkpoint holds.
//
// The task goroutine hands splits and pause requests to a fetcher through a
// task list and wakes it: a fetcher blocked in Fetch is woken by cancelling
// the ctx of that Fetch with the cause [ErrWakeUp], then calls Fetch again
// with a fresh one. A Fetch the fetcher starts after taking a task is not
// interrupted for that task. Close cancels the fetchers' context, waits
// for every fetcher goroutine, and each fetcher closes its own
// SplitReader.
//
// # Writing a connector
//
// A connector author supplies, in a [Config]:
//
//   - a SplitReader (NewSplitReader) that reads the splits it is given
//     from their positions, returns batches, reports splits read to their
//     end in [Batch.Finished], and returns promptly when ctx is done;
//   - a RecordEmitter that turns an element into records (usually with
//     out.CollectAt) and moves the split state past it; one that also
//     implements [BatchEmitter] gets a split's whole group of a batch in
//     one call and may move the state once per group;
//   - a mutable split state SS (usually a pointer) with InitState and
//     ToSplit to convert between it and the split type.
//
// [New] then returns a *Reader, which the connector's
// [source.Source.CreateReader] returns. For pull assignment (the reader asks
// the enumerator for a split whenever it has none) add [PullSplits]. Pausing
// splits for watermark alignment works with FetcherPerSplit, or with a
// SplitReader that implements [source.SplitPauser].
//
// Errors from Fetch, AddSplits or PauseOrResumeSplits fail the reader: the
// next PollNext returns them, naming the fetcher and its splits. A panic in
// a SplitReader does not crash the process from the fetcher goroutine: the
// fetcher recovers, ends, and the next PollNext re-raises the panic on the
// task goroutine as a *[PanicError] (value, fetcher, splits, and the
// fetcher's stack), where the runtime fails the task with it. The Reader
// counts numRecordsFetched (elements handed to the emitter) once per batch
// in the ReaderContext's metric group; the runtime counts numRecordsIn.
package readerbase
