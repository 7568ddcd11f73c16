package engine

// Checkpoint triggering and completion: the attempt's side of the
// checkpoint protocol. The decisions (when a checkpoint may start, which
// acknowledgements are missing, timeouts, tolerable failures) are the
// tracker's (tracker.go); these methods perform them.

import (
	"fmt"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
)

// trigger starts a checkpoint: enumerators first, then a trigger into every
// source task's mailbox (DESIGN §3).
func (a *attempt) trigger(final bool) error {
	id := a.tr.nextID
	if a.job.beforeTrigger != nil {
		a.job.beforeTrigger(id)
	}
	// Assignments from here on are not in this checkpoint's reader states.
	a.fo.checkpointBegins(id)
	enums := map[string][]byte{}
	a.holding = true
	defer a.releaseHeld()
	for _, ec := range a.enumsInOrder() {
		b, err := ec.enum.snapshot(id)
		if err != nil {
			return enumError(ec.v, fmt.Sprintf("snapshot at checkpoint %d", id), err)
		}
		enums[ec.v.head().UID()] = b
	}
	if final {
		a.sps.final(id)
	}
	a.tr.begin(time.Now(), final, enums)
	a.job.nextCheckpointID = a.tr.nextID
	a.timeout.Reset(a.job.cfg.CheckpointTimeout)
	for _, v := range a.job.vertices {
		if v.head().kind != kindSource {
			continue
		}
		for _, t := range a.tasks[v] {
			t.post(mail{kind: mailTrigger, id: id, stop: final && a.sps.stopping})
		}
	}
	return nil
}

// acked records a task's acknowledgement; after the last one the
// checkpoint, with the sinks' global-committer state, is stored.
func (a *attempt) acked(m ackMsg) error {
	p, err := a.tr.ack(m.id, m.key(), m.states)
	if err != nil || p == nil {
		return err
	}
	p.states = append(p.states, a.sinks.globalStates()...)
	a.persist(p)
	return nil
}

// saved settles a stored (or failed) checkpoint: a savepoint's own way,
// else completed or failed.
func (a *attempt) saved(m savedMsg) error {
	p := m.p
	intermediate, err := a.savepointSaved(p, m.info, m.err)
	if intermediate || err != nil {
		return err
	}
	if m.err != nil {
		return a.checkpointFailed(p.id, fmt.Errorf("persist checkpoint %d: %w", p.id, m.err))
	}
	return a.checkpointComplete(p, m.info.Size)
}

// releaseHeld delivers the mails enumerators sent while being snapshotted.
func (a *attempt) releaseHeld() {
	a.holding = false
	for _, h := range a.held {
		a.tasks[h.v][h.subtask].post(h.m)
	}
	clear(a.held)
	a.held = a.held[:0]
}

func (a *attempt) persist(p *pendingCheckpoint) {
	j := a.job
	snap := &checkpoint.Snapshot{ID: p.id, Kind: checkpoint.Checkpoint, JobName: j.name, Timestamp: p.started,
		Enumerators: p.enumerators, Tasks: p.states, Properties: map[string]string{JobIDProperty: j.id}}
	for _, v := range j.vertices {
		for _, n := range v.nodes {
			snap.Properties["parallelism/"+n.UID()] = fmt.Sprint(v.parallelism)
		}
	}
	sp := a.sps.of(p.id)
	if sp != nil {
		snap.Kind = checkpoint.Savepoint
	}
	p.kind = snap.Kind
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		var info checkpoint.Info
		// The storage is pluggable: a panic in it fails the checkpoint.
		err := callSafely(j.log, "checkpoint storage", func() (err error) {
			if ss, ok := j.storage.(SavepointStorage); ok && sp != nil {
				info, err = ss.SaveSavepoint(a.ctx, sp.dir, snap)
			} else if sp != nil {
				info, err = checkpoint.SaveSavepoint(a.ctx, sp.dir, snap)
			} else {
				info, err = j.storage.Save(a.ctx, snap)
			}
			return err
		})
		if err == nil && info.Warning != nil {
			j.log.Warn("checkpoint saved with a warning", "id", snap.ID, "warning", info.Warning)
		}
		j.mu.Lock()
		// An intermediate savepoint is no restore point for failover: its
		// side effects are not committed.
		if err == nil && (sp == nil || sp.stop) {
			j.latest = snap
		}
		j.mu.Unlock()
		a.inbox.Put(savedMsg{p: p, info: info, err: err})
	}()
}

func (a *attempt) checkpointComplete(p *pendingCheckpoint, size int64) error {
	now := time.Now()
	a.tr.complete(p.id, now)
	j := a.job
	j.stats.completed(CompletedCheckpoint{ID: p.id, Kind: p.kind, Completed: now, Duration: now.Sub(p.started), Size: size})
	j.log.Debug("checkpoint complete", "id", p.id, "final", p.final, "duration", now.Sub(p.started), "size", size)
	a.fo.checkpointComplete(p.id)
	for _, v := range j.vertices {
		for _, t := range a.tasks[v] {
			t.post(mail{kind: mailComplete, id: p.id})
		}
	}
	for _, ec := range a.enumsInOrder() {
		if err := ec.enum.notifyComplete(p.id); err != nil {
			return enumError(ec.v, fmt.Sprintf("notify checkpoint %d complete", p.id), err)
		}
	}
	if p.final {
		a.finalID = p.id
	}
	a.lastCompleted = max(a.lastCompleted, p.id)
	a.notifyCommitted() // a job whose sinks commit nothing
	if !p.final && p.kind == checkpoint.Checkpoint {
		return a.maybeMove(p.id, now)
	}
	return nil
}

// notifyCommitted tells the source tasks the latest checkpoint that
// completed in this attempt and that every sink has committed, with all
// before it, unless they were told already (source.CommitListener).
func (a *attempt) notifyCommitted() {
	upTo := a.lastCompleted
	for _, st := range a.sinks.tracks {
		upTo = min(upTo, st.doneUpTo())
	}
	if upTo <= a.committedSent {
		return
	}
	a.committedSent = upTo
	for _, v := range a.job.vertices {
		if v.head().kind != kindSource {
			continue
		}
		for _, t := range a.tasks[v] {
			t.post(mail{kind: mailCommitted, id: upTo})
		}
	}
}

func (a *attempt) checkpointFailed(id int64, cause error) error {
	j := a.job
	if handled, err := a.savepointFailed(id, cause); handled {
		return err
	}
	j.stats.failed()
	j.log.Warn("checkpoint failed", "id", id, "error", cause)
	if a.tr.fail(id, time.Now()) {
		return fmt.Errorf("%w (tolerable checkpoint failures: %d)", cause, j.cfg.TolerableCheckpointFailures)
	}
	return a.notifyAborted(id)
}

// notifyAborted tells every task and enumerator that checkpoint id was
// aborted.
func (a *attempt) notifyAborted(id int64) error {
	j := a.job
	for _, v := range j.vertices {
		for _, t := range a.tasks[v] {
			t.post(mail{kind: mailAbort, id: id})
		}
	}
	for _, ec := range a.enumsInOrder() {
		if err := ec.enum.notifyAborted(id); err != nil {
			return enumError(ec.v, fmt.Sprintf("notify checkpoint %d aborted", id), err)
		}
	}
	return nil
}

// coordView is what the coordinator's decisions about starting
// checkpoints and ending the job look at, taken from its parts.
type coordView struct {
	allFinished    bool  // every subtask reached the end of its input
	stopping       bool  // a stop was requested
	regionDown     bool  // a region is being restarted
	pending        bool  // a checkpoint is pending
	pendingFinal   bool  // the pending checkpoint is the final one
	finalID        int64 // the final checkpoint, once it completed
	finalCommitted bool  // every sink committed the final checkpoint
}

func (a *attempt) view() coordView {
	v := coordView{allFinished: a.fo.allFinished(), stopping: a.sps.stopping, regionDown: a.fo.anyDown(),
		pending: a.tr.pending != nil, finalID: a.finalID}
	v.pendingFinal = v.pending && a.tr.pending.final
	v.finalCommitted = v.finalID != 0 && a.sinks.doneUpTo(v.finalID)
	return v
}

// periodicDue says whether a periodic checkpoint may start, given the
// tracker's answer (minimum pause, one at a time).
func (v coordView) periodicDue(canTrigger error) bool {
	return !v.stopping && !v.allFinished && !v.regionDown && canTrigger == nil
}

// savepointMayStart says whether a queued intermediate savepoint may start.
func (v coordView) savepointMayStart() bool { return !v.pending && !v.allFinished && !v.regionDown }

// finishing says whether the job is taking or took its final checkpoint:
// savepoints are refused.
func (v coordView) finishing() bool { return v.allFinished || v.finalID != 0 || v.pendingFinal }

// finishStep is what the end of the job needs next.
type finishStep int

const (
	finishWait         finishStep = iota // nothing to do yet
	finishTriggerFinal                   // take the final checkpoint
	finishDone                           // the final checkpoint is committed: end
)

// finish decides about the end of the job. Once every task reached the
// end of its input, or a stop was requested, the final checkpoint is taken
// (once no other is pending and no region is down); the attempt ends once
// that checkpoint is committed. Sources stop reading at a stop's final
// barrier.
func (v coordView) finish() finishStep {
	switch {
	case (!v.allFinished && !v.stopping) || v.regionDown:
		return finishWait
	case v.finalID == 0 && !v.pending:
		return finishTriggerFinal
	case v.finalID != 0 && v.finalCommitted:
		return finishDone
	}
	return finishWait
}

// maybeFinish performs what finish decides.
func (a *attempt) maybeFinish() error {
	switch a.view().finish() {
	case finishTriggerFinal:
		return a.trigger(true)
	case finishDone:
		a.done = true
	}
	return nil
}
