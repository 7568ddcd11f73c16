package file

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"time"

	"github.com/sluice-io/sluice/sink"
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
		if cm.Marker != nil {
			continue // a partition commit report, no file
		}
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
