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

// savepoints is the coordinator's part that decides about savepoints and
// stop requests: it queues intermediate savepoints until they may start,
// knows which checkpoint is a savepoint, and whether the job is stopping.
// It performs nothing: its steps return the request to answer (or to
// start), and the attempt answers, triggers and notifies.
type savepoints struct {
	queue     []*savepointReq // intermediate savepoints waiting to start
	stopReq   *savepointReq   // a stop-with-savepoint request, until its checkpoint starts
	cur       *savepointReq   // the savepoint being taken, as checkpoint curID
	curID     int64
	stopping  bool // a stop was requested: final checkpoint, then end
	plainStop bool // Stop was called (not stop with savepoint)
}

// request steps on a savepoint request. finishing says the job is already
// taking or has taken its final checkpoint. A non-nil error is the answer
// to give right away; otherwise the request waits (queued, or as the stop).
func (s *savepoints) request(req *savepointReq, finishing bool) error {
	switch {
	case finishing:
		return fmt.Errorf("savepoint: the job is finishing: %w", ErrNotRunning)
	case req.stop && s.stopping:
		return errors.New("savepoint: the job is already stopping")
	case req.stop:
		s.stopping = true
		s.stopReq = req
	default:
		s.queue = append(s.queue, req)
	}
	return nil
}

// stop steps on Handle.Stop.
func (s *savepoints) stop() { s.stopping, s.plainStop = true, true }

// next returns the queued intermediate savepoint to take now as checkpoint
// id, if any; canStart says no checkpoint is pending, no region is down
// and the job is not finishing.
func (s *savepoints) next(canStart bool, id int64) *savepointReq {
	if len(s.queue) == 0 || !canStart || s.stopping {
		return nil
	}
	req := s.queue[0]
	s.queue = s.queue[1:]
	s.cur, s.curID = req, id
	return req
}

// final is told that the final checkpoint id starts: a stop with savepoint
// becomes that checkpoint.
func (s *savepoints) final(id int64) {
	if s.stopReq != nil {
		s.cur, s.curID, s.stopReq = s.stopReq, id, nil
	}
}

// of returns the savepoint request checkpoint id belongs to, or nil.
func (s *savepoints) of(id int64) *savepointReq {
	if s.cur != nil && s.curID == id {
		return s.cur
	}
	return nil
}

// saved steps on the successful save of checkpoint id. It returns the
// request to answer, if id is a savepoint.
func (s *savepoints) saved(id int64) *savepointReq {
	req := s.of(id)
	if req != nil {
		s.cur, s.curID = nil, 0
	}
	return req
}

// failed steps on the failure of checkpoint id. It returns the request to
// answer with the failure, if id is a savepoint; after a failed stop with
// savepoint the job runs on unless Stop was called too.
func (s *savepoints) failed(id int64) *savepointReq {
	req := s.of(id)
	if req == nil {
		return nil
	}
	s.cur, s.curID = nil, 0
	if req.stop {
		s.stopping = s.plainStop
	}
	return req
}

// drop returns every request still waiting, to be answered when the
// attempt ends.
func (s *savepoints) drop() []*savepointReq {
	out := s.queue
	s.queue = nil
	if s.cur != nil {
		out = append(out, s.cur)
	}
	if s.stopReq != nil {
		out = append(out, s.stopReq)
	}
	return out
}

// requestSavepoint takes a request on the coordinator goroutine.
func (a *attempt) requestSavepoint(req *savepointReq) {
	if err := a.sps.request(req, a.view().finishing()); err != nil {
		req.answer(checkpoint.Info{}, err)
	}
}

// maybeSavepoint starts the next queued intermediate savepoint once no
// checkpoint is pending.
func (a *attempt) maybeSavepoint() error {
	if a.sps.next(a.view().savepointMayStart(), a.tr.nextID) == nil {
		return nil
	}
	return a.trigger(false)
}

// savepointSaved settles a savepoint whose save finished (err == nil) or
// failed. It reports whether the checkpoint was an intermediate savepoint,
// which the caller must not treat as a completed checkpoint.
func (a *attempt) savepointSaved(p *pendingCheckpoint, info checkpoint.Info, err error) (intermediate bool, fail error) {
	if a.sps.of(p.id) == nil {
		return false, nil
	}
	if err != nil {
		_, err = a.savepointFailed(p.id, err)
		return true, err
	}
	req := a.sps.saved(p.id)
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
	req := a.sps.failed(id)
	if req == nil {
		return false, nil
	}
	cause = fmt.Errorf("savepoint %d into %s: %w", id, req.dir, cause)
	req.answer(checkpoint.Info{}, cause)
	a.job.log.Warn("savepoint failed", "id", id, "error", cause)
	a.tr.discard(id, time.Now())
	return true, a.notifyAborted(id)
}

// dropSavepoints answers every request still waiting when the attempt ends.
func (a *attempt) dropSavepoints(cause error) {
	err := fmt.Errorf("savepoint: %w: %w", ErrNotRunning, cause)
	for _, r := range a.sps.drop() {
		r.answer(checkpoint.Info{}, err)
	}
}
