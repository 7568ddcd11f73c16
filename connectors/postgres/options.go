package postgres

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Guarantee is the sink's delivery guarantee.
type Guarantee int

const (
	// ExactlyOnce writes each checkpoint interval's rows of a subtask in
	// one transaction, prepares it (PREPARE TRANSACTION) at the checkpoint
	// and commits it (COMMIT PREPARED) once the checkpoint completed. The
	// server needs max_prepared_transactions > 0. The default.
	ExactlyOnce Guarantee = iota
	// AtLeastOnce writes rows in autocommitted batches; every row is in
	// the table when a checkpoint completes. After a failure rows written
	// after the restored checkpoint are written again: duplicates in
	// Append mode, the same result in Upsert mode.
	AtLeastOnce
)

func (g Guarantee) String() string {
	switch g {
	case ExactlyOnce:
		return "exactly-once"
	case AtLeastOnce:
		return "at-least-once"
	}
	return fmt.Sprintf("Guarantee(%d)", int(g))
}

// Mode is how rows are written.
type Mode int

const (
	// Append inserts every row with COPY. The default.
	Append Mode = iota
	// Upsert writes every row with INSERT … ON CONFLICT (key) DO UPDATE
	// SET (the other columns), in pipelined batches: writing a row again
	// leaves the table as it was, so at-least-once delivery gives
	// exactly-once results.
	Upsert
)

func (m Mode) String() string {
	switch m {
	case Append:
		return "append"
	case Upsert:
		return "upsert"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// ErrInvalidConfig is wrapped by configuration errors; they name the
// option.
var ErrInvalidConfig = errors.New("postgres: invalid configuration")

// SinkOption configures a sink.
type SinkOption interface{ apply(*sinkConfig) }

type sinkOptionFunc func(*sinkConfig)

func (f sinkOptionFunc) apply(c *sinkConfig) { f(c) }

type sinkConfig struct {
	guarantee    Guarantee
	mode         Mode
	columns      []string
	key          []string
	batchSize    int
	gidPrefix    string
	setupTimeout time.Duration
	logger       *slog.Logger
	password     *string
	position     any // func(T) string of the sink's T: RecordPosition
}

func defaultSinkConfig() sinkConfig {
	return sinkConfig{
		guarantee:    ExactlyOnce,
		mode:         Append,
		batchSize:    1000,
		setupTimeout: 60 * time.Second,
		logger:       slog.New(slog.DiscardHandler),
	}
}

func (c *sinkConfig) validate() error {
	switch {
	case c.guarantee != ExactlyOnce && c.guarantee != AtLeastOnce:
		return fmt.Errorf("%w: DeliveryGuarantee: %v; allowed: ExactlyOnce, AtLeastOnce", ErrInvalidConfig, c.guarantee)
	case c.mode != Append && c.mode != Upsert:
		return fmt.Errorf("%w: WriteMode: %v; allowed: Append, Upsert", ErrInvalidConfig, c.mode)
	case c.batchSize <= 0:
		return fmt.Errorf("%w: BatchSize: %d; must be > 0", ErrInvalidConfig, c.batchSize)
	case c.setupTimeout <= 0:
		return fmt.Errorf("%w: SetupTimeout: %v; must be > 0", ErrInvalidConfig, c.setupTimeout)
	case len(c.key) > 0 && c.mode != Upsert:
		return fmt.Errorf("%w: Key is only for WriteMode(Upsert)", ErrInvalidConfig)
	case len(c.gidPrefix) > 120:
		return fmt.Errorf("%w: TransactionPrefix: %d bytes; at most 120 (a gid has at most 200)", ErrInvalidConfig, len(c.gidPrefix))
	}
	for _, r := range c.gidPrefix {
		if !gidRune(r) {
			return fmt.Errorf("%w: TransactionPrefix %q: only ASCII letters, digits, '_', '.' and '-' are allowed", ErrInvalidConfig, c.gidPrefix)
		}
	}
	if err := unique("Columns", c.columns); err != nil {
		return err
	}
	return unique("Key", c.key)
}

func unique(opt string, names []string) error {
	seen := map[string]bool{}
	for _, n := range names {
		if n == "" {
			return fmt.Errorf("%w: %s: empty column name", ErrInvalidConfig, opt)
		}
		if seen[n] {
			return fmt.Errorf("%w: %s: column %q twice", ErrInvalidConfig, opt, n)
		}
		seen[n] = true
	}
	return nil
}

// DeliveryGuarantee sets the guarantee. Default: ExactlyOnce.
func DeliveryGuarantee(g Guarantee) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.guarantee = g })
}

// WriteMode sets how rows are written. Default: Append.
func WriteMode(m Mode) SinkOption { return sinkOptionFunc(func(c *sinkConfig) { c.mode = m }) }

// Columns names the table columns the sink writes, in the order of the
// values a row mapper returns. Required with [NewSink]; with [NewMapSink]
// the default is every column of the table that can be written (not
// generated, not GENERATED ALWAYS AS IDENTITY), in table order: set it to
// leave out a column whose default should apply (a serial id), since a
// field missing from a record is written as NULL.
func Columns(names ...string) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.columns = append([]string(nil), names...) })
}

// Key names the conflict columns of Upsert mode: the columns of a primary
// key or unique index of the table, all of them among Columns. Default:
// the table's primary key.
func Key(names ...string) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.key = append([]string(nil), names...) })
}

// BatchSize is the number of rows a writer buffers before it sends them
// to the server (one COPY, or one pipelined batch of upserts). Every
// buffered row is sent at each checkpoint. Exactly-once Upsert sends a
// checkpoint interval's rows only at the checkpoint (see the package doc).
// Default: 1000.
func BatchSize(n int) SinkOption { return sinkOptionFunc(func(c *sinkConfig) { c.batchSize = n }) }

// TransactionPrefix sets the prefix of the prepared transactions' gids
// (ASCII letters, digits, '_', '.', '-'; at most 120 bytes); a gid is
// <prefix><subtask>-<checkpoint>. Two sinks must never share a prefix:
// each one rolls back the other's prepared transactions. Default:
// "sluice-<job id>-<sink uid>-", the uid replaced by a hash when the whole
// would be longer than 120 bytes (see [DefaultTransactionPrefix]).
func TransactionPrefix(p string) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.gidPrefix = p })
}

// SetupTimeout bounds a writer's start: connecting (retried while the
// server refuses connections, so a job restarting while the server
// restarts waits for it), the schema check and the recovery of prepared
// transactions. Default: 60s.
func SetupTimeout(d time.Duration) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.setupTimeout = d })
}

// Logger sets the logger of recovery and commit events. Default: none.
func Logger(l *slog.Logger) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) {
		if l != nil {
			c.logger = l
		}
	})
}

// Password sets the password the sink connects with, overriding one in
// the connection string (and PGPASSWORD, ~/.pgpass). Default: the
// connection string's.
func Password(p string) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.password = &p })
}

// RecordPosition sets how a record's position in the job's input is
// described for errors about it (a [RowError]'s Position, a record whose
// fields are not the table's): for example `topic "orders" partition 1
// offset 42`. T must be the sink's record type. It is called only for a
// record in error; the writer keeps each buffered row's record until the
// row is sent. Default: none (errors give the writer's record count).
func RecordPosition[T any](describe func(T) string) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.position = describe })
}
