package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/internal/cluster/coord"
)

// Storage is the checkpoint storage of a leader's job: Save stores the
// snapshot in the inner storage and then completes it with the fenced
// write of its pointer (coord.PublishCheckpoint). See the package doc.
//
// The inner storage must not prune on its own (checkpoint.Retain(0), or
// retain 0 for S3): Storage prunes after each publish, keeping the newest
// retain checkpoints of the inner storage, the published one among them.
type Storage struct {
	inner  checkpoint.Storage
	l      coord.Leadership
	lost   func(error)
	retain int
	log    *slog.Logger
	// published, when set, is called once after the first checkpoint this
	// term published (to clean up what earlier terms left).
	published func(ctx context.Context, p coord.CheckpointPointer)
	once      sync.Once
	// maxWait bounds how long Save retries a publish that failed with
	// ErrUnavailable.
	maxWait time.Duration
	backoff time.Duration // first retry delay; doubles up to 2s
	metrics *Metrics      // Term.Metrics: publish latency and failures
}

// StorageOption configures NewStorage.
type StorageOption func(*Storage)

// Retain keeps the newest n checkpoints of the inner storage after each
// publish (n <= 0: all). Default checkpoint.DefaultRetain.
func Retain(n int) StorageOption { return func(s *Storage) { s.retain = n } }

// PublishWait bounds how long Save keeps retrying the publish of a stored
// checkpoint while the coordination store is unavailable (default 1m; the
// checkpoint's context, which ends with the term, bounds it too). A retry
// writes the same pointer under the same term, so it is idempotent; a term
// that ended meanwhile gets ErrFenced.
func PublishWait(d time.Duration) StorageOption { return func(s *Storage) { s.maxWait = d } }

// WithLogger sets the logger; default slog.Default().
func WithLogger(l *slog.Logger) StorageOption { return func(s *Storage) { s.log = l } }

// OnFirstPublish calls fn once, after the first checkpoint the term
// published (fn runs in the checkpoint's Save; keep it short).
func OnFirstPublish(fn func(ctx context.Context, p coord.CheckpointPointer)) StorageOption {
	return func(s *Storage) { s.published = fn }
}

// NewStorage wraps inner for term t.
func NewStorage(inner checkpoint.Storage, t Term, opts ...StorageOption) *Storage {
	s := &Storage{inner: inner, l: t.Leadership, lost: t.Lost, retain: checkpoint.DefaultRetain, log: slog.Default(),
		maxWait: time.Minute, backoff: 100 * time.Millisecond, metrics: t.Metrics}
	for _, o := range opts {
		o(s)
	}
	if s.lost == nil {
		s.lost = func(error) {}
	}
	return s
}

// Save stores snap, then publishes its pointer with a fenced write. It
// fails — and the runtime does not commit the checkpoint — when either
// fails; a write refused because the term ended also ends the term.
func (s *Storage) Save(ctx context.Context, snap *checkpoint.Snapshot) (checkpoint.Info, error) {
	info, err := s.inner.Save(ctx, snap)
	if err != nil {
		return info, err
	}
	if snap.Kind != checkpoint.Checkpoint {
		return info, nil // savepoints complete nothing
	}
	p := coord.CheckpointPointer{ID: snap.ID, Location: info.Path}
	if err := s.publish(ctx, p); err != nil {
		if errors.Is(err, coord.ErrNotLeader) {
			s.lost(err)
			return info, fmt.Errorf("checkpoint %d stored at %s but not completed: %w", snap.ID, info.Path, err)
		}
		return info, fmt.Errorf("checkpoint %d stored at %s but its pointer was not published (it may still have been: the next leader restores from whatever the pointer names): %w", snap.ID, info.Path, err)
	}
	s.log.Debug("checkpoint published", "id", snap.ID, "location", info.Path, "term", s.l.Term())
	s.once.Do(func() {
		if s.published != nil {
			s.published(ctx, p)
		}
	})
	if err := s.prune(ctx, snap.ID); err != nil {
		info.Warning = errors.Join(info.Warning, err)
	}
	return info, nil
}

// publish writes p's pointer, retrying (bounded by ctx and maxWait) while
// the store is unavailable: meanwhile no checkpoint completes, and the log
// says so.
func (s *Storage) publish(ctx context.Context, p coord.CheckpointPointer) error {
	start := time.Now()
	delay := s.backoff
	for attempt := 0; ; attempt++ {
		t0 := time.Now()
		err := coord.PublishCheckpoint(ctx, s.l, p)
		s.metrics.publishDone(time.Since(t0), err)
		if err == nil {
			if attempt > 0 {
				s.log.Info("coordination store reachable again: checkpoint published", "id", p.ID, "waited", time.Since(start).Round(time.Millisecond))
			}
			return nil
		}
		if !errors.Is(err, coord.ErrUnavailable) || time.Since(start)+delay > s.maxWait {
			return err
		}
		if attempt == 0 {
			s.log.Warn("coordination store unavailable: the checkpoint is stored but waits for its pointer to be published; no checkpoint completes meanwhile",
				"id", p.ID, "location", p.Location, "error", err, "max_wait", s.maxWait)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w (gave up waiting: %w)", err, ctx.Err())
		case <-t.C:
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// prune discards the checkpoints of the inner storage older than the
// newest retain, never keep.
func (s *Storage) prune(ctx context.Context, keep int64) error {
	if s.retain <= 0 {
		return nil
	}
	infos, err := s.inner.List(ctx)
	if err != nil {
		return fmt.Errorf("retention: %w", err)
	}
	var ids []int64
	for _, in := range infos {
		if in.Kind == checkpoint.Checkpoint && in.ID < keep {
			ids = append(ids, in.ID)
		}
	}
	var errs []error
	for _, id := range ids[:max(len(ids)+1-s.retain, 0)] { // oldest first
		if err := s.inner.Discard(ctx, id); err != nil && !errors.Is(err, checkpoint.ErrNotFound) {
			errs = append(errs, fmt.Errorf("retention: checkpoint %d: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// Latest loads the newest checkpoint of the inner storage. The node loop
// never restores from it (only from the published pointer).
func (s *Storage) Latest(ctx context.Context) (*checkpoint.Snapshot, checkpoint.Info, error) {
	return s.inner.Latest(ctx)
}

// List lists the inner storage's snapshots.
func (s *Storage) List(ctx context.Context) ([]checkpoint.Info, error) { return s.inner.List(ctx) }

// Discard removes a snapshot from the inner storage.
func (s *Storage) Discard(ctx context.Context, id int64) error { return s.inner.Discard(ctx, id) }

var _ checkpoint.Storage = (*Storage)(nil)
