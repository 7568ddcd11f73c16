package file

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"path"
	"slices"
	"time"

	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/sink/leftover"
)

// ObjectStore is object storage that a sink writes its part files to
// instead of the local file system ([WithObjectStore]). Each part file is
// one object written by a multipart upload: the writer uploads parts as
// its buffer fills, prepares the upload at the checkpoint (uploads the
// rest as the last part, without completing it), and the prepared upload
// is the committable; the committer completes it, which makes the object
// visible atomically. Package connectors/s3 implements it for
// S3-compatible storage.
//
// Keys are slash-separated, relative to the store's root (the sink's base
// directory is their first element unless it is empty).
type ObjectStore interface {
	// Create starts the upload of a new object at key. The upload's part
	// uploads use ctx, which stays valid until the upload is prepared
	// or aborted.
	Create(ctx context.Context, key string) (ObjectUpload, error)
	// Complete makes a prepared upload (the handle its Prepare returned)
	// visible under key. If the upload is gone and the object exists, an
	// earlier attempt completed it: Complete returns nil. If neither
	// exists it returns an error wrapping ErrUploadGone.
	Complete(ctx context.Context, key string, handle []byte) error
	// Uploads lists the unfinished uploads whose keys start with prefix.
	Uploads(ctx context.Context, prefix string) ([]PendingUpload, error)
	// Abort aborts an unfinished upload; an upload already gone is no
	// error.
	Abort(ctx context.Context, key, uploadID string) error
	// Exists reports whether an object exists at key.
	Exists(ctx context.Context, key string) (bool, error)
}

// ObjectUpload is an upload in progress (see [ObjectStore]).
type ObjectUpload interface {
	io.Writer
	// Prepare uploads what is buffered and returns the upload's handle
	// for ObjectStore.Complete, without completing it.
	Prepare(ctx context.Context) (handle []byte, err error)
	// Abort aborts the upload.
	Abort(ctx context.Context) error
}

// PendingUpload is an unfinished upload listed by ObjectStore.Uploads.
type PendingUpload struct {
	Key, UploadID string
	Initiated     time.Time
}

// ErrUploadGone is wrapped by ObjectStore.Complete when neither the
// prepared upload nor its object exists.
var ErrUploadGone = errors.New("neither the upload nor the object exists")

// WithObjectStore makes the sink write its part files to store instead of
// the local file system (default: the local file system). The sink's
// directory becomes the key prefix of its objects ("" for the store's
// root). Every open part file is prepared and rolled at every checkpoint,
// whatever the rolling policy (an upload cannot be resumed from a
// checkpoint); its size and time rules still roll files between
// checkpoints. Part files carry no hidden in-progress name: an upload
// is invisible until it is completed. Compaction is not supported.
//
// Recovery from checkpoint n completes n's prepared uploads again (an
// object already completed counts as committed), aborts this job's
// unfinished uploads written after n (listed with ObjectStore.Uploads and
// chosen by the rule of package sink/leftover, as the local sink chooses
// its stray in-progress files), and continues the counters.
func WithObjectStore(store ObjectStore) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) {
		if store == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: WithObjectStore store is nil", ErrInvalidConfig))
			return
		}
		c.store = store
	})
}

// objectKey joins the sink's prefix, a bucket directory and a name.
func (s *fileSink[T]) objectKey(dir, name string) string {
	return path.Join(s.dir, dir, name)
}

// objectWriter is one subtask's sink writer on an ObjectStore. It is used
// from the subtask's goroutine only.
type objectWriter[T any] struct {
	s        *fileSink[T]
	store    ObjectStore
	names    partNames
	sub, par int
	attempt  int
	next     int64
	buckets  map[string]*objectBucket[T]
	last     *objectBucket[T]
	pending  []committable
	buf      []byte
	// ctx is the context of the uploads' part uploads: cancelled by
	// Close.
	ctx    context.Context
	cancel context.CancelFunc
	closed bool
}

type objectBucket[T any] struct {
	name string
	dir  string
	part *objectPart[T]
}

type objectPart[T any] struct {
	up      ObjectUpload
	cw      *countingWriter
	bw      *bufferedWriter
	bulk    BulkWriter[T]
	final   string
	created time.Time
	last    time.Time
}

// bufferedWriter is a bufio.Writer-like buffer in front of an upload.
type bufferedWriter struct {
	w   io.Writer
	buf []byte
}

func (b *bufferedWriter) Write(p []byte) (int, error) {
	if len(b.buf)+len(p) > cap(b.buf) {
		if err := b.Flush(); err != nil {
			return 0, err
		}
		if len(p) >= cap(b.buf) {
			return b.w.Write(p)
		}
	}
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *bufferedWriter) Flush() error {
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.w.Write(b.buf)
	b.buf = b.buf[:0]
	return err
}

func (p *objectPart[T]) size() int64 { return p.cw.n + int64(len(p.bw.buf)) }

var _ sink.StatefulCommittingWriter[string, committable, writerState] = (*objectWriter[string])(nil)

func (s *fileSink[T]) newObjectWriter(ctx context.Context, ic sink.InitContext, states []writerState) (*objectWriter[T], error) {
	if err := checkJobID(ic.JobID()); err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w := &objectWriter[T]{s: s, store: s.cfg.store, sub: ic.SubtaskIndex(), par: ic.Parallelism(), attempt: ic.Attempt(),
		names:   partNames{prefix: s.cfg.prefix, suffix: s.cfg.suffix, job: ic.JobID()},
		buckets: map[string]*objectBucket[T]{}, ctx: wctx, cancel: cancel}
	_, restored := ic.RestoredCheckpointID()
	restored = restored || states != nil
	for _, st := range states {
		if len(st.InProgress) > 0 || len(st.Held) > 0 {
			cancel()
			return nil, fmt.Errorf("file sink: restored writer state of subtask %d lists open or held local part files; it was taken by a sink on the local file system, not on object storage", st.Subtask)
		}
		if st.Subtask == w.sub {
			w.next = max(w.next, st.NextCounter)
		}
	}
	if err := w.abortStrays(ctx, states, restored); err != nil {
		cancel()
		return nil, err
	}
	s.live.add(w.liveKey())
	return w, nil
}

func (w *objectWriter[T]) liveKey() liveKey { return liveKey{w.names.job, w.sub, w.attempt} }

// abortStrays aborts this job's unfinished uploads that no checkpoint
// needs, by the rule of package sink/leftover (see writer.removeStrays):
// uploads of checkpoint n's committables have counters below the restored
// NextCounter and are kept for the committer.
func (w *objectWriter[T]) abortStrays(ctx context.Context, states []writerState, restored bool) error {
	var lstates []leftover.State
	if restored {
		for _, st := range states {
			ls := leftover.State{Subtask: st.Subtask, From: st.NextCounter}
			if st.Subtask != w.sub && w.s.live.elsewhere(w.names.job, st.Subtask, w.attempt) {
				ls.From = math.MaxInt64
			}
			lstates = append(lstates, ls)
		}
	}
	prefix := w.s.dir
	if prefix != "" {
		prefix += "/"
	}
	ups, err := w.store.Uploads(ctx, prefix)
	if err != nil {
		return fmt.Errorf("file sink: list unfinished uploads under %q: %w", prefix, err)
	}
	byKey := map[string][]PendingUpload{}
	var existing []string
	for _, u := range ups {
		if len(byKey[u.Key]) == 0 {
			existing = append(existing, u.Key)
		}
		byKey[u.Key] = append(byKey[u.Key], u)
	}
	scheme := leftover.Scheme{Prefix: w.names.prefix + "-" + w.names.job + "-", Suffix: w.names.suffix}
	strays, err := leftover.Abort(leftover.Request{Parser: baseParser{scheme}, Subtask: w.sub, Parallelism: w.par,
		Restored: restored, States: lstates, Existing: existing})
	if err != nil {
		return fmt.Errorf("file sink: unfinished uploads: %w", err)
	}
	removed := map[string]bool{}
	for _, k := range strays {
		removed[k] = true
		for _, u := range byKey[k] {
			if err := w.store.Abort(ctx, u.Key, u.UploadID); err != nil {
				return fmt.Errorf("file sink: abort unfinished upload %s of %s: %w", u.UploadID, u.Key, err)
			}
		}
	}
	// Number new files above every upload of this subtask's name that
	// stays (see writer.removeStrays).
	for _, k := range existing {
		if sub, c, ok := (baseParser{scheme}).Parse(k); ok && sub == w.sub && !removed[k] {
			w.next = max(w.next, c+1)
		}
	}
	return nil
}

func (w *objectWriter[T]) info(b *objectBucket[T]) PartFileInfo {
	return PartFileInfo{Bucket: b.name, Size: b.part.size(), Created: b.part.created, LastWrite: b.part.last}
}

func (w *objectWriter[T]) Write(ctx context.Context, v T, c sink.Meta) error {
	now := w.s.cfg.now()
	name, err := w.s.buckets.Bucket(v, BucketContext{Timestamp: c.Timestamp, HasTimestamp: c.HasTimestamp, Watermark: c.Watermark, ProcessingTime: now})
	if err != nil {
		return fmt.Errorf("file sink: assign bucket: %w", err)
	}
	b := w.last
	if b == nil || b.name != name {
		if b = w.buckets[name]; b == nil {
			dir, err := bucketDir(name)
			if err != nil {
				return fmt.Errorf("file sink: bucket: %w", err)
			}
			b = &objectBucket[T]{name: name, dir: dir}
			w.buckets[name] = b
		}
		w.last = b
	}
	policy := w.s.cfg.rolling
	if b.part != nil && policy.ShouldRollOnProcessingTime(w.info(b), now) {
		if err := w.roll(ctx, b); err != nil {
			return err
		}
	}
	if b.part == nil {
		if err := w.open(ctx, b, now); err != nil {
			return err
		}
	}
	p := b.part
	key := w.s.objectKey(b.dir, p.final)
	if p.bulk != nil {
		if err := p.bulk.Write(v); err != nil {
			return fmt.Errorf("file sink: write %s: %w", key, err)
		}
	} else {
		w.buf, err = w.s.row.AppendRecord(w.buf[:0], v)
		if err != nil {
			return fmt.Errorf("file sink: encode a record for %s: %w", key, err)
		}
		if _, err := p.bw.Write(w.buf); err != nil {
			return fmt.Errorf("file sink: write %s: %w", key, err)
		}
	}
	p.last = now
	if policy.ShouldRollOnEvent(w.info(b)) {
		return w.roll(ctx, b)
	}
	return nil
}

// open starts a new part file in b, with the first counter whose object
// does not exist.
func (w *objectWriter[T]) open(ctx context.Context, b *objectBucket[T], now time.Time) error {
	for range maxCounterProbe {
		final := w.names.final(w.sub, w.next)
		w.next++
		key := w.s.objectKey(b.dir, final)
		ok, err := w.store.Exists(ctx, key)
		if err != nil {
			return fmt.Errorf("file sink: look for %s: %w", key, err)
		}
		if ok {
			continue
		}
		up, err := w.store.Create(w.ctx, key)
		if err != nil {
			return fmt.Errorf("file sink: create %s: %w", key, err)
		}
		var out io.Writer = up
		if w.s.cfg.wrapFile != nil {
			out = w.s.cfg.wrapFile(key, up)
		}
		cw := &countingWriter{w: out}
		p := &objectPart[T]{up: up, cw: cw, bw: &bufferedWriter{w: cw, buf: make([]byte, 0, w.s.cfg.bufferSize)}, final: final, created: now, last: now}
		if w.s.bulk != nil {
			bw, err := w.s.bulk.NewWriter(p.bw)
			if err != nil {
				_ = up.Abort(ctx)
				return fmt.Errorf("file sink: start bulk file %s: %w", key, err)
			}
			p.bulk = bw
		}
		b.part = p
		return nil
	}
	return fmt.Errorf("file sink: bucket %q: no free part file name after %d tries", b.name, maxCounterProbe)
}

// roll finishes b's part file, prepares its upload and queues its
// committable for the next PrepareCommit.
func (w *objectWriter[T]) roll(ctx context.Context, b *objectBucket[T]) error {
	p := b.part
	b.part = nil
	key := w.s.objectKey(b.dir, p.final)
	var err error
	if p.bulk != nil {
		if err = p.bulk.Finish(); err != nil {
			err = fmt.Errorf("finish: %w", err)
		}
	}
	if err == nil {
		if err = p.bw.Flush(); err != nil {
			err = fmt.Errorf("flush: %w", err)
		}
	}
	var handle []byte
	if err == nil {
		if handle, err = p.up.Prepare(ctx); err != nil {
			err = fmt.Errorf("prepare upload: %w", err)
		}
	}
	if err != nil {
		_ = p.up.Abort(context.WithoutCancel(ctx))
		return fmt.Errorf("file sink: %s: %w", key, err)
	}
	w.pending = append(w.pending, committable{Bucket: b.name, Final: p.final, Size: p.cw.n, Upload: string(handle)})
	return nil
}

// Flush rolls every open part file at the end of input.
func (w *objectWriter[T]) Flush(ctx context.Context, endOfInput bool) error {
	if !endOfInput {
		return nil
	}
	return w.rollAll(ctx)
}

func (w *objectWriter[T]) rollAll(ctx context.Context) error {
	for _, name := range slices.Sorted(maps.Keys(w.buckets)) {
		if b := w.buckets[name]; b.part != nil {
			if err := w.roll(ctx, b); err != nil {
				return err
			}
		}
		delete(w.buckets, name)
	}
	w.last = nil
	return nil
}

// PrepareCommit prepares every open part file's upload and returns the
// uploads prepared since the last checkpoint.
func (w *objectWriter[T]) PrepareCommit(ctx context.Context, _ int64) ([]committable, error) {
	if err := w.rollAll(ctx); err != nil {
		return nil, err
	}
	out := w.pending
	w.pending = nil
	return out, nil
}

// SnapshotState records the counter (no file stays open across a
// checkpoint).
func (w *objectWriter[T]) SnapshotState(context.Context, int64) ([]writerState, error) {
	return []writerState{{JobID: w.names.job, Subtask: w.sub, Parallelism: w.par, NextCounter: w.next}}, nil
}

// Close aborts the open uploads (their records are replayed from the last
// checkpoint); prepared uploads stay for the committer or for the next
// start's cleanup.
func (w *objectWriter[T]) Close() error {
	if w.closed {
		return nil
	}
	w.closed = true
	w.s.live.remove(w.liveKey())
	var errs []error
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, b := range w.buckets {
		if b.part != nil {
			if err := b.part.up.Abort(ctx); err != nil {
				errs = append(errs, fmt.Errorf("file sink: abort upload of %s: %w", w.s.objectKey(b.dir, b.part.final), err))
			}
			b.part = nil
		}
	}
	w.cancel()
	return errors.Join(errs...)
}

// objectCommitter completes prepared uploads.
type objectCommitter struct {
	store ObjectStore
	key   func(dir, name string) string
}

// Commit completes each prepared upload. An upload already completed by an
// earlier attempt is a success; one whose upload and object are both gone
// fails the job with an error naming it.
func (c *objectCommitter) Commit(ctx context.Context, reqs []sink.CommitRequest[committable]) error {
	for _, r := range reqs {
		if err := ctx.Err(); err != nil {
			return err
		}
		cm := r.Committable()
		dir, err := bucketDir(cm.Bucket)
		if err != nil {
			r.SignalFailedWithUnknownReason(err)
			continue
		}
		key := c.key(dir, cm.Final)
		if cm.Upload == "" {
			r.SignalFailedWithUnknownReason(fmt.Errorf("file sink: commit %s (checkpoint %d): the committable holds no upload; it was written by a sink on the local file system", key, r.CheckpointID()))
			continue
		}
		err = c.store.Complete(ctx, key, []byte(cm.Upload))
		switch {
		case err == nil:
		case errors.Is(err, ErrUploadGone):
			r.SignalFailedWithUnknownReason(fmt.Errorf("file sink: commit %s (checkpoint %d): %w", key, r.CheckpointID(), err))
		case r.Retries() >= commitRetries:
			r.SignalFailedWithUnknownReason(fmt.Errorf("file sink: commit %s (checkpoint %d): %w", key, r.CheckpointID(), err))
		default:
			r.RetryLater()
		}
	}
	return nil
}

func (c *objectCommitter) Close() error { return nil }
