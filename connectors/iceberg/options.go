package iceberg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
)

// Sentinel errors; the errors returned wrap them with details.
var (
	// ErrInvalidConfig is wrapped by every configuration error; the
	// message names the option and what is allowed.
	ErrInvalidConfig = errors.New("iceberg: invalid configuration")
	// ErrUnsupportedSchema is wrapped when the table has a column type the
	// sink cannot write (nested, decimal, uuid, …).
	ErrUnsupportedSchema = errors.New("iceberg: unsupported table schema")
	// ErrBadRecord is wrapped when a record does not fit the table: a
	// field that is not a column, a value of the wrong kind, null in a
	// required column. The message names the column.
	ErrBadRecord = errors.New("iceberg: record does not fit the table")
	// ErrCommitConflict is wrapped when a snapshot commit still conflicted
	// with other writers after the last retry.
	ErrCommitConflict = errors.New("iceberg: snapshot commit kept conflicting")
)

// Snapshot summary properties the global committer writes into every
// snapshot it commits (Flink's Iceberg sink writes flink.job-id,
// flink.operator-id and flink.max-committed-checkpoint-id).
const (
	SummaryJobID                  = "sluice.job-id"
	SummaryOperatorID             = "sluice.operator-id"
	SummaryMaxCommittedCheckpoint = "sluice.max-committed-checkpoint-id"
	// SummaryLateCheckpoint marks a snapshot of files that a checkpoint
	// at or below the max committed one prepared and that reached the
	// global committer late (after a subtask's regional restart); it
	// holds that checkpoint's id.
	SummaryLateCheckpoint           = "sluice.late-checkpoint-id"
	defaultTargetFileSize           = 64 << 20
	defaultCommitRetries            = 10
	defaultCommitRetryWait          = 100 * time.Millisecond
	defaultCommitRetryMaxWait       = 5 * time.Second
	maxTargetFileSize         int64 = 1 << 40
)

// Option configures a sink; see the functions returning one for what each
// does and its default.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	create          *createSpec
	targetFileSize  int64
	eventTimeColumn string
	snapshotProps   map[string]string
	commitRetries   int
	commitRetryWait time.Duration
	duplicateCheck  bool
	addColumns      bool
	compactEvery    int
	logger          *slog.Logger
	errs            []error
	// hook, set by tests in this package only, runs in the global
	// committer at the named stage ("before-commit": the files are
	// written and validated, the snapshot not committed;
	// "after-commit": the snapshot is committed, CommitGlobal has not
	// returned); an error it returns is CommitGlobal's.
	hook func(ctx context.Context, stage string, checkpointID int64) error
	// arrowWriter, set by tests and benchmarks in this package only,
	// makes the writers use iceberg-go's Arrow writer for every table.
	arrowWriter bool
}

type createSpec struct {
	columns   []Column // nil with infer until the first record
	infer     bool     // CreateTableFromRecords
	partition []PartitionField
	props     map[string]string
	location  string
}

func defaultConfig() config {
	return config{targetFileSize: defaultTargetFileSize, commitRetries: defaultCommitRetries,
		commitRetryWait: defaultCommitRetryWait, logger: slog.New(slog.DiscardHandler)}
}

func (c *config) validate() error {
	if len(c.errs) > 0 {
		return errors.Join(c.errs...)
	}
	return nil
}

// CreateTable lets the sink create the table (and its namespace) when it
// does not exist, with these columns (field ids 1, 2, … in this order),
// partitioned by partition (none = unpartitioned), with the given table
// properties (nil = none). Without it (the default) the table must exist.
// An existing table is used as it is: its schema and partition spec win,
// these are not compared with it.
func CreateTable(columns []Column, partition []PartitionField, properties map[string]string) Option {
	return optionFunc(func(c *config) {
		if len(columns) == 0 {
			c.errs = append(c.errs, fmt.Errorf("%w: CreateTable: no columns", ErrInvalidConfig))
		}
		c.create = &createSpec{columns: columns, partition: partition, props: maps.Clone(properties)}
	})
}

// CreateTableFromRecords lets the sink create the table (and its
// namespace) when it does not exist, with the columns of the first record
// a writer gets: every field with a value, all optional, types from the
// values (bool → boolean, an integer → long, another number → double,
// string → string, []byte → binary, time.Time → timestamptz; a number
// without a fraction makes a long column, so declare the columns with
// [CreateTable] when a field may hold fractions), plus the
// [EventTimeColumn] as timestamptz. The table is partitioned by partition
// (none = unpartitioned; a field must name a column of the first record or
// the event-time column) with the given table properties (nil = none).
// Writers of several subtasks may race to create it: the first wins and the
// others use its table, so a record that disagrees with it (a field of
// another type; a field it lacks, unless [AddColumns] is on) fails the job
// with an error naming the column. An existing table is used as it is.
func CreateTableFromRecords(partition []PartitionField, properties map[string]string) Option {
	return optionFunc(func(c *config) {
		for _, f := range partition {
			if _, err := iceberg.ParseTransform(f.Transform); err != nil {
				c.errs = append(c.errs, fmt.Errorf("%w: partition %s(%s): %w", ErrInvalidConfig, f.Transform, f.Column, err))
			}
		}
		c.create = &createSpec{infer: true, partition: partition, props: maps.Clone(properties)}
	})
}

// AddColumns lets the sink evolve the table's schema: a record field that
// is not a column of the table (and has a value) is added as an optional
// column, its type from the value as in [CreateTableFromRecords], through
// the catalog (iceberg-go's UpdateSchema; a conflicting schema commit is
// retried on fresh metadata like a snapshot commit). The writer first
// writes the rows it buffered with the old schema. The schema change is a
// commit of its own, not part of a checkpoint's snapshot: a job that fails
// after it keeps the column, with nulls in older rows. Default off: such a
// field fails the job (no restart loop), naming it.
func AddColumns(on bool) Option {
	return optionFunc(func(c *config) { c.addColumns = on })
}

// TableLocation sets where a table the sink creates keeps its files (a
// file:// or s3:// URL); "" (the default) lets the catalog choose (its
// warehouse). Only with [CreateTable].
func TableLocation(loc string) Option {
	return optionFunc(func(c *config) {
		if c.create == nil {
			c.errs = append(c.errs, fmt.Errorf("%w: TableLocation: only with CreateTable (give it after CreateTable)", ErrInvalidConfig))
			return
		}
		c.create.location = loc
	})
}

// TargetFileSize is how many bytes of rows (their in-memory size, before
// Parquet encoding and compression, so the files are smaller) a writer
// writes into its open data files (one per partition) before it ends
// them and opens new ones; it also ends them at every checkpoint. (With
// the Arrow writer, the fallback, the rows are buffered up to this size
// and written then.) Default 64 MiB; at least 1 KiB.
func TargetFileSize(n int64) Option {
	return optionFunc(func(c *config) {
		if n < 1024 || n > maxTargetFileSize {
			c.errs = append(c.errs, fmt.Errorf("%w: TargetFileSize %d: want 1 KiB to 1 TiB", ErrInvalidConfig, n))
		}
		c.targetFileSize = n
	})
}

// EventTimeColumn fills the column with the record's event time (its
// sink.Meta timestamp, such as a Kafka record's timestamp) when the row
// has no value for it, so that day(col) or hour(col) partitions by event
// time. The column must be a timestamp, timestamptz, date or long
// (milliseconds) column. Default: none.
func EventTimeColumn(name string) Option {
	return optionFunc(func(c *config) { c.eventTimeColumn = name })
}

// SnapshotProperties adds properties to the summary of every snapshot the
// sink commits. Keys starting with "sluice." are reserved. Default none.
func SnapshotProperties(p map[string]string) Option {
	return optionFunc(func(c *config) {
		for k := range p {
			if strings.HasPrefix(k, "sluice.") {
				c.errs = append(c.errs, fmt.Errorf("%w: SnapshotProperties: key %q: the sluice. prefix is reserved", ErrInvalidConfig, k))
			}
		}
		c.snapshotProps = maps.Clone(p)
	})
}

// CommitRetries is how often the global committer retries a snapshot
// commit that conflicted with another writer's (on the table's fresh
// metadata, after checking again whether the checkpoint is committed),
// waiting wait, doubled after each retry up to 5 s. Defaults: 10 and
// 100 ms. When the retries are used up the job fails and restarts.
func CommitRetries(n int, wait time.Duration) Option {
	return optionFunc(func(c *config) {
		if n < 0 || wait < 0 {
			c.errs = append(c.errs, fmt.Errorf("%w: CommitRetries(%d, %v): want n ≥ 0 and wait ≥ 0", ErrInvalidConfig, n, wait))
		}
		c.commitRetries, c.commitRetryWait = n, wait
	})
}

// DuplicateFileCheck turns on iceberg-go's check, at every commit, that
// none of the checkpoint's files is referenced by the table already. It
// reads every manifest of the current snapshot, so a commit's cost grows
// with the table (see the README's figures). Default off: the skip of
// committed checkpoints keeps a file from being added twice, and file
// names carry a fresh UUID per write.
func DuplicateFileCheck(on bool) Option {
	return optionFunc(func(c *config) { c.duplicateCheck = on })
}

// Logger is where the sink logs commits and skipped re-deliveries.
// Default: nothing is logged.
func Logger(l *slog.Logger) Option {
	return optionFunc(func(c *config) {
		if l != nil {
			c.logger = l
		}
	})
}

// withHook sets the test hook of the global committer.
func withHook(h func(ctx context.Context, stage string, checkpointID int64) error) Option {
	return optionFunc(func(c *config) { c.hook = h })
}
