// Package sinkrt holds the engine's type-erased view of a sink: committables
// and writer states as serialized bytes, and the outcome of each commit
// request. It depends on the standard library only, so that package sink
// can implement these interfaces (with exported methods on unexported types)
// without exposing them, and the engine can use them without knowing a
// sink's committable or state types.
package sinkrt

import "context"

// Outcome is what a committer decided about one request.
type Outcome int

const (
	// Committed: done.
	Committed Outcome = iota
	// AlreadyCommitted: done by an earlier attempt.
	AlreadyCommitted
	// Retry: commit again after a backoff (Data may have been updated).
	Retry
	// FailedKnown: given up, job goes on.
	FailedKnown
	// FailedUnknown: the job fails.
	FailedUnknown
)

func (o Outcome) String() string {
	names := [...]string{"committed", "already-committed", "retry", "failed-known", "failed-unknown"}
	if o < 0 || int(o) >= len(names) {
		return "outcome(?)"
	}
	return names[o]
}

// Request is a serialized committable on its way through a committer.
type Request struct {
	CheckpointID int64
	Data         []byte // serde.Marshal framing
	Retries      int
	// Set by Commit:
	Outcome Outcome
	Err     error
}

// Committer commits serialized committables. Commit settles every request's
// Outcome (and may replace Data for Retry).
type Committer interface {
	Commit(ctx context.Context, reqs []*Request) error
	Close() error
}

// GlobalCommitter is the erased sink.GlobalCommitter.
type GlobalCommitter interface {
	CommitGlobal(ctx context.Context, checkpointID int64, committed [][]byte) error
	Close() error
}

// Writer is the non-generic part of a writer: everything but Write. Its
// optional parts are no-ops when the sink's writer does not have them.
type Writer interface {
	Flush(ctx context.Context, endOfInput bool) error
	Close() error
	// PrepareCommitRaw returns serialized committables (nil if the sink
	// does not commit).
	PrepareCommitRaw(ctx context.Context, checkpointID int64) ([][]byte, error)
	// SnapshotRaw returns serialized writer states (nil if stateless).
	SnapshotRaw(ctx context.Context, checkpointID int64) ([][]byte, error)
	// WriteWatermark forwards a watermark if the writer wants it.
	WriteWatermark(ctx context.Context, watermark int64) error
	// NotifyCheckpointAborted forwards the notice if the writer wants it.
	NotifyCheckpointAborted(ctx context.Context, checkpointID int64) error
}
