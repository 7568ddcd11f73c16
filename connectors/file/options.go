package file

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"time"
)

// MalformedPolicy says what a source does with a record its format cannot
// decode.
type MalformedPolicy int

const (
	// FailOnMalformed fails the reader with a [*RecordError] naming the
	// file and byte offset (the default).
	FailOnMalformed MalformedPolicy = iota
	// SkipMalformed skips the record, counts it in the reader's
	// numRecordsInErrors metric and logs it (file, split and offset) at
	// warn level, at most once per [malformedLogEvery] per reader with the
	// number skipped in between.
	SkipMalformed
	// EmitMalformed emits, in place of each malformed record, the record
	// that the function set with [MalformedAs] makes of it (a dead letter
	// that a later operator routes to a sink of its own), and counts it
	// in numRecordsInErrors. It is emitted at the malformed record's place
	// in the split, so it is read exactly once like any record.
	EmitMalformed
)

// malformedLogEvery bounds the warnings about skipped records.
const malformedLogEvery = 10 * time.Second

// Malformed describes a record the format could not decode, for
// [MalformedAs].
type Malformed struct {
	Split  string // the split's id
	File   string
	Offset int64 // byte offset of the record (of the decompressed file)
	// Raw is the record's bytes where the format knows them (JSON lines:
	// the line without its terminator), else nil. It is the caller's.
	Raw []byte
	Err error // wraps ErrMalformed
}

// MalformedAs sets the function that makes the record emitted in place of
// a malformed one under [EmitMalformed]. T must be the source's record
// type (NewSource fails otherwise). fn runs on a fetcher goroutine and
// must not keep m.Raw's backing array beyond the call if it modifies it.
// Default: none; EmitMalformed without it fails NewSource.
func MalformedAs[T any](fn func(m Malformed) T) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) {
		if fn == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: MalformedAs function is nil", ErrInvalidConfig))
			return
		}
		c.malformedAs = fn
	})
}

// Position is where a record was read: its split, file and byte offset
// (of the decompressed file), as in [Malformed].
type Position struct {
	Split  string
	File   string
	Offset int64
}

// PositionAs sets a function that every record read passes through
// together with where it was read (default: none). T must be the source's
// record type (NewSource fails otherwise). fn runs on a fetcher
// goroutine. Formats read in batches (text lines) still are: the batch
// reports where each record starts.
func PositionAs[T any](fn func(v T, p Position) T) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) {
		if fn == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: PositionAs function is nil", ErrInvalidConfig))
			return
		}
		c.positionAs = fn
	})
}

// SourceOption configures a [Source]; see the functions that return one.
// Every default is in defaultSourceConfig.
type SourceOption interface{ applySource(*sourceConfig) }

type sourceOptionFunc func(*sourceConfig)

func (f sourceOptionFunc) applySource(c *sourceConfig) { f(c) }

type sourceConfig struct {
	paths     []string
	blockSize int64
	discovery time.Duration
	filter    func(path string) bool
	malformed MalformedPolicy
	// malformedAs is the func(Malformed) T of MalformedAs.
	malformedAs any
	// positionAs is the func(T, Position) T of PositionAs.
	positionAs any
	batchSize  int
	logger     *slog.Logger
	// fsys is nil (the local file system) unless WithSourceFS was given.
	fsys SourceFS
	errs []error
}

func defaultSourceConfig() sourceConfig {
	return sourceConfig{
		blockSize: 64 << 20,
		discovery: 0, // bounded
		filter:    defaultFileFilter,
		malformed: FailOnMalformed,
		batchSize: 1024,
		logger:    slog.Default(),
	}
}

func (c *sourceConfig) validate() error {
	errs := c.errs
	if len(c.paths) == 0 {
		errs = append(errs, fmt.Errorf("%w: no paths to read", ErrInvalidConfig))
	}
	if c.blockSize < 1 {
		errs = append(errs, fmt.Errorf("%w: BlockSize is %d, must be at least 1", ErrInvalidConfig, c.blockSize))
	}
	if c.discovery < 0 {
		errs = append(errs, fmt.Errorf("%w: ContinuousDiscovery interval is %v, must be > 0", ErrInvalidConfig, c.discovery))
	}
	if c.batchSize < 1 {
		errs = append(errs, fmt.Errorf("%w: ReadBatchSize is %d, must be at least 1", ErrInvalidConfig, c.batchSize))
	}
	switch c.malformed {
	case FailOnMalformed, SkipMalformed:
	case EmitMalformed:
		if c.malformedAs == nil {
			errs = append(errs, fmt.Errorf("%w: OnMalformed(EmitMalformed) needs MalformedAs", ErrInvalidConfig))
		}
	default:
		errs = append(errs, fmt.Errorf("%w: OnMalformed policy %d is not FailOnMalformed, SkipMalformed or EmitMalformed", ErrInvalidConfig, c.malformed))
	}
	return errors.Join(errs...)
}

// BlockSize sets the size of the blocks that large uncompressed files in
// a splittable format are cut into, one split each (default 64 MiB).
// Compressed files and unsplittable formats are read by one split per file.
func BlockSize(n int64) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.blockSize = n })
}

// ContinuousDiscovery makes the source unbounded: it lists its paths every
// interval and reads the files it has not seen yet; a file is never read
// twice. The default is bounded: the paths are listed once, and the source
// ends when every file has been read.
func ContinuousDiscovery(interval time.Duration) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) {
		if interval <= 0 {
			c.errs = append(c.errs, fmt.Errorf("%w: ContinuousDiscovery interval is %v, must be > 0", ErrInvalidConfig, interval))
			return
		}
		c.discovery = interval
	})
}

// FileFilter keeps only the files and directories for which keep returns
// true. The default skips names starting with '.' or '_' (hidden files,
// such as the file sink's in-progress files). keep runs off the
// coordinator goroutine.
func FileFilter(keep func(path string) bool) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) {
		if keep == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: FileFilter is nil", ErrInvalidConfig))
			return
		}
		c.filter = keep
	})
}

// OnMalformed sets the policy for records the format cannot decode
// (default [FailOnMalformed]).
func OnMalformed(p MalformedPolicy) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.malformed = p })
}

// ReadBatchSize sets how many records a reader's fetcher hands over at
// once (default 1024).
func ReadBatchSize(n int) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.batchSize = n })
}

// SourceLogger sets the logger for listing failures (default
// slog.Default()).
func SourceLogger(l *slog.Logger) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) {
		if l != nil {
			c.logger = l
		}
	})
}

// SinkOption configures a sink made by [NewRowSink] or [NewBulkSink]; see
// the functions that return one. Every default is in defaultSinkConfig.
type SinkOption interface{ applySink(*sinkConfig) }

type sinkOptionFunc func(*sinkConfig)

func (f sinkOptionFunc) applySink(c *sinkConfig) { f(c) }

type sinkConfig struct {
	buckets    any // BucketAssigner[T], checked by the constructor
	rolling    RollingPolicy
	prefix     string
	suffix     string
	bufferSize int
	now        func() time.Time
	// compact is nil unless Compact was given.
	compact *CompactStrategy
	// wrapFile, if set, wraps each part file's writer (a test seam for
	// I/O failures).
	wrapFile func(name string, w io.Writer) io.Writer
	// compactHook, if set, runs after each step of a compaction (a test
	// seam for crashes between steps).
	compactHook func(step string) error
	// fileMode is the permission of part files; directories the sink
	// creates get it with x added where r is set.
	fileMode fs.FileMode
	// store is nil (the local file system) unless WithObjectStore was
	// given.
	store ObjectStore
	// partCommit is nil (off) unless PartitionCommit was given.
	partCommit *PartitionCommitStrategy
	// partCommitHook, if set, runs before each partition commit policy
	// call (a test seam for failures).
	partCommitHook func(bucket string) error
	errs           []error
}

func defaultSinkConfig() sinkConfig {
	return sinkConfig{
		buckets:    nil, // DateTimeBuckets[T]("2006-01-02--15", time.UTC, ProcessingTime)
		rolling:    DefaultRolling(),
		prefix:     "part",
		suffix:     "",
		bufferSize: 256 << 10,
		now:        time.Now,
		compact:    nil, // off
		fileMode:   DefaultFileMode,
	}
}

// DefaultFileMode is the default permission of the sink's part files
// (0600: readable by the owner only); the directories it creates get 0700.
const DefaultFileMode fs.FileMode = 0o600

// FileMode sets the permission of the part files the sink creates
// (default DefaultFileMode, 0600), before the process umask. Directories
// it creates (the base directory, buckets) get the same bits plus x where
// r is set (0640 → 0750). The owner must be able to read and write.
func FileMode(m fs.FileMode) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) {
		if m&^fs.ModePerm != 0 || m&0o600 != 0o600 {
			c.errs = append(c.errs, fmt.Errorf("%w: FileMode %#o: want permission bits only, with read and write for the owner", ErrInvalidConfig, m))
			return
		}
		c.fileMode = m
	})
}

// dirMode is the mode of directories the sink creates.
func (c *sinkConfig) dirMode() fs.FileMode { return c.fileMode | (c.fileMode&0o444)>>2 }

func (c *sinkConfig) validate() error {
	errs := c.errs
	if c.bufferSize < 1 {
		errs = append(errs, fmt.Errorf("%w: WriteBufferSize is %d, must be at least 1", ErrInvalidConfig, c.bufferSize))
	}
	if c.rolling == nil {
		errs = append(errs, fmt.Errorf("%w: Rolling policy is nil", ErrInvalidConfig))
	}
	for _, s := range []string{c.prefix, c.suffix} {
		if containsAny(s, "/\\\x00") {
			errs = append(errs, fmt.Errorf("%w: part file prefix/suffix %q must not contain a path separator or NUL", ErrInvalidConfig, s))
		}
	}
	if c.prefix == "" || c.prefix[0] == '.' || c.prefix[0] == '_' {
		errs = append(errs, fmt.Errorf("%w: PartPrefix %q must be non-empty and not start with '.' or '_' (those names are hidden)", ErrInvalidConfig, c.prefix))
	}
	return errors.Join(errs...)
}

func containsAny(s, chars string) bool {
	for _, r := range s {
		for _, c := range chars {
			if r == c {
				return true
			}
		}
	}
	return false
}

// WithBuckets sets the bucket assigner: the directory, relative to the
// base directory, of every record (default DateTimeBuckets with layout
// "2006-01-02--15", UTC, processing time). Its type parameter must match
// the sink's record type, or the constructor reports an error.
func WithBuckets[T any](a BucketAssigner[T]) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) {
		if a == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: WithBuckets assigner is nil", ErrInvalidConfig))
			return
		}
		c.buckets = a
	})
}

// Rolling sets when a part file is closed and a new one started (default
// DefaultRolling()). Bulk formats also roll at every checkpoint, whatever
// the policy says; its size and time rules still roll them between
// checkpoints.
func Rolling(p RollingPolicy) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.rolling = p })
}

// PartPrefix sets the part file name prefix (default "part"): files are
// named <prefix>-<job>-<subtask>-<counter><suffix>, where <job> is the
// job's id (sink.InitContext.JobID).
func PartPrefix(p string) SinkOption { return sinkOptionFunc(func(c *sinkConfig) { c.prefix = p }) }

// PartSuffix sets the part file name suffix, such as ".jsonl" (default
// none).
func PartSuffix(s string) SinkOption { return sinkOptionFunc(func(c *sinkConfig) { c.suffix = s }) }

// WriteBufferSize sets the buffer in front of every open part file
// (default 256 KiB).
func WriteBufferSize(n int) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.bufferSize = n })
}

// Clock sets the processing-time clock used by bucket assigners and
// rolling policies (default time.Now).
func Clock(now func() time.Time) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) {
		if now == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: Clock is nil", ErrInvalidConfig))
			return
		}
		c.now = now
	})
}
