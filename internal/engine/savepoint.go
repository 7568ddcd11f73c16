package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
)

// Savepoints are checkpoints the user asks for, written as self-contained,
// relocatable directories (checkpoint.SaveSavepoint) outside the job's
// checkpoint storage.
//
// As in Flink (FLIP-193), an intermediate savepoint does not commit side
// effects: readers, committers and enumerators are not told it completed,
// and what sinks prepared at its barrier stays pending, to be committed with
// the next checkpoint. A savepoint is not a restore point for failover
// either: the job restarts from its latest checkpoint. A savepoint that
// fails does not count against TolerableCheckpointFailures.
//
// Stop with savepoint is a final checkpoint written as a savepoint: sources
// stop reading at its barrier, sinks prepare, the savepoint is stored and
// committed, and the job finishes. If that savepoint fails, the job fails
// over and keeps running (as in Flink), and the caller gets the error.

// ErrNotRunning is returned (wrapped) by savepoint calls on a job that ended
// or is ending before the savepoint could be taken.
var ErrNotRunning = errors.New("job is not running")

type savepointReq struct {
	dir   string
	stop  bool
	reply chan savepointReply // buffered: the coordinator never waits
}

type savepointReply struct {
	info checkpoint.Info
	err  error
}

func (r *savepointReq) answer(info checkpoint.Info, err error) {
	select {
	case r.reply <- savepointReply{info, err}:
	default: // answered already
	}
}

// TriggerSavepoint takes a savepoint of the running job into dir (as
// dir/savepoint-<id>) and returns where it was written. The job keeps
// running. It waits for a pending checkpoint to end first.
func (h *Handle) TriggerSavepoint(ctx context.Context, dir string) (checkpoint.Info, error) {
	return h.savepoint(ctx, dir, false)
}

// StopWithSavepoint ends the job with a savepoint in dir: sources stop at
// its barrier, sinks prepare, the savepoint is written and committed, and
// the job finishes (Result.Stopped is set). Resuming from the savepoint
// (stream.RestoreFrom with checkpoint.Load) continues exactly where the
// committed output ends. If the savepoint fails, the job keeps running and
// the error is returned. It waits for the job to end or ctx to be done.
func (h *Handle) StopWithSavepoint(ctx context.Context, dir string) (checkpoint.Info, *Result, error) {
	info, err := h.savepoint(ctx, dir, true)
	if err != nil {
		return info, nil, err
	}
	select {
	case <-h.done:
		return info, h.res, h.err
	case <-ctx.Done():
		return info, nil, ctx.Err()
	}
}

func (h *Handle) savepoint(ctx context.Context, dir string, stop bool) (checkpoint.Info, error) {
	if dir == "" {
		return checkpoint.Info{}, errors.New("savepoint: no target directory")
	}
	req := &savepointReq{dir: dir, stop: stop, reply: make(chan savepointReply, 1)}
	select {
	case h.job.spC <- req:
	case <-h.done:
		return checkpoint.Info{}, fmt.Errorf("savepoint: %w", ErrNotRunning)
	case <-ctx.Done():
		return checkpoint.Info{}, fmt.Errorf("savepoint: %w", ctx.Err())
	}
	select {
	case r := <-req.reply:
		return r.info, r.err
	case <-ctx.Done():
		return checkpoint.Info{}, fmt.Errorf("savepoint: %w", ctx.Err())
	}
}

// requestSavepoint takes a request on the coordinator goroutine.
func (a *attempt) requestSavepoint(req *savepointReq) {
	switch {
	case a.finished == a.total || a.finalID != 0 || (a.tr.pending != nil && a.tr.pending.final):
		req.answer(checkpoint.Info{}, fmt.Errorf("savepoint: the job is finishing: %w", ErrNotRunning))
	case req.stop && a.stopping:
		req.answer(checkpoint.Info{}, errors.New("savepoint: the job is already stopping"))
	case req.stop:
		a.stopping = true
		a.stopSP = req
	default:
		a.spQueue = append(a.spQueue, req)
	}
}

// maybeSavepoint starts the next queued intermediate savepoint once no
// checkpoint is pending.
func (a *attempt) maybeSavepoint() error {
	if len(a.spQueue) == 0 || a.tr.pending != nil || a.stopping || a.finished == a.total || a.anyRegionDown() {
		return nil
	}
	req := a.spQueue[0]
	a.spQueue = a.spQueue[1:]
	id := a.tr.nextID
	a.sp, a.spID = req, id
	return a.trigger(false)
}

// savepointOf returns the savepoint request checkpoint id belongs to.
func (a *attempt) savepointOf(id int64) *savepointReq {
	if a.sp != nil && a.spID == id {
		return a.sp
	}
	return nil
}

// savepointSaved settles a savepoint whose save finished (err == nil) or
// failed. It reports whether the checkpoint was an intermediate savepoint,
// which the caller must not treat as a completed checkpoint.
func (a *attempt) savepointSaved(p *pendingCheckpoint, info checkpoint.Info, err error) (intermediate bool, fail error) {
	req := a.savepointOf(p.id)
	if req == nil {
		return false, nil
	}
	if err != nil {
		_, err = a.savepointFailed(p.id, err)
		return true, err
	}
	a.sp, a.spID = nil, 0
	req.answer(info, nil)
	if req.stop {
		return false, nil // the final checkpoint's usual path follows
	}
	now := time.Now()
	a.tr.complete(p.id, now)
	a.job.stats.savepoint(CompletedCheckpoint{ID: p.id, Kind: checkpoint.Savepoint, Completed: now, Duration: now.Sub(p.started), Size: info.Size})
	a.job.log.Info("savepoint complete", "id", p.id, "path", info.Path)
	return true, nil
}

// savepointFailed ends checkpoint id as a failed savepoint, if it is one
// (handled): the caller gets the error, sinks and readers hear it was
// aborted (what the sinks prepared stays pending), and it does not count as
// a failed checkpoint. After a failed stop with savepoint the job runs on:
// the abort notice makes the sources read again.
func (a *attempt) savepointFailed(id int64, cause error) (handled bool, err error) {
	req := a.savepointOf(id)
	if req == nil {
		return false, nil
	}
	a.sp, a.spID = nil, 0
	cause = fmt.Errorf("savepoint %d into %s: %w", id, req.dir, cause)
	req.answer(checkpoint.Info{}, cause)
	a.job.log.Warn("savepoint failed", "id", id, "error", cause)
	if req.stop {
		a.stopping = a.plainStop
	}
	a.tr.discard(id, time.Now())
	return true, a.notifyAborted(id)
}

// dropSavepoints answers every request still waiting when the attempt ends.
func (a *attempt) dropSavepoints(cause error) {
	err := fmt.Errorf("savepoint: %w: %w", ErrNotRunning, cause)
	for _, r := range a.spQueue {
		r.answer(checkpoint.Info{}, err)
	}
	a.spQueue = nil
	if a.sp != nil {
		a.sp.answer(checkpoint.Info{}, err)
	}
	if a.stopSP != nil {
		a.stopSP.answer(checkpoint.Info{}, err)
	}
}
