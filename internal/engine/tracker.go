package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
)

// The checkpoint tracker is the I/O-free part of the checkpoint
// coordinator: it decides when a checkpoint may start, collects
// acknowledgements and notices timeouts. The attempt's coordinator
// goroutine drives it and does everything that touches the world.

var (
	errInProgress = errors.New("a checkpoint is in progress")
	errTooSoon    = errors.New("minimum pause between checkpoints not reached")
)

type taskKey struct {
	vertex  string
	subtask int
}

type pendingCheckpoint struct {
	id          int64
	final       bool
	started     time.Time
	deadline    time.Time
	enumerators map[string][]byte
	waiting     map[taskKey]bool
	states      []checkpoint.TaskState
	persisting  bool
	kind        checkpoint.Kind // set when it is persisted
}

type tracker struct {
	timeout   time.Duration
	minPause  time.Duration
	tolerable int

	tasks         []taskKey
	nextID        int64
	pending       *pendingCheckpoint
	lastEnd       time.Time
	failuresInRow int
}

func newTracker(tasks []taskKey, nextID int64, timeout, minPause time.Duration, tolerable int) *tracker {
	return &tracker{tasks: tasks, nextID: nextID, timeout: timeout, minPause: minPause, tolerable: tolerable}
}

// canTrigger says whether a (non-final) checkpoint may start now.
func (tr *tracker) canTrigger(now time.Time) error {
	if tr.pending != nil {
		return errInProgress
	}
	if !tr.lastEnd.IsZero() && now.Sub(tr.lastEnd) < tr.minPause {
		return errTooSoon
	}
	return nil
}

// begin starts checkpoint tr.nextID. The caller has checked canTrigger (a
// final checkpoint ignores the minimum pause but not a pending one).
func (tr *tracker) begin(now time.Time, final bool, enumerators map[string][]byte) *pendingCheckpoint {
	p := &pendingCheckpoint{id: tr.nextID, final: final, started: now, deadline: now.Add(tr.timeout),
		enumerators: enumerators, waiting: make(map[taskKey]bool, len(tr.tasks))}
	for _, k := range tr.tasks {
		p.waiting[k] = true
	}
	tr.nextID++
	tr.pending = p
	return p
}

// ack records one task's acknowledgement. It returns the checkpoint when
// it was the last one missing; stale acks (of aborted checkpoints) are
// ignored.
func (tr *tracker) ack(id int64, k taskKey, states []checkpoint.TaskState) (*pendingCheckpoint, error) {
	p := tr.pending
	if p == nil || p.id != id || p.persisting {
		return nil, nil
	}
	if !p.waiting[k] {
		return nil, fmt.Errorf("checkpoint %d: unexpected or duplicate acknowledgement from %s subtask %d", id, k.vertex, k.subtask)
	}
	delete(p.waiting, k)
	p.states = append(p.states, states...)
	if len(p.waiting) > 0 {
		return nil, nil
	}
	p.persisting = true
	return p, nil
}

// expired returns the pending checkpoint if its deadline passed. A
// checkpoint whose acknowledgements are all in is being stored: its fate is
// the store's result, not the clock's.
func (tr *tracker) expired(now time.Time) *pendingCheckpoint {
	if p := tr.pending; p != nil && !p.persisting && !now.Before(p.deadline) {
		return p
	}
	return nil
}

// fail ends the pending checkpoint id as failed and reports whether the
// job must fail because too many checkpoints failed in a row.
func (tr *tracker) fail(id int64, now time.Time) (fatal bool) {
	if tr.pending == nil || tr.pending.id != id {
		return false
	}
	tr.pending = nil
	tr.lastEnd = now
	tr.failuresInRow++
	return tr.failuresInRow > tr.tolerable
}

// discard ends the pending checkpoint id without counting it as a failure
// (a failed savepoint).
func (tr *tracker) discard(id int64, now time.Time) {
	if tr.pending != nil && tr.pending.id == id {
		tr.pending = nil
		tr.lastEnd = now
	}
}

// complete ends the pending checkpoint id as persisted.
func (tr *tracker) complete(id int64, now time.Time) {
	if tr.pending != nil && tr.pending.id == id {
		tr.pending = nil
		tr.lastEnd = now
		tr.failuresInRow = 0
	}
}
