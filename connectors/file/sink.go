package file

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/sink"
)

// committable is a pending part file: closed and synced under its hidden
// in-progress name, waiting to be renamed to its final name.
type committable struct {
	// Bucket is the directory relative to the base directory ("" for the
	// base directory itself).
	Bucket string `json:"bucket"`
	// Temp is the hidden in-progress name, Final the visible one.
	Temp  string `json:"temp"`
	Final string `json:"final"`
	// Size is the file's length.
	Size int64 `json:"size"`
	// Compact marks a compaction candidate (see [CompactStrategy]): the
	// committer leaves it hidden and the global committer merges it.
	Compact bool `json:"compact,omitempty"`
	// Closed is, for a candidate, the checkpoint at which the file became
	// pending, or, with AtRestore, the checkpoint a restored writer
	// finished it after (a compacting sink finishes the files that were
	// open at the restored checkpoint instead of appending to them).
	// Compaction concatenates candidates ordered by (Closed, AtRestore,
	// subtask, counter), which keeps the records of every input split in
	// order: a split moves to another writer only through a restore from
	// some checkpoint r, and its records before the move are in files
	// closed at r or before, or finished at the restore from r, while its
	// records after the move are in files closed after r; within one
	// writer, files of a bucket close in counter order.
	Closed    int64 `json:"closed,omitempty"`
	AtRestore bool  `json:"atRestore,omitempty"`
	// Upload is, for a sink on an ObjectStore, the prepared upload's
	// handle (ObjectUpload.Prepare); Temp is empty then.
	Upload string `json:"upload,omitempty"`
	// Marker, when set, makes this committable no file but a writer's
	// report for partition commit (see PartitionCommit); committers
	// skip it.
	Marker *partitionMarker `json:"marker,omitempty"`
	// Discard, when set, makes this committable a hidden file to delete
	// once the checkpoint completes: a restored part file that its writer
	// resumed in a copy (see resumedName). From then on no restore needs
	// it.
	Discard bool `json:"discard,omitempty"`
}

// writerState is a sink writer's checkpointed state.
type writerState struct {
	// JobID is the job id in the names of the writer's part files; empty
	// in states from before job ids, whose names had none.
	JobID string `json:"job,omitempty"`
	// Subtask and Parallelism are those of the writer that took it.
	Subtask     int `json:"subtask"`
	Parallelism int `json:"parallelism"`
	// NextCounter is the counter of the writer's next part file. Hidden
	// files of this subtask with a counter at or above it were created
	// after the checkpoint and are removed on recovery.
	NextCounter int64 `json:"next"`
	// InProgress lists the row-format part files open at the checkpoint,
	// with their synced length: recovery truncates them to it and goes on
	// appending (a compacting sink finishes them instead).
	InProgress []inProgressFile `json:"inProgress,omitempty"`
	// Held lists finished compaction candidates that the writer holds
	// back until enough checkpoints passed (see
	// CompactStrategy.CheckpointsBeforeCompaction): they are released as
	// committables at a later checkpoint.
	Held []committable `json:"held,omitempty"`
}

// inProgressFile is an open part file in a writerState.
type inProgressFile struct {
	Bucket string `json:"bucket"`
	Temp   string `json:"temp"`
	Final  string `json:"final"`
	Size   int64  `json:"size"`
}

var (
	committableSerde = serde.JSON[committable](1)
	writerStateSerde = serde.JSON[writerState](1)
)

// fileSink is the two-phase, stateful file sink.
type fileSink[T any] struct {
	dir     string
	row     RowFormat[T]
	bulk    BulkFormat[T]
	cfg     sinkConfig
	buckets BucketAssigner[T]
	live    liveWriters
}

var _ sink.StatefulTwoPhase[string, committable, writerState] = (*fileSink[string])(nil)

// NewRowSink returns an exactly-once sink (Flink's FileSink.forRowFormat)
// that writes records with format into part files under the base directory
// dir, already wrapped with sink.NewStatefulTwoPhase.
//
// Each writer keeps one open part file per bucket, named
// .<prefix>-<job>-<subtask>-<counter><suffix>.inprogress (hidden) while
// it is written, where <job> is the job's id (sink.InitContext.JobID), so
// that jobs sharing a base directory never touch each other's files. The
// rolling policy closes it; at the next checkpoint a closed file is
// fsynced and becomes pending, and when that checkpoint completes the
// committer renames it to <prefix>-<job>-<subtask>-<counter><suffix> and
// fsyncs the directory. A part file that stays open across a checkpoint is
// flushed and fsynced, and its length is stored in the writer state. On
// recovery open files are truncated to their checkpointed length, pending
// files of the restored checkpoint are committed (committing a finished
// file is a success), hidden files of this job written after it are
// removed, and the counters continue after the restored ones. A job that
// starts without a checkpoint removes its own in-progress files (left by
// a crash before its first checkpoint, when it is started again with the
// same job id). See the options for the defaults.
func NewRowSink[T any](dir string, format RowFormat[T], opts ...SinkOption) (sink.Sink[T], error) {
	if format == nil {
		return nil, fmt.Errorf("%w: the row format is nil", ErrInvalidConfig)
	}
	s, err := buildSink(dir, format, nil, opts)
	if err != nil {
		return nil, err
	}
	return s.wrap(), nil
}

// NewBulkSink returns an exactly-once sink that writes part files with a
// bulk format (Flink's FileSink.forBulkFormat). It works like
// [NewRowSink], except that every open part file is finished and rolled at
// every checkpoint (the rolling policy's time and size rules still roll
// files between checkpoints).
func NewBulkSink[T any](dir string, format BulkFormat[T], opts ...SinkOption) (sink.Sink[T], error) {
	if format == nil {
		return nil, fmt.Errorf("%w: the bulk format is nil", ErrInvalidConfig)
	}
	s, err := buildSink(dir, nil, format, opts)
	if err != nil {
		return nil, err
	}
	return s.wrap(), nil
}

// wrap presents s to the stream API, with a global committer if it
// compacts or commits partitions.
func (s *fileSink[T]) wrap() sink.Sink[T] {
	if s.cfg.compact != nil || s.cfg.partCommit != nil {
		return sink.NewStatefulTwoPhase[T, committable, writerState](compactingSink[T]{s})
	}
	return sink.NewStatefulTwoPhase[T, committable, writerState](s)
}

func buildSink[T any](dir string, row RowFormat[T], bulk BulkFormat[T], opts []SinkOption) (*fileSink[T], error) {
	cfg := defaultSinkConfig()
	for _, o := range opts {
		if o != nil {
			o.applySink(&cfg)
		}
	}
	errs := []error{cfg.validate()}
	if dir == "" && cfg.store == nil {
		errs = append(errs, fmt.Errorf("%w: the base directory is empty", ErrInvalidConfig))
	}
	s := &fileSink[T]{dir: filepath.Clean(dir), row: row, bulk: bulk, cfg: cfg}
	if cfg.store != nil {
		s.dir = strings.Trim(path.Clean("/"+filepath.ToSlash(dir)), "/")
		if cfg.compact != nil {
			errs = append(errs, fmt.Errorf("%w: Compact is not supported with WithObjectStore", ErrInvalidConfig))
		}
	}
	switch a := cfg.buckets.(type) {
	case nil:
		s.buckets = DateTimeBuckets[T]("2006-01-02--15", nil, ProcessingTime)
	case BucketAssigner[T]:
		s.buckets = a
	default:
		var zero T
		errs = append(errs, fmt.Errorf("%w: WithBuckets got a %T, want a BucketAssigner[%T]", ErrInvalidConfig, a, zero))
	}
	if cp := cfg.compact; cp != nil && cp.Compactor == nil && bulk != nil {
		if _, ok := bulk.(gzipBulk[T]); !ok {
			errs = append(errs, fmt.Errorf("%w: Compact: bulk format %T needs CompactStrategy.Compactor (ConcatCompactor() if its files may be concatenated, RecordWiseCompactor otherwise)", ErrInvalidConfig, bulk))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *fileSink[T]) openRoot() (*os.Root, error) {
	if err := mkdirAllDurable(s.dir, s.cfg.dirMode()); err != nil {
		return nil, fmt.Errorf("file sink: base directory: %w", err)
	}
	r, err := os.OpenRoot(s.dir)
	if err != nil {
		return nil, fmt.Errorf("file sink: base directory: %w", err)
	}
	return r, nil
}

func (s *fileSink[T]) CreateWriter(ctx context.Context, ic sink.InitContext) (sink.StatefulCommittingWriter[T, committable, writerState], error) {
	return asWriter(s.newWriterCtx(ctx, ic, nil))
}

func (s *fileSink[T]) RestoreWriter(ctx context.Context, ic sink.InitContext, states []writerState) (sink.StatefulCommittingWriter[T, committable, writerState], error) {
	return asWriter(s.newWriterCtx(ctx, ic, states))
}

// asWriter returns w as an interface, a nil one when w is nil.
func asWriter[T any](w *writer[T], err error) (sink.StatefulCommittingWriter[T, committable, writerState], error) {
	if w == nil {
		return nil, err
	}
	return w, err
}

func (s *fileSink[T]) WriterStateSerializer() serde.Versioned[writerState] { return writerStateSerde }

func (s *fileSink[T]) CommittableSerializer() serde.Versioned[committable] { return committableSerde }

func (s *fileSink[T]) CreateCommitter(context.Context, sink.InitContext) (sink.Committer[committable], error) {
	if s.cfg.store != nil {
		return &objectCommitter{store: s.cfg.store, key: s.objectKey}, nil
	}
	root, err := s.openRoot()
	if err != nil {
		return nil, err
	}
	return &committer{root: root, dir: s.dir, compacting: s.cfg.compact != nil}, nil
}

// bucketDir returns the directory of a bucket inside the root, checking
// that it stays there.
func bucketDir(bucket string) (string, error) {
	if bucket == "" || bucket == "." {
		return ".", nil
	}
	if !filepath.IsLocal(bucket) {
		return "", fmt.Errorf("%w: %q", ErrBucketEscapes, bucket)
	}
	return path.Clean(filepath.ToSlash(bucket)), nil
}

// mkdirAllDurable creates dir and its missing parents with mode perm and
// fsyncs the parent of every directory it created, so the new entries
// survive a crash of the machine.
func mkdirAllDurable(dir string, perm fs.FileMode) error {
	var missing []string
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil {
			break
		}
		missing = append(missing, p)
		if filepath.Dir(p) == p {
			break
		}
	}
	if err := os.MkdirAll(dir, perm); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0 && runtime.GOOS != "windows"; i-- {
		d, err := os.Open(filepath.Dir(missing[i]))
		if err != nil {
			return err
		}
		err = d.Sync()
		if cerr := d.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}
