package stream

import (
	"log/slog"

	"github.com/sluice-io/sluice/internal/engine"
)

// The types and values below are what running a job gives back. They are
// defined by the engine (an internal package) and named here so that stream
// is the one package a job author imports.
type (
	// Job is a built job, ready to Run or Start once. Environment.Build
	// returns it.
	Job = engine.Job
	// Handle controls a started job: Status, Savepoint, Cancel, Wait.
	Handle = engine.Handle
	// Result is what a finished job reports: its final state, attempts,
	// checkpoints and the error that ended it, if any.
	Result = engine.Result
	// Status is a point-in-time view of a running job.
	Status = engine.Status
	// State is a job's lifecycle state (Created, Running, Restarting,
	// Finished, Failed, Cancelled).
	State = engine.State
	// TaskError names the operator and subtask a failure came from; use
	// errors.As to get it from a Result's error.
	TaskError = engine.TaskError
	// CheckpointStats counts a job's checkpoints.
	CheckpointStats = engine.CheckpointStats
	// CompletedCheckpoint describes one completed checkpoint (id, time,
	// duration, size).
	CompletedCheckpoint = engine.CompletedCheckpoint
	// FailoverMode says what a task failure restarts; see Failover.
	FailoverMode = engine.Failover
)

// Job states.
const (
	Created    = engine.Created
	Running    = engine.Running
	Restarting = engine.Restarting
	Finished   = engine.Finished
	Failed     = engine.Failed
	Cancelled  = engine.Cancelled
)

// Failover modes (the default is FailoverRegion).
const (
	// FailoverRegion restarts only the pipelined region of the failed task.
	FailoverRegion = engine.FailoverRegion
	// FailoverFull restarts the whole job from its latest checkpoint.
	FailoverFull = engine.FailoverFull
)

// JobIDProperty is the checkpoint property that holds the job id.
const JobIDProperty = engine.JobIDProperty

// RecentCheckpoints is how many completed checkpoints Status keeps.
const RecentCheckpoints = engine.RecentCheckpoints

// Errors a job can end with; check them with errors.Is.
var (
	// ErrPanic marks a failure caused by a panic in user or connector code.
	ErrPanic = engine.ErrPanic
	// ErrInvalidJob marks a job graph that cannot run.
	ErrInvalidJob = engine.ErrInvalidJob
	// ErrNotRunning is returned by Handle methods once the job has ended.
	ErrNotRunning = engine.ErrNotRunning
	// ErrUnmatchedState marks a restore whose snapshot holds state for an
	// operator the job no longer has (see AllowNonRestoredState).
	ErrUnmatchedState = engine.ErrUnmatchedState
)

// DiscardLogger returns a logger that drops every record, for tests and
// examples that don't want the job's log.
func DiscardLogger() *slog.Logger { return engine.DiscardLogger() }

// NewJobID returns a fresh random job id.
func NewJobID() string { return engine.NewJobID() }
