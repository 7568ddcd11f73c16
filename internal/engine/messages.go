package engine

import (
	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/source"
)

// Messages to an attempt's coordinator goroutine. Each is a type of its
// own; the coordinator's inbox carries them as coordMsg and its step
// dispatches on the type. Messages from tasks carry their sender (vertex,
// subtask, generation) so that those of a task replaced by a regional
// restart are recognised and dropped.

// coordMsg is a message to the coordinator goroutine of an attempt.
type coordMsg interface{ coordMsg() }

// sender identifies the task that sent a message: subtask of the vertex
// with id vertex, in its generation gen (see taskEnv.gen). Messages from
// tasks hold plain data (ids, not pointers into the job graph), so that
// tasks could run in another process.
type sender struct {
	vertex  string
	subtask int
	gen     int
}

func (s sender) key() taskKey   { return taskKey{s.vertex, s.subtask} }
func (s sender) from() sender   { return s }
func (e *taskEnv) self() sender { return sender{vertex: e.v.id, subtask: e.subtask, gen: e.gen} }

// taskMsg is a message sent by a task.
type taskMsg interface {
	coordMsg
	from() sender
}

// splitRequestMsg: a reader asks its enumerator for a split
// (source.ReaderContext.SendSplitRequest).
type splitRequestMsg struct{ sender }

// readerEventMsg: a reader sends its enumerator an event.
type readerEventMsg struct {
	sender
	event source.Event
}

// ackMsg: a task snapshotted its state for checkpoint id and forwarded the
// barrier.
type ackMsg struct {
	sender
	id     int64
	states []checkpoint.TaskState
}

// taskFinishedMsg: a task reached the end of its input.
type taskFinishedMsg struct{ sender }

// taskExitedMsg: a task's goroutine returned, with the error that failed it
// (nil after a shutdown).
type taskExitedMsg struct {
	sender
	err error
}

// committedMsg: a sink subtask committed every committable of checkpoints
// up to upTo; committed are the committables it committed just now (for
// the global committer).
type committedMsg struct {
	sender
	upTo      int64
	committed []pendingCommittable
}

// asyncMsg: an enumerator's CallAsync function returned; handler runs its
// result handler on the coordinator goroutine. err is set instead when the
// function panicked.
type asyncMsg struct {
	v       *vertex
	handler func()
	err     error
}

// savedMsg: the storage finished saving checkpoint p (err == nil) or
// failed.
type savedMsg struct {
	p    *pendingCheckpoint
	info checkpoint.Info
	err  error
}

// globalDoneMsg: the global committer of the sink that ends vertex
// finished checkpoints up to upTo.
type globalDoneMsg struct {
	vertex string
	upTo   int64
	err    error
}

// regionReadyMsg: the tasks of a failed region exited and the restart
// delay passed (err == nil), or they did not exit in time.
type regionReadyMsg struct {
	region int
	err    error
}

func (splitRequestMsg) coordMsg() {}
func (readerEventMsg) coordMsg()  {}
func (ackMsg) coordMsg()          {}
func (taskFinishedMsg) coordMsg() {}
func (taskExitedMsg) coordMsg()   {}
func (committedMsg) coordMsg()    {}
func (asyncMsg) coordMsg()        {}
func (savedMsg) coordMsg()        {}
func (globalDoneMsg) coordMsg()   {}
func (regionReadyMsg) coordMsg()  {}
