package readerbase

import (
	"context"

	"github.com/sluice-io/sluice/source"
)

// Batch is what one [SplitReader.Fetch] call returns: records grouped by
// split, and the splits that have been read to their end. It is the unit
// the hand-over queue counts (see [QueueCapacity]).
//
// The batch is the unit of a snapshot. [Reader.PollNext] emits a whole
// batch and the runtime snapshots only between PollNext calls, so the split
// state a checkpoint holds is always the state after a split's last element
// in some batch, never after an element in the middle of its group. A
// SplitReader must therefore end each split's group at a position the
// external system can resume from (a whole page of a cursor-paged API, a
// whole framed record, a Kafka offset), and the [RecordEmitter] must leave
// the split state at that position after the group's last element. States
// after earlier elements of the group are never snapshotted and need not be
// resumable (an element may be a whole page, and the emitter may move the
// position once per page, as examples/httpsource does). A source whose
// position can only be taken between batches must not rely on a snapshot
// inside a batch, and one whose every element has its own position loses
// nothing by this rule: it is only the granularity at which the position is
// saved.
//
// A batch is handed from the fetcher goroutine to the task goroutine; after
// Fetch returns it, the SplitReader must not modify the batch or the slices
// it references until Recycle is called.
type Batch[E any] struct {
	// Records holds the fetched elements, grouped by split. Within one
	// split the elements are in read order, and a split's groups across
	// batches are emitted in the order Fetch returned them.
	Records []SplitRecords[E]
	// Finished lists the splits that have been read to their end, including
	// everything in Records. The reader emits the batch's records first,
	// then finishes these splits. A finished split must not appear in any
	// later batch.
	Finished []string
	// Recycle, if not nil, is called once when the reader no longer needs
	// the batch's slices, so a SplitReader can pool its buffers. It is
	// called from the task goroutine after the batch was emitted, or from
	// the fetcher goroutine if the batch was empty and dropped, so it must
	// be safe for use from any goroutine. It is not called for batches
	// discarded because the reader closed or failed.
	Recycle func()
}

// SplitRecords is the part of a [Batch] that belongs to one split.
type SplitRecords[E any] struct {
	SplitID string
	Records []E
}

// empty reports whether the batch carries neither records nor finished
// splits, so that the fetcher can drop it instead of queueing it.
func (b *Batch[E]) empty() bool {
	if len(b.Finished) > 0 {
		return false
	}
	for _, g := range b.Records {
		if len(g.Records) > 0 {
			return false
		}
	}
	return true
}

func (b *Batch[E]) recycle() {
	if b.Recycle != nil {
		b.Recycle()
	}
}

// SplitReader reads splits from the external system; it is the part of a
// connector that does blocking I/O. E is the fetched element type (raw
// bytes, a client library's record, …) and S the split type.
//
// Each SplitReader belongs to one fetcher goroutine: all of its methods are
// called from that goroutine, one at a time, never concurrently. The fetcher
// calls AddSplits (and PauseOrResumeSplits, if implemented) between Fetch
// calls, then Close once, last, when the fetcher stops. A SplitReader is
// created by [Config.NewSplitReader] on the task goroutine and is not used
// there.
//
// A SplitReader may implement [source.SplitPauser]; PauseOrResumeSplits is
// then called on the fetcher goroutine with the ids of splits to stop and to
// restart reading (see [Reader.PauseOrResumeSplits]).
type SplitReader[E any, S source.Split] interface {
	// Fetch reads the next batch from the splits added so far. The fetcher
	// only calls it while it has at least one unfinished split that is not
	// paused.
	//
	// Fetch may block until data arrives, but it must return promptly once
	// ctx is done. The fetcher cancels ctx both to stop and to wake Fetch
	// up, when it has new splits or a pause to hand over; it then calls
	// Fetch again with a fresh ctx. A wake-up cancels ctx with the cause
	// [ErrWakeUp] (context.Cause), and only a Fetch that began before the
	// fetcher took the task it hands over. A Fetch that has already taken
	// records from the external system when ctx is done should return
	// them: after ctx is done the returned error is ignored and a
	// non-empty batch is kept (unless the reader is stopping). An error
	// returned while ctx is not done fails the reader: [Reader.PollNext]
	// returns it.
	//
	// Since an error is ignored after a wake-up, a Fetch cut short by one
	// must keep every split it holds, at its position: the fetcher goes
	// on calling Fetch for each split it has not seen in
	// [Batch.Finished], so a split the SplitReader drops without
	// reporting it finished is never read to its end and the reader never
	// reaches end of input. A SplitReader that dropped state on an error
	// should return that error again from every later Fetch (a sticky
	// error), which then fails the reader. I/O that must outlive one
	// Fetch (a file opened with a ctx it keeps for later reads) should
	// not use ctx itself but one that is cancelled when ctx is done with
	// a cause other than ErrWakeUp.
	//
	// An empty batch is allowed (for example after an internal poll
	// timeout), but Fetch should block rather than return empty batches in
	// a tight loop.
	Fetch(ctx context.Context) (Batch[E], error)
	// AddSplits hands new splits to the reader. Each split carries the
	// position to start from (a restored split carries the position of its
	// snapshot). The reader owns nothing of the slice after it returns; it
	// may keep the splits. An error fails the reader.
	AddSplits(splits []S) error
	// Close releases resources. It is called once, on the fetcher
	// goroutine, after the last Fetch (or on the task goroutine, for a
	// SplitReader that never got a fetcher because AddSplits failed). Its
	// error is returned by [Reader.Close].
	Close() error
}

// RecordEmitter turns fetched elements into records on the task goroutine:
// it converts e, emits zero or more records to out (usually with
// out.CollectAt for event time), and advances the split's state past e, so
// that a snapshot taken after Emit resumes after e.
//
// Emit is called only from the task goroutine, during [Reader.PollNext];
// out is the split's own output (out.ForSplit) and is valid only during the
// call. An error fails the reader; it should name the position and the
// cause.
type RecordEmitter[E, T, SS any] interface {
	Emit(e E, out source.Output[T], state SS) error
}

// EmitterFunc adapts a function to a [RecordEmitter].
type EmitterFunc[E, T, SS any] func(e E, out source.Output[T], state SS) error

// Emit calls f(e, out, state).
func (f EmitterFunc[E, T, SS]) Emit(e E, out source.Output[T], state SS) error {
	return f(e, out, state)
}

// BatchEmitter is an optional interface of a [RecordEmitter]. When
// [Config.Emitter] implements it, the [Reader] hands each split's group of
// a fetched batch to EmitBatch in one call instead of calling Emit once
// per element, so that a connector can advance the split state and its
// per-split metrics once per group and keep its per-record loop free of
// interface calls. Emit is then not called by the Reader.
//
// EmitBatch gets the group's elements in read order (never an empty
// slice) and must emit, in order, what Emit would emit for each of them,
// and leave state where Emit would leave it after the last one. States
// after earlier elements of the group are never snapshotted (see [Batch]),
// so EmitBatch may move the position once. It is called on the task
// goroutine during [Reader.PollNext]; out is the split's own output and
// es belong to the batch: both are valid only during the call (the
// elements themselves may be emitted as records). An error fails the
// reader and should name the position and the cause; numRecordsFetched
// then counts the whole group.
type BatchEmitter[E, T, SS any] interface {
	RecordEmitter[E, T, SS]
	EmitBatch(es []E, out source.Output[T], state SS) error
}

// BatchEmitterFunc adapts a function that emits a group of elements to a
// [BatchEmitter]. Its Emit calls the function with a one-element slice.
type BatchEmitterFunc[E, T, SS any] func(es []E, out source.Output[T], state SS) error

// Emit calls f with the one element e.
func (f BatchEmitterFunc[E, T, SS]) Emit(e E, out source.Output[T], state SS) error {
	return f([]E{e}, out, state)
}

// EmitBatch calls f(es, out, state).
func (f BatchEmitterFunc[E, T, SS]) EmitBatch(es []E, out source.Output[T], state SS) error {
	return f(es, out, state)
}
