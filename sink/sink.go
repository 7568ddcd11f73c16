package sink

import (
	"context"
	"errors"
	"time"

	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/serde"
)

// Sink is a factory for writers: one writer per parallel subtask. A Sink
// value is created once per job and may be used from several goroutines.
//
// A Sink that only implements this interface delivers at most what its
// writers flush; for exactly-once, implement [TwoPhase] and pass the sink
// through [NewTwoPhase].
type Sink[T any] interface {
	// CreateWriter makes the writer of one parallel subtask. ctx is
	// cancelled when the subtask is cancelled: a writer that connects to
	// an external system gives up when it is.
	CreateWriter(ctx context.Context, ic InitContext) (Writer[T], error)
}

// Meta describes the record being written.
type Meta struct {
	// Timestamp is the record's event time in milliseconds since the epoch;
	// valid when HasTimestamp.
	Timestamp    int64
	HasTimestamp bool
	// Watermark is the writer's current watermark (math.MinInt64 before
	// the first one).
	Watermark int64
}

// Writer writes the records of one subtask. Its methods are called from the
// subtask's goroutine only, never concurrently. Close is called once, last,
// also after failures.
//
// The ctx given to each method is the subtask's: it is cancelled when the
// job is cancelled or the subtask fails over, and a method blocked on an
// external system should return when it is.
type Writer[T any] interface {
	// Write hands the writer one record. It may buffer it.
	Write(ctx context.Context, v T, m Meta) error
	// Flush is called at every checkpoint (before PrepareCommit) and once at
	// the end of input with endOfInput set. A writer that claims
	// at-least-once must have handed every record it got to the external
	// system when Flush returns.
	Flush(ctx context.Context, endOfInput bool) error
	// Close releases resources. It must not make pending data visible.
	Close() error
}

// WatermarkWriter is implemented by writers that want watermarks.
type WatermarkWriter interface {
	WriteWatermark(ctx context.Context, watermark int64) error
}

// CommittingWriter is a writer of a two-phase-commit sink.
type CommittingWriter[T, C any] interface {
	Writer[T]
	// PrepareCommit is called at checkpoint checkpointID, after Flush: the
	// writer makes everything it got so far durable but not visible and
	// returns the committables that will make it visible once the
	// checkpoint completes. Names derived from checkpointID and the subtask
	// let recovery find what an attempt left behind. At the end of input it
	// is called once more, after Flush(ctx, true), with the id of the final
	// checkpoint.
	PrepareCommit(ctx context.Context, checkpointID int64) ([]C, error)
}

// StatefulWriter is a writer with state of its own that survives restarts.
type StatefulWriter[T, S any] interface {
	Writer[T]
	// SnapshotState returns the writer's state at checkpointID (after
	// PrepareCommit, for a committing writer). The caller owns the slice.
	SnapshotState(ctx context.Context, checkpointID int64) ([]S, error)
}

// StatefulCommittingWriter is a writer of a two-phase-commit sink with state
// of its own.
type StatefulCommittingWriter[T, C, S any] interface {
	CommittingWriter[T, C]
	// SnapshotState is called after PrepareCommit; see
	// [StatefulWriter.SnapshotState].
	SnapshotState(ctx context.Context, checkpointID int64) ([]S, error)
}

// CheckpointAbortListener is implemented by writers that want to know that a
// checkpoint they prepared was aborted.
type CheckpointAbortListener interface {
	NotifyCheckpointAborted(ctx context.Context, checkpointID int64) error
}

// TwoPhase is a sink whose writers prepare at a checkpoint and whose
// committers commit after the checkpoint completes. It is handed to the
// stream API through [NewTwoPhase]. Its writers are [CommittingWriter]s: a
// writer without PrepareCommit does not compile.
type TwoPhase[T, C any] interface {
	// CreateWriter makes the writer of one parallel subtask; see
	// [Sink.CreateWriter].
	CreateWriter(ctx context.Context, ic InitContext) (CommittingWriter[T, C], error)
	// CreateCommitter makes the committer of one sink subtask.
	CreateCommitter(ctx context.Context, ic InitContext) (Committer[C], error)
	// CommittableSerializer stores committables in checkpoints.
	CommittableSerializer() serde.Versioned[C]
}

// Stateful is a sink whose writers have state. It is handed to the stream
// API through [NewStateful].
type Stateful[T, S any] interface {
	// CreateWriter makes the writer of one parallel subtask on a fresh
	// start.
	CreateWriter(ctx context.Context, ic InitContext) (StatefulWriter[T, S], error)
	// RestoreWriter makes a writer from the states the writers of the
	// restored checkpoint returned. With a changed parallelism a writer
	// may get the states of several old writers, or none.
	RestoreWriter(ctx context.Context, ic InitContext, states []S) (StatefulWriter[T, S], error)
	// WriterStateSerializer stores writer states in checkpoints.
	WriterStateSerializer() serde.Versioned[S]
}

// StatefulTwoPhase is a two-phase sink with stateful writers. It is handed
// to the stream API through [NewStatefulTwoPhase].
type StatefulTwoPhase[T, C, S any] interface {
	// CreateWriter makes the writer of one parallel subtask on a fresh
	// start.
	CreateWriter(ctx context.Context, ic InitContext) (StatefulCommittingWriter[T, C, S], error)
	// RestoreWriter makes a writer from restored states; see
	// [Stateful.RestoreWriter].
	RestoreWriter(ctx context.Context, ic InitContext, states []S) (StatefulCommittingWriter[T, C, S], error)
	// CreateCommitter makes the committer of one sink subtask.
	CreateCommitter(ctx context.Context, ic InitContext) (Committer[C], error)
	// CommittableSerializer stores committables in checkpoints.
	CommittableSerializer() serde.Versioned[C]
	// WriterStateSerializer stores writer states in checkpoints.
	WriterStateSerializer() serde.Versioned[S]
}

// GlobalCommitting is implemented by two-phase sinks with one global step
// after the committers of a checkpoint have all committed: a table-format
// commit, compaction of small files, a marker file.
type GlobalCommitting[C any] interface {
	CreateGlobalCommitter(ctx context.Context, ic InitContext) (GlobalCommitter[C], error)
}

// GlobalCommitter runs once per completed checkpoint, in checkpoint order,
// with every committable that all subtasks committed for it. It runs off
// the coordinator goroutine and may block.
//
// Every committable reaches CommitGlobal at least once, also across
// failures: committables the subtasks committed but the global committer
// had not finished with are stored in each checkpoint and handed over
// again after a restore, possibly grouped with others and under a later
// checkpoint id. CommitGlobal must therefore be idempotent.
type GlobalCommitter[C any] interface {
	CommitGlobal(ctx context.Context, checkpointID int64, committed []C) error
	Close() error
}

// Committer commits the committables of completed checkpoints. It runs on a
// goroutine of its own (it may block) and is called with one checkpoint's
// requests at a time, in checkpoint order.
//
// Commit must settle each request by calling at most one of its Signal or
// Retry methods; a request left alone counts as committed. An error
// returned from Commit fails every request that was not settled with an
// unknown reason, which fails the job.
type Committer[C any] interface {
	Commit(ctx context.Context, reqs []CommitRequest[C]) error
	Close() error
}

// CommitRequest is one committable to commit and the committer's verdict on
// it.
type CommitRequest[C any] interface {
	// Committable is the value to commit.
	Committable() C
	// CheckpointID is the checkpoint the committable was prepared at.
	CheckpointID() int64
	// Retries is how often this request was retried before.
	Retries() int
	// RetryLater asks for the request to be committed again after a
	// backoff.
	RetryLater()
	// UpdateAndRetryLater replaces the committable and retries it later.
	UpdateAndRetryLater(c C)
	// SignalAlreadyCommitted says the committable was committed before (by
	// an earlier attempt); that is a success.
	SignalAlreadyCommitted()
	// SignalFailedWithKnownReason gives up on the committable: the failure
	// is reported loudly (log and numCommittablesFailure), and the job
	// goes on.
	SignalFailedWithKnownReason(err error)
	// SignalFailedWithUnknownReason fails the job; it restarts per its
	// restart strategy and commits the restored committables again.
	SignalFailedWithUnknownReason(err error)
}

// InitContext is what a writer or committer learns about where it runs.
type InitContext interface {
	// SubtaskIndex is the writer's subtask, 0-based.
	SubtaskIndex() int
	// Parallelism is the number of sink subtasks.
	Parallelism() int
	// Attempt counts restarts of the job: 0 on the first run.
	Attempt() int
	// JobName is the job's name, as the user gave it. Two jobs may share
	// a name; derive external names from JobID instead.
	JobName() string
	// JobID identifies this job: created at its first start, stored in
	// every checkpoint and savepoint, and the same after every restart and
	// restore. Two independently started jobs never share it. Sinks derive
	// the names of what they leave in external systems (transactional ids,
	// file names) from it, so that two jobs never touch each other's.
	JobID() string
	// OperatorName is the sink operator's name. It may change between
	// versions of a job; derive external names from OperatorUID.
	OperatorName() string
	// OperatorUID is the sink operator's stable id (Flink's uid, set with
	// stream.UID; by default its name): the key of its checkpoint state,
	// and unlike OperatorName the same when a job renames the operator.
	// Derive the names a sink leaves in external systems from JobID and
	// OperatorUID.
	OperatorUID() string
	// RestoredCheckpointID is the checkpoint the job was restored from.
	RestoredCheckpointID() (int64, bool)
	// Metrics is the writer's metric group.
	Metrics() metrics.Group
	// CheckpointInterval is the job's checkpoint interval, 0 when periodic
	// checkpoints are off. A sink whose prepared data expires (a Kafka
	// transaction timeout) can check its timeout against it.
	CheckpointInterval() time.Duration
}

// ErrCommitFailed is wrapped by the job error when a committer signalled a
// failure with an unknown reason.
var ErrCommitFailed = errors.New("sink: commit failed")
