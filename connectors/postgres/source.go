package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/source/enumerate"
)

// Op is the operation of a [Change], in Debezium's letters.
type Op byte

const (
	// OpRead is a row read by the snapshot ("r").
	OpRead Op = 'r'
	// OpInsert is an inserted row ("c").
	OpInsert Op = 'c'
	// OpUpdate is an updated row ("u").
	OpUpdate Op = 'u'
	// OpDelete is a deleted row ("d").
	OpDelete Op = 'd'
)

func (o Op) String() string { return string(rune(o)) }

// Change is a record of the snapshot and CDC sources: a row of the
// snapshot (OpRead, After only) or a change from the write-ahead log.
//
// Row images map column names to values of the CLI's value contract:
// int64 (smallint, integer, bigint, oid), float64 (real, double
// precision), json.Number (numeric), bool, string (text, varchar, uuid and
// every type not listed here, in PostgreSQL's text form), time.Time
// (timestamp, timestamptz, date), []byte (bytea), the decoded value of
// json and jsonb (numbers as json.Number), and nil for NULL.
type Change struct {
	// Op is the operation.
	Op Op
	// Table is the table, schema.name.
	Table string
	// Key is the value of the key column (after the change; before it for
	// a delete); for a key of several columns ([KeyColumns]), their values
	// in key order, an []any.
	Key any
	// Before is the row before an update or a delete. Without REPLICA
	// IDENTITY FULL on the table PostgreSQL logs only the key columns of
	// a delete, and no before image of an update that keeps the key.
	Before map[string]any
	// After is the row after an insert or an update, or the row read by
	// the snapshot.
	After map[string]any
	// LSN is the commit LSN of the change's transaction (0 for snapshot
	// rows).
	LSN uint64
	// CommitTime is the commit time of the change's transaction (zero for
	// snapshot rows).
	CommitTime time.Time
	// Xid is the change's transaction id (0 for snapshot rows).
	Xid uint32
}

// Split is a split of the snapshot and CDC sources: a chunk of the table
// by key range, or the one stream split of the CDC source. It carries its position: the last key read, the LSN of the last
// change emitted.
type Split struct {
	// ID is "chunk-<n>" or "stream".
	ID string `json:"id"`
	// Lo is the exclusive lower bound of the keys still to read, in the
	// key's text form, a JSON array of the columns' text forms for a
	// composite key (nil: from the first key). It moves with each row
	// read: the position of a chunk, and of the stream split while it
	// snapshots.
	Lo *string `json:"lo,omitempty"`
	// Hi is the inclusive upper bound of a chunk (nil: to the last key).
	Hi *string `json:"hi,omitempty"`
	// Key names the key columns the split's positions (Lo, Hi, and the
	// pages' bounds in Segments) are of, in key order: a restore with
	// another key fails instead of reading the positions as keys they are
	// not. Absent in checkpoints of versions before it (not checked).
	Key []string `json:"key,omitempty"`

	// CDC marks a chunk of the CDC source's snapshot: its pages record
	// their snapshots (Segments) for the stream split.
	CDC bool `json:"cdc,omitempty"`
	// Finished marks a CDC chunk read to its end, kept in its reader's
	// state until the enumerator acknowledged its pages.
	Finished bool `json:"finished,omitempty"`

	// Stream marks the CDC split.
	Stream bool `json:"stream,omitempty"`
	// Chunks is the number of chunk splits the stream split waits for
	// (parallel snapshot); Waiting is true until their pages arrived.
	Chunks  int  `json:"chunks,omitempty"`
	Waiting bool `json:"waiting,omitempty"`
	// Snapshotting is true while the stream split reads the table.
	Snapshotting bool `json:"snapshotting,omitempty"`
	// Segments are the pages the snapshot read, each with the snapshot it
	// was read in, to reconcile the stream with (dropped once the stream
	// passed every page's high watermark).
	Segments []Segment `json:"segments,omitempty"`
	// LSN is the commit LSN of the transaction the stream is in (the
	// slot's start point before the first change), N the number of the
	// table's changes of that transaction emitted so far, Done whether the
	// whole transaction was.
	LSN  uint64 `json:"lsn,omitempty"`
	N    int    `json:"n,omitempty"`
	Done bool   `json:"done,omitempty"`
}

// SplitID returns the split's id.
func (s Split) SplitID() string { return s.ID }

func (s Split) clone() Split {
	c := s
	c.Lo = clonePtr(s.Lo)
	c.Hi = clonePtr(s.Hi)
	c.Segments = slices.Clone(s.Segments)
	c.Key = slices.Clone(s.Key)
	return c
}

func clonePtr(p *string) *string {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// EnumState is the enumerator state of the snapshot and CDC sources: the
// splits not yet assigned, and (CDC) the pages of the chunks read so far.
type EnumState struct {
	enumerate.DiscoveredState[Split]
	// Chunks holds, by chunk split id, the pages of the CDC snapshot's
	// finished chunks.
	Chunks map[string][]Segment `json:"chunks,omitempty"`
}

// SourceOption configures a snapshot or CDC source.
type SourceOption interface{ applySource(*sourceConfig) }

type sourceOptionFunc func(*sourceConfig)

func (f sourceOptionFunc) applySource(c *sourceConfig) { f(c) }

type sourceConfig struct {
	keys         []string
	chunkSize    int
	fetchSize    int
	slot         string
	publication  string
	createSlot   bool
	createPub    bool
	skipSnapshot bool
	inStream     bool
	statusEvery  time.Duration
	setupTimeout time.Duration
	// chunkWaitWarn is the wait for chunks after which the stream split
	// logs the missing ones (ChunkWaitWarning).
	chunkWaitWarn time.Duration
	logger        *slog.Logger
	debeziumName  string
	password      *string
}

func defaultSourceConfig(table string) sourceConfig {
	return sourceConfig{
		chunkSize:     8192,
		fetchSize:     8192,
		slot:          DefaultSlotName(table),
		publication:   DefaultSlotName(table),
		statusEvery:   10 * time.Second,
		setupTimeout:  60 * time.Second,
		chunkWaitWarn: time.Minute,
		logger:        slog.New(slog.DiscardHandler),
	}
}

// DefaultSlotName is the default Slot and Publication of a CDC source of
// table: "sluice_<table>", the table name in lower case with other
// characters than letters, digits and '_' as '_', cut to 50 characters.
func DefaultSlotName(table string) string { return "sluice_" + sanitizeIdent(table) }

// sanitizeIdent turns a table name into a slot-name fragment: lower-case
// letters, digits and '_'.
func sanitizeIdent(s string) string {
	b := make([]byte, 0, len(s))
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_':
			b = append(b, byte(r))
		case r >= 'A' && r <= 'Z':
			b = append(b, byte(r-'A'+'a'))
		default:
			b = append(b, '_')
		}
	}
	if len(b) > 50 {
		b = b[:50]
	}
	return string(b)
}

func (c *sourceConfig) validate() error {
	switch {
	case c.chunkSize <= 0:
		return fmt.Errorf("%w: ChunkSize: %d; must be > 0", ErrInvalidConfig, c.chunkSize)
	case c.fetchSize <= 0:
		return fmt.Errorf("%w: FetchSize: %d; must be > 0", ErrInvalidConfig, c.fetchSize)
	case c.statusEvery <= 0:
		return fmt.Errorf("%w: StatusInterval: %v; must be > 0", ErrInvalidConfig, c.statusEvery)
	case c.setupTimeout <= 0:
		return fmt.Errorf("%w: SourceSetupTimeout: %v; must be > 0", ErrInvalidConfig, c.setupTimeout)
	case c.chunkWaitWarn <= 0:
		return fmt.Errorf("%w: ChunkWaitWarning: %v; must be > 0", ErrInvalidConfig, c.chunkWaitWarn)
	}
	if err := unique("KeyColumns", c.keys); err != nil {
		return err
	}
	for opt, n := range map[string]string{"Slot": c.slot, "Publication": c.publication} {
		if n == "" || len(n) > 63 {
			return fmt.Errorf("%w: %s %q: 1 to 63 characters", ErrInvalidConfig, opt, n)
		}
		for _, r := range n {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
				return fmt.Errorf("%w: %s %q: only lower-case letters, digits and '_' are allowed", ErrInvalidConfig, opt, n)
			}
		}
	}
	return nil
}

// KeyColumns names the columns the sources order and chunk the table by,
// in order: together unique, each NOT NULL. Any types PostgreSQL orders
// with a btree (integers, text with its collation, uuid, numeric,
// timestamps, …): chunk bounds and page ranges are row-value comparisons,
// (a, b) > ($1, $2), computed by the server; a position is the last key
// read, stored in the columns' text forms (a JSON array of them for more
// than one column). Default: the table's primary key. The CDC source
// needs the key columns in every change: the primary key or the replica
// identity's columns, or REPLICA IDENTITY FULL on the table.
func KeyColumns(names ...string) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.keys = append([]string(nil), names...) })
}

// KeyColumn is KeyColumns with one column.
func KeyColumn(name string) SourceOption { return KeyColumns(name) }

// ChunkSize is the number of rows per chunk of the bounded snapshot (one
// split per chunk). Default: 8192.
func ChunkSize(n int) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.chunkSize = n })
}

// FetchSize is the number of rows one query reads (a page: one batch, the
// unit of a snapshot's position). Default: 8192.
func FetchSize(n int) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.fetchSize = n })
}

// Slot names the CDC source's logical replication slot (lower-case
// letters, digits, '_'). Default: "sluice_<table>" (the table name in
// lower case, other characters as '_').
func Slot(name string) SourceOption { return sourceOptionFunc(func(c *sourceConfig) { c.slot = name }) }

// Publication names the CDC source's publication, which must publish the
// table. Default: "sluice_<table>", as Slot.
func Publication(name string) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.publication = name })
}

// CreateSlot lets the CDC source create its replication slot (pgoutput)
// when it does not exist. Default: false: a missing slot fails the job
// with [ErrSlotNotFound].
func CreateSlot(yes bool) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.createSlot = yes })
}

// CreatePublication lets the CDC source create its publication (FOR TABLE
// the table) when it does not exist. Default: false: a missing
// publication fails the job with [ErrPublicationNotFound].
func CreatePublication(yes bool) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.createPub = yes })
}

// SkipSnapshot makes the CDC source stream changes from the slot's
// position without reading the table first. Default: false (snapshot,
// then stream).
func SkipSnapshot() SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.skipSnapshot = true })
}

// SnapshotInStream makes the CDC source read its snapshot in the stream
// split, one page after the other, instead of in chunk splits that readers
// read in parallel. Default: off (chunks of ChunkSize rows, read in
// parallel, then the stream split).
func SnapshotInStream() SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.inStream = true })
}

// StatusInterval is the longest time between two standby status updates
// the CDC source sends (they confirm the LSN of the last committed
// checkpoint). Default: 10s (below the server's wal_sender_timeout,
// 60s by default).
func StatusInterval(d time.Duration) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.statusEvery = d })
}

// SourceSetupTimeout bounds the setup: connecting, the checks, creating
// the slot and the publication, computing the chunks. Default: 60s.
func SourceSetupTimeout(d time.Duration) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.setupTimeout = d })
}

// ChunkWaitWarning is how long the CDC source's stream split waits for
// the snapshot's chunks without another one arriving before it logs a
// warning naming the chunks still missing (and again after each further
// ChunkWaitWarning). A chunk arrives once a reader read it to its end and
// a checkpoint holding that completed. Default: 1m.
func ChunkWaitWarning(d time.Duration) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.chunkWaitWarn = d })
}

// SourceLogger sets the logger of the sources. Default: none.
func SourceLogger(l *slog.Logger) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) {
		if l != nil {
			c.logger = l
		}
	})
}

// SourcePassword sets the password the sources connect with (both the
// regular and the replication connections), overriding one in the
// connection string (and PGPASSWORD, ~/.pgpass). Default: the connection
// string's.
func SourcePassword(p string) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.password = &p })
}

// DebeziumServerName is the "name" of the Debezium envelope's source
// block ([NewDebeziumCDCSource]). Default: the slot name.
func DebeziumServerName(n string) SourceOption {
	return sourceOptionFunc(func(c *sourceConfig) { c.debeziumName = n })
}

var (
	// ErrWALLevel is wrapped by the error of a CDC source on a server
	// whose wal_level is not logical.
	ErrWALLevel = errors.New("postgres: wal_level is not logical")
	// ErrSlotNotFound is wrapped by the error of a CDC source whose slot
	// does not exist (and CreateSlot is off).
	ErrSlotNotFound = errors.New("postgres: replication slot not found")
	// ErrPublicationNotFound is wrapped by the error of a CDC source whose
	// publication does not exist (and CreatePublication is off) or does
	// not publish the table.
	ErrPublicationNotFound = errors.New("postgres: publication not found")
	// ErrSlotAhead is wrapped by the error of a CDC source restored from a
	// position older than what its slot has confirmed: the changes in
	// between are gone from the slot (a restore from an old savepoint).
	ErrSlotAhead = errors.New("postgres: replication slot is ahead of the restored position")
)

// pgSource is the snapshot or CDC source; conv turns a Change into T.
type pgSource[T any] struct {
	url   string
	table string
	cdc   bool
	cfg   sourceConfig
	conv  func(Change) (T, error)
	conn  *pgx.ConnConfig
}

// NewSnapshotSource returns a bounded source of the rows of table: the
// enumerator cuts the table into chunks of ChunkSize rows by key range
// (one split each, assigned on request, so chunks are read in parallel);
// each chunk is read in pages of FetchSize rows ordered by key, and its
// position is the last key read, so a restore resumes mid-chunk. Records
// are Changes with OpRead.
//
// Consistency: each page is one query, so one consistent snapshot of its
// key range; with the defaults a chunk is one page. The table as a whole
// is not read in one snapshot: a row changed while the source runs comes
// out as its chunk saw it, rows inserted or deleted in a chunk already
// read are not reflected, and a row whose key moves from a chunk not yet
// read to one already read is missed (and the other way round read twice).
// For an exact picture of a table that is being written, use
// [NewCDCSource].
func NewSnapshotSource(url, table string, opts ...SourceOption) (source.Source[Change, Split, EnumState], error) {
	return newPgSource(url, table, false, func(c Change) (Change, error) { return c, nil }, opts)
}

// NewCDCSource returns an unbounded source of the table's rows and then
// its changes, from a logical replication slot (pgoutput) and a
// publication; see the package doc. The job needs periodic checkpoints
// (stream.CheckpointEvery): the stream starts after the checkpoint that
// follows the last chunk, and the slot confirms (and lets the server
// release WAL) only what a committed checkpoint holds.
func NewCDCSource(url, table string, opts ...SourceOption) (source.Source[Change, Split, EnumState], error) {
	return newPgSource(url, table, true, func(c Change) (Change, error) { return c, nil }, opts)
}

// NewDebeziumCDCSource is [NewCDCSource] with records in Debezium's JSON
// envelope (see [Change.Debezium]).
func NewDebeziumCDCSource(url, table string, opts ...SourceOption) (source.Source[[]byte, Split, EnumState], error) {
	var name string
	s, err := newPgSource(url, table, true, func(c Change) ([]byte, error) { return c.debezium(name) }, opts)
	if err != nil {
		return nil, err
	}
	name = s.(*pgSource[[]byte]).cfg.debeziumName
	if name == "" {
		name = s.(*pgSource[[]byte]).cfg.slot
	}
	return s, nil
}

func newPgSource[T any](url, table string, cdc bool, conv func(Change) (T, error), opts []SourceOption) (source.Source[T, Split, EnumState], error) {
	if table == "" {
		return nil, fmt.Errorf("%w: table is empty", ErrInvalidConfig)
	}
	cfg := defaultSourceConfig(table)
	for _, o := range opts {
		o.applySource(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cc, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("%w: connection URL: %w", ErrInvalidConfig, err)
	}
	if cfg.password != nil {
		cc.Password = *cfg.password
	}
	return &pgSource[T]{url: url, table: table, cdc: cdc, cfg: cfg, conv: conv, conn: cc}, nil
}

// Boundedness is Bounded for the snapshot source, unbounded for CDC.
func (s *pgSource[T]) Boundedness() source.Boundedness {
	if s.cdc {
		return source.ContinuousUnbounded
	}
	return source.Bounded
}

// CreateEnumerator returns an enumerator that sets up (CDC: checks,
// publication, slot) and computes the splits once, off the coordinator
// goroutine.
func (s *pgSource[T]) CreateEnumerator(ctx source.EnumeratorContext[Split]) (source.Enumerator[Split, EnumState], error) {
	return s.RestoreEnumerator(ctx, EnumState{})
}

// RestoreEnumerator returns the enumerator of a checkpointed state.
//
// A CDC source's state whose discovery is done holds every split of the
// job (the chunks and the stream split, pending or in the readers'
// states): the restored enumerator checks the server again but computes
// no chunks. (The Discovered enumerator of an unbounded source discovers
// again on every start; chunks computed anew on a table that grew would
// get ids the first computation did not have, and be read again.)
func (s *pgSource[T]) RestoreEnumerator(ctx source.EnumeratorContext[Split], st EnumState) (source.Enumerator[Split, EnumState], error) {
	disc := s.discover
	if s.cdc && st.Done {
		disc = s.recheck
	}
	d := enumerate.NewDiscovered(ctx, enumerate.Discovery[Split]{Discover: disc}, s.Boundedness(), st.DiscoveredState)
	return newEnumerator(d, ctx, st.Chunks), nil
}

// SplitSerializer stores splits as JSON, version 1.
func (s *pgSource[T]) SplitSerializer() serde.Versioned[Split] { return serde.JSON[Split](1) }

// EnumeratorStateSerializer stores the enumerator state as JSON, version 1.
func (s *pgSource[T]) EnumeratorStateSerializer() serde.Versioned[EnumState] {
	return serde.JSON[EnumState](1)
}

// discover connects, checks and returns the splits of a fresh start. An
// error a restart cannot fix is restart.ErrUnrecoverable.
func (s *pgSource[T]) discover(ctx context.Context) ([]Split, error) {
	splits, err := s.setup(ctx)
	return splits, sourceUnrecoverable(err)
}

// sourceUnrecoverable marks the setup errors a restart cannot fix
// (markUnrecoverable's, and the CDC source's wal_level, slot and
// publication errors) as restart.ErrUnrecoverable, so the job fails at
// once instead of restarting into the same error.
func sourceUnrecoverable(err error) error {
	if err == nil || errors.Is(err, restart.ErrUnrecoverable) {
		return err
	}
	if errors.Is(err, ErrWALLevel) || errors.Is(err, ErrSlotNotFound) || errors.Is(err, ErrPublicationNotFound) || errors.Is(err, ErrSlotAhead) {
		return unrecoverable{err}
	}
	return markUnrecoverable(err)
}

// recheck is the discovery of a restored CDC source whose splits are all
// in the restored state: setup's checks, creating nothing (a slot created
// now would start after the changes the restored splits still need), and
// no split.
func (s *pgSource[T]) recheck(ctx context.Context) ([]Split, error) {
	_, err := s.setupMode(ctx, true)
	return nil, sourceUnrecoverable(err)
}

// setup is discover without the marking of errors.
func (s *pgSource[T]) setup(ctx context.Context) ([]Split, error) { return s.setupMode(ctx, false) }

// setupMode is setup; restored (CDC only) checks and returns no split.
func (s *pgSource[T]) setupMode(ctx context.Context, restored bool) ([]Split, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, s.cfg.setupTimeout,
		fmt.Errorf("postgres source: SourceSetupTimeout (%v) expired", s.cfg.setupTimeout))
	defer cancel()
	conn, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	t, err := loadSourceTable(ctx, conn, s.table, s.cfg.keys)
	if err != nil {
		return nil, fmt.Errorf("postgres source: %w", err)
	}
	if s.cdc {
		return s.setupCDC(ctx, conn, t, restored)
	}
	return s.chunks(ctx, conn, t)
}

// connect opens a regular connection.
func (s *pgSource[T]) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, s.conn.Copy())
	if err != nil {
		return nil, fmt.Errorf("postgres source: connect to %s:%d database %q as %q: %w", s.conn.Host, s.conn.Port, s.conn.Database, s.conn.User, err)
	}
	return conn, nil
}
