package coord

import (
	"context"
	"encoding/json"
	"fmt"
)

// State key layout. All of them are written only through fenced
// Leadership.Apply calls.
const (
	// CheckpointKey holds the pointer to the latest completed checkpoint
	// (JSON CheckpointPointer).
	CheckpointKey = "checkpoint/latest"
	// AssignmentPrefix is followed by "<source>/<split id>"; the value names
	// the subtask (and node) the split is assigned to.
	AssignmentPrefix = "assign/"
	// CommitPrefix is followed by "<checkpoint id>/<subtask>"; the value
	// records a committable's commit outcome, so a new leader knows which
	// prepared transactions of a completed checkpoint still need committing.
	CommitPrefix = "commit/"
)

// CheckpointPointer names the latest completed checkpoint. A checkpoint is
// complete when the leader's fenced write of its pointer succeeds.
type CheckpointPointer struct {
	// ID is the checkpoint id.
	ID int64 `json:"id"`
	// Location is where the checkpoint's metadata lives (an object-store
	// URL or a path on a shared file system).
	Location string `json:"location"`
	// Term is the Leadership.Term of the leader that completed it; set by
	// PublishCheckpoint.
	Term int64 `json:"term"`
}

// PublishCheckpoint completes a checkpoint: a fenced write of p (with Term
// set to l.Term()) to CheckpointKey. A leader that lost its term gets
// ErrFenced and the published pointer stays as its successor left it.
func PublishCheckpoint(ctx context.Context, l Leadership, p CheckpointPointer) error {
	if p.ID <= 0 {
		return fmt.Errorf("coord: checkpoint pointer %+v: id must be positive", p)
	}
	p.Term = l.Term()
	b, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("coord: encoding checkpoint pointer %d: %w", p.ID, err)
	}
	if err := l.Apply(ctx, Put(CheckpointKey, b)); err != nil {
		return fmt.Errorf("coord: publishing checkpoint %d: %w", p.ID, err)
	}
	return nil
}

// LatestCheckpoint reads the pointer to the latest completed checkpoint;
// ok is false when none was published.
func LatestCheckpoint(ctx context.Context, r Reader) (p CheckpointPointer, ok bool, err error) {
	b, ok, err := r.Get(ctx, CheckpointKey)
	if err != nil || !ok {
		return p, ok, err
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return p, false, fmt.Errorf("coord: decoding checkpoint pointer at %q: %w", CheckpointKey, err)
	}
	return p, true, nil
}
