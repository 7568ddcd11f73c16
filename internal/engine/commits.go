package engine

import (
	"fmt"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/metrics"
)

// sinkCommits is the coordinator's part that tracks sink commits: for each
// sink, how far each subtask has committed and, for a sink with a global
// committer, the committables that the global committer has yet to finish.
// It performs nothing itself: its steps return the global commit to start
// (at most one per sink at a time), which the attempt runs on a goroutine
// of its own and reports back with a globalDoneMsg.
type sinkCommits struct {
	tracks   []*sinkTrack // in the job's vertex order
	byVertex map[string]*sinkTrack
}

// globalCommit is a global commit to run: the committables of every
// checkpoint up to upTo that all subtasks have committed.
type globalCommit struct {
	vertex string
	upTo   int64
	batch  [][]byte
}

func newSinkCommits() *sinkCommits { return &sinkCommits{byVertex: map[string]*sinkTrack{}} }

// add tracks the sink that ends the vertex with id vertex.
func (c *sinkCommits) add(vertex string, st *sinkTrack) {
	c.tracks = append(c.tracks, st)
	c.byVertex[vertex] = st
}

// committed steps on a committedMsg: the sink subtask committed every
// checkpoint up to upTo, items of them just now.
func (c *sinkCommits) committed(vertex string, subtask int, upTo int64, items []pendingCommittable) *globalCommit {
	st := c.byVertex[vertex]
	st.upTo[subtask] = max(st.upTo[subtask], upTo)
	if st.gc == nil {
		return nil
	}
	st.items = append(st.items, items...)
	return st.next(vertex)
}

// globalDone steps on a globalDoneMsg. A failed global commit fails the
// job (the batch stays in the global state for the restart).
func (c *sinkCommits) globalDone(vertex string, upTo int64, err error) (*globalCommit, error) {
	st := c.byVertex[vertex]
	st.running = false
	if err != nil {
		return nil, &TaskError{Operator: st.node.name + " (global committer)", Subtask: -1, Err: fmt.Errorf("commit checkpoint %d: %w", upTo, err)}
	}
	st.batch = nil
	st.globalDone = max(st.globalDone, upTo)
	return st.next(vertex), nil
}

// restarted records that a regional restart rebuilt the sink subtask,
// which has committed up to upTo.
func (c *sinkCommits) restarted(vertex string, subtask int, upTo int64) {
	c.byVertex[vertex].upTo[subtask] = upTo
}

// doneUpTo reports whether every sink has committed (globally, where it
// has a global committer) every checkpoint up to id.
func (c *sinkCommits) doneUpTo(id int64) bool {
	for _, st := range c.tracks {
		if st.doneUpTo() < id {
			return false
		}
	}
	return true
}

// globalStates returns the global-committer state of every sink that has a
// global committer, for the checkpoint being stored.
func (c *sinkCommits) globalStates() []checkpoint.TaskState {
	var out []checkpoint.TaskState
	for _, st := range c.tracks {
		if st.gc != nil {
			out = append(out, st.globalState())
		}
	}
	return out
}

// next returns the global commit of every checkpoint that all subtasks
// have committed, if one is due and none is running, and marks it running.
func (s *sinkTrack) next(vertex string) *globalCommit {
	upTo := s.minUpTo()
	if s.gc == nil || s.running || upTo <= s.globalDone {
		return nil
	}
	var batch [][]byte
	rest := s.items[:0]
	for _, it := range s.items {
		if it.checkpoint <= upTo {
			batch = append(batch, it.data)
			s.batch = append(s.batch, it)
		} else {
			rest = append(rest, it)
		}
	}
	s.items = rest
	s.running = true
	return &globalCommit{vertex: vertex, upTo: upTo, batch: batch}
}

// globalSuffix names the pseudo-vertex under which a sink's global
// committables are stored in a checkpoint.
const globalSuffix = "#global"

// globalState is the sink's global-committer state for a checkpoint: every
// committable the subtasks committed that the global committer has not
// finished with. It is taken when the checkpoint's last acknowledgement
// arrives; a subtask reports a commit before it acknowledges a later
// barrier, so a committable is either still pending in a subtask's state or
// here.
func (s *sinkTrack) globalState() checkpoint.TaskState {
	blobs := make([][]byte, 0, len(s.items)+len(s.batch))
	for _, list := range [][]pendingCommittable{s.batch, s.items} {
		for _, it := range list {
			blobs = append(blobs, encodeCommittable(it))
		}
	}
	return checkpoint.TaskState{Vertex: s.node.UID() + globalSuffix, Subtask: 0, Parallelism: 1,
		Parts: map[string][][]byte{partCommittables: blobs}}
}

func (s *sinkTrack) minUpTo() int64 {
	m := s.upTo[0]
	for _, u := range s.upTo[1:] {
		m = min(m, u)
	}
	return m
}

func (s *sinkTrack) doneUpTo() int64 {
	if s.gc != nil {
		return s.globalDone
	}
	return s.minUpTo()
}

// startGlobal runs a global commit that sinkCommits decided on (if any) on
// a goroutine of its own; it reports back with a globalDoneMsg.
func (a *attempt) startGlobal(gc *globalCommit) {
	if gc == nil {
		return
	}
	st := a.sinks.byVertex[gc.vertex]
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		log := a.job.log.With("operator", st.node.name, "subtask", "global committer")
		err := callSafely(log, "GlobalCommitter.CommitGlobal", func() error { return st.gc.CommitGlobal(a.ctx, gc.upTo, gc.batch) })
		a.inbox.Put(globalDoneMsg{vertex: gc.vertex, upTo: gc.upTo, err: err})
	}()
}

type coordInitContext struct {
	att         *attempt
	node        *Node
	parallelism int
}

func (c *coordInitContext) SubtaskIndex() int    { return 0 }
func (c *coordInitContext) Parallelism() int     { return c.parallelism }
func (c *coordInitContext) Attempt() int         { return c.att.number }
func (c *coordInitContext) JobName() string      { return c.att.job.name }
func (c *coordInitContext) JobID() string        { return c.att.job.id }
func (c *coordInitContext) RunID() string        { return c.att.job.runID }
func (c *coordInitContext) OperatorName() string { return c.node.name }
func (c *coordInitContext) OperatorUID() string  { return c.node.UID() }

func (c *coordInitContext) RestoredCheckpointID() (int64, bool) {
	return c.att.restoredID, c.att.restoredID > 0
}

func (c *coordInitContext) CheckpointInterval() time.Duration {
	return c.att.job.cfg.CheckpointInterval
}

func (c *coordInitContext) Metrics() metrics.Group {
	return c.att.job.metricRoot.With("operator", c.node.name).With("subtask", "coordinator")
}
