package source

import (
	"context"
	"time"

	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/serde"
)

// Boundedness says whether a source ends.
type Boundedness int

const (
	// Bounded sources end: their enumerator eventually signals no more
	// splits and their readers report EndOfInput.
	Bounded Boundedness = iota
	// ContinuousUnbounded sources run until cancelled.
	ContinuousUnbounded
)

func (b Boundedness) String() string {
	if b == Bounded {
		return "bounded"
	}
	return "unbounded"
}

// Split is a numbered, self-describing chunk of input that carries its own
// progress: a reader snapshots a split with its current position, and the
// runtime can hand that snapshot to any reader to resume it.
type Split interface {
	// SplitID is unique among the splits of one source and stable across
	// snapshots of the same split.
	SplitID() string
}

// Event is a custom message between an enumerator and its readers (Flink's
// SourceEvent). The local runtime passes events by value in-process; a
// source that may run distributed should use serializable values.
type Event = any

// Source is a factory for the enumerator, the readers and the serializers of
// one source. T is the record type, S the split type, E the enumerator's
// checkpoint type.
//
// A Source value is created once per job and may be used from several
// goroutines; its methods must not keep per-reader state in the Source.
type Source[T any, S Split, E any] interface {
	// Boundedness tells whether this source ends.
	Boundedness() Boundedness
	// CreateEnumerator makes a new enumerator for a fresh start.
	CreateEnumerator(ctx EnumeratorContext[S]) (Enumerator[S, E], error)
	// RestoreEnumerator makes an enumerator from a checkpointed state.
	RestoreEnumerator(ctx EnumeratorContext[S], state E) (Enumerator[S, E], error)
	// CreateReader makes the reader of one parallel subtask.
	CreateReader(ctx ReaderContext) (Reader[T, S], error)
	// SplitSerializer serializes splits (with their progress) into
	// checkpoints.
	SplitSerializer() serde.Versioned[S]
	// EnumeratorStateSerializer serializes the enumerator's state.
	EnumeratorStateSerializer() serde.Versioned[E]
}

// ReaderInfo describes a registered reader.
type ReaderInfo struct {
	Subtask int
	// Location is where the reader runs ("local" in the local runtime).
	Location string
}

// Enumerator discovers splits and assigns them to readers. There is one per
// source; it runs in the coordinator.
//
// All methods are called from the coordinator goroutine, never concurrently,
// and must not block on I/O: slow discovery belongs in
// EnumeratorContext.CallAsync. Start is called once, before any other
// method; Close once, last. A returned error fails the job.
type Enumerator[S Split, E any] interface {
	// Start begins discovery. It is called once, first. The readers that
	// exist at start are already in RegisteredReaders, so Start may assign
	// to them; AddReader is called for each of them after Start.
	Start(ctx context.Context) error
	// HandleSplitRequest answers a reader that asked for a split (pull
	// assignment).
	HandleSplitRequest(subtask int, location string) error
	// AddSplitsBack returns splits that were assigned to a reader after the
	// last completed checkpoint, when that reader failed and restarts
	// without the enumerator restarting. The enumerator must assign them
	// again.
	AddSplitsBack(splits []S, subtask int) error
	// AddReader registers a reader (push assignment may start here). It is
	// also called when a reader registers again after its region restarted
	// (regional failover): the enumerator is not reset, the splits the old
	// reader got after the restore checkpoint came back through
	// AddSplitsBack just before, and the new reader knows nothing of what
	// the old one was told. The enumerator must therefore serve it afresh,
	// even if the old reader got SignalNoMoreSplits: a push enumerator
	// assigns it its splits again and, for a bounded source with nothing
	// left for it, calls SignalNoMoreSplits for it again; a pull enumerator
	// answers its new requests the same way (a split, or no-more-splits).
	// Otherwise the new reader never ends. Package source/enumerate
	// implements this rule.
	AddReader(subtask int) error
	// SnapshotState returns the enumerator's state for a checkpoint. It is
	// called before the readers are asked to snapshot, so a split assigned
	// before this call belongs to a reader's snapshot and a split assigned
	// after it to this one.
	SnapshotState(checkpointID int64) (E, error)
	// Close releases resources.
	Close() error
}

// EnumeratorEventHandler is implemented by enumerators that receive custom
// events from readers.
type EnumeratorEventHandler interface {
	HandleSourceEvent(subtask int, e Event) error
}

// CheckpointListener is implemented by enumerators and readers that want to
// know when a checkpoint completed (for example, to commit offsets to an
// external system for monitoring). The notice is best effort: a later
// completed checkpoint subsumes an earlier one whose notice was lost.
type CheckpointListener interface {
	NotifyCheckpointComplete(checkpointID int64) error
}

// CommitListener is implemented by readers that want to know when the
// output of a checkpoint is committed, not merely snapshotted (for example,
// to commit offsets to an external system that a fresh run starts from).
// NotifyCheckpointCommitted is called, on the reader's goroutine, after
// every sink of the job committed the output of checkpoint checkpointID and
// of all checkpoints before it (every subtask, and the global committer
// where the sink has one; a sink without a committer counts as committed
// once the checkpoint completed). It always comes after the checkpoint's
// NotifyCheckpointComplete. A checkpoint's notice may be skipped when a
// later one is sent, and a notice may be lost in a failover: the next one
// subsumes it.
type CommitListener interface {
	NotifyCheckpointCommitted(checkpointID int64) error
}

// CheckpointAbortListener is implemented by enumerators and readers that want
// to know when a checkpoint was aborted.
type CheckpointAbortListener interface {
	NotifyCheckpointAborted(checkpointID int64) error
}

// EnumeratorContext is the enumerator's view of the runtime. Its methods
// may only be called from the coordinator goroutine (the enumerator's own
// methods and CallAsync handlers), except where a method says otherwise.
type EnumeratorContext[S Split] interface {
	// Parallelism is the number of readers of this source.
	Parallelism() int
	// RegisteredReaders returns the readers registered so far, by subtask.
	RegisteredReaders() map[int]ReaderInfo
	// AssignSplits hands splits to readers. It enqueues them in the readers'
	// mailboxes before returning and never blocks. Assigning to a subtask
	// that is not registered is an error.
	AssignSplits(assignment map[int][]S) error
	// SignalNoMoreSplits tells a reader that it will get no more splits. A
	// bounded reader ends once it has read its splits and got this signal;
	// send it to readers that never got a split too.
	SignalNoMoreSplits(subtask int)
	// SendEventToReader sends a custom event to one reader.
	SendEventToReader(subtask int, e Event)
	// CallAsync runs fn off the coordinator goroutine, then handler with
	// its result on the coordinator goroutine. With period > 0, fn runs
	// again period after each run finished, until the enumerator closes.
	// The ctx passed to fn is cancelled when the enumerator closes. delay
	// is the wait before the first run.
	CallAsync(fn func(ctx context.Context) (any, error), handler func(result any, err error), delay, period time.Duration)
	// Metrics is the enumerator's metric group.
	Metrics() metrics.Group
	// FailJob fails the job with err, as an error returned from an
	// enumerator method would; for failures found in CallAsync handlers.
	// The job restarts per its restart strategy.
	FailJob(err error)
}

// InputStatus is what Reader.PollNext reports.
type InputStatus int

const (
	// MoreAvailable means PollNext should be called again right away.
	MoreAvailable InputStatus = iota
	// NothingAvailable means the caller should wait on Available.
	NothingAvailable
	// EndOfInput means the reader has finished all of its splits and got
	// no-more-splits; it will produce nothing more.
	EndOfInput
)

func (s InputStatus) String() string {
	switch s {
	case MoreAvailable:
		return "MoreAvailable"
	case NothingAvailable:
		return "NothingAvailable"
	case EndOfInput:
		return "EndOfInput"
	}
	return "InputStatus(?)"
}

// Reader reads the splits assigned to one parallel subtask.
//
// All methods are called from the subtask's goroutine, never concurrently.
// No method may block on I/O: blocking reads belong in goroutines the reader
// owns (see package readerbase). Start is called once, first; then
// AddSplits with restored splits, if any; Close once, last.
type Reader[T any, S Split] interface {
	// Start prepares the reader. A reader that pulls splits sends its first
	// split request here. ctx is cancelled when the subtask stops.
	Start(ctx context.Context) error
	// PollNext emits what is available into out and never blocks. Emitting
	// many records per call is encouraged.
	PollNext(out Output[T]) (InputStatus, error)
	// Available returns a channel that is ready (closed or readable) when
	// PollNext can make progress again after NothingAvailable. A new
	// channel may be returned after each PollNext.
	Available() <-chan struct{}
	// AddSplits adds splits assigned by the enumerator or restored from a
	// checkpoint.
	AddSplits(splits []S) error
	// NotifyNoMoreSplits says the enumerator will assign nothing more.
	NotifyNoMoreSplits()
	// SnapshotState returns the reader's unfinished splits with their
	// current positions. The caller owns the returned slice. It is called
	// between PollNext calls, never during one: the records one PollNext
	// call emits are the unit of a snapshot, and a position between two of
	// them is never snapshotted. A reader must therefore leave every split
	// at a resumable position when PollNext returns (records emitted and
	// position moved past them, together); it need not be resumable in
	// between. With package readerbase one PollNext emits one fetched
	// batch, so the batch is the unit (see readerbase.Batch).
	SnapshotState(checkpointID int64) ([]S, error)
	// Close releases resources and stops the reader's goroutines, waiting
	// for them.
	Close() error
}

// ReaderEventHandler is implemented by readers that receive custom events
// from their enumerator.
type ReaderEventHandler interface {
	HandleSourceEvent(e Event) error
}

// SplitPauser is implemented by readers that can pause and resume reading
// individual splits (used by watermark alignment).
type SplitPauser interface {
	PauseOrResumeSplits(pause, resume []string) error
}

// ReaderContext is a reader's view of the runtime. Its methods may be
// called from the subtask goroutine only, unless noted.
type ReaderContext interface {
	// SubtaskIndex is this reader's subtask, 0-based.
	SubtaskIndex() int
	// Parallelism is the number of readers of this source.
	Parallelism() int
	// Attempt counts restarts of the job: 0 on the first run.
	Attempt() int
	// JobID identifies the job across restarts and restores (see
	// sink.InitContext.JobID).
	JobID() string
	// SendSplitRequest asks the enumerator for a split (pull assignment).
	// It never blocks.
	SendSplitRequest()
	// SendEventToEnumerator sends a custom event to the enumerator. It
	// never blocks.
	SendEventToEnumerator(e Event)
	// Metrics is the reader's metric group (labels: operator, subtask).
	Metrics() metrics.Group
}

// Output receives a reader's records and watermarks. It is only valid
// during PollNext and on the subtask's goroutine.
type Output[T any] interface {
	// Collect emits a record without a timestamp of its own; the watermark
	// strategy's timestamp assigner may still give it one.
	Collect(v T)
	// CollectAt emits a record with the source's timestamp (milliseconds
	// since the epoch, like Flink's).
	CollectAt(v T, timestamp int64)
	// EmitWatermark emits a watermark on this output.
	EmitWatermark(ts int64)
	// MarkIdle marks this output idle until it emits again.
	MarkIdle()
	// ForSplit returns an output whose records and watermarks are tracked
	// for one split: the watermark strategy runs one generator per split,
	// and the reader's watermark is the minimum over its active splits.
	ForSplit(splitID string) Output[T]
	// ReleaseSplit drops the per-split output of a finished split.
	ReleaseSplit(splitID string)
}

// BatchCollector is an optional interface of the outputs the runtime hands
// to readers (the reader's output and its per-split outputs). A reader that
// produces records in slices may emit a whole slice with one call instead
// of one Collect per record; each record is treated as by Collect (no
// timestamp of its own). The output does not keep vs. Wrappers of an
// Output that do not implement it make readers fall back to Collect.
type BatchCollector[T any] interface {
	CollectBatch(vs []T)
}
