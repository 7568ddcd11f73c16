package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/sink/leftover"
)

// committable names one prepared transaction.
type committable struct {
	// GID is the prepared transaction's gid,
	// <prefix><subtask>-<checkpoint>.
	GID string `json:"gid"`
	// XID is its transaction id (xid8): once the gid is gone,
	// pg_xact_status(XID) says whether it was committed or rolled back.
	XID uint64 `json:"xid"`
	// Checkpoint is the checkpoint it was prepared at.
	Checkpoint int64 `json:"checkpoint"`
	// Prepared is when it was prepared, in ms since the epoch.
	Prepared int64 `json:"prepared"`
}

var committableSerde = serde.JSON[committable](1)

// MetricOldestPreparedAge is the name of the gauge, in each writer's
// metric group, of the age in milliseconds of the oldest transaction the
// writer's subtask prepared whose commit the sink has not seen yet (0 when
// there is none). A prepared transaction holds its locks and keeps VACUUM
// from removing rows older than it: alert when this grows past a few
// checkpoint intervals.
const MetricOldestPreparedAge = "oldestPreparedTransactionAgeMs"

// pgSink writes rows into one table; [NewSink] and [NewMapSink] return it
// wrapped as a sink.Sink.
type pgSink[T any] struct {
	cfg      sinkConfig
	connCfg  *pgx.ConnConfig
	table    string
	bind     func(t *table, m *pgtype.Map) (func(T) ([]any, error), error)
	prepared *tracker
	pos      func(T) string // RecordPosition; nil = none

	// syncBatches makes at-least-once writers commit every batch
	// synchronously instead of asynchronously with a WAL flush at each
	// checkpoint: the benchmarks' and tests' comparison.
	syncBatches bool
}

// NewSink returns a sink of rows into table (a name as PostgreSQL parses
// it: "orders", "sales.orders", `"Mixed Case"`) of the database that url
// (a libpq connection string or URL, see pgx.ParseConfig) names. rows
// turns a record into the values of the columns named by the [Columns]
// option (required), in that order; a value is anything pgx encodes for
// the column's type (nil is NULL).
//
// With ExactlyOnce (the default) the result is a two-phase sink
// (sink.NewTwoPhase); with AtLeastOnce a plain one. Configuration errors
// wrap ErrInvalidConfig and name the option; the table and the columns
// are checked when the writers start.
func NewSink[T any](url, tableName string, rows func(T) ([]any, error), opts ...SinkOption) (sink.Sink[T], error) {
	s, err := newRowSink(url, tableName, rows, opts)
	if err != nil {
		return nil, err
	}
	return s.wrap(), nil
}

func newRowSink[T any](url, tableName string, rows func(T) ([]any, error), opts []SinkOption) (*pgSink[T], error) {
	if rows == nil {
		return nil, fmt.Errorf("%w: NewSink: the row mapper is nil", ErrInvalidConfig)
	}
	s, err := newSink[T](url, tableName, opts)
	if err != nil {
		return nil, err
	}
	if len(s.cfg.columns) == 0 {
		return nil, fmt.Errorf("%w: Columns: required with NewSink (the columns of the row mapper's values, in order)", ErrInvalidConfig)
	}
	s.bind = func(*table, *pgtype.Map) (func(T) ([]any, error), error) { return rows, nil }
	return s, nil
}

// NewMapSink returns a sink of records that map column names to values,
// like the CLI's JSON-like records: a field missing from a record is
// written as NULL, a field that is not one of the sink's columns is an
// error naming it. The columns are [Columns], by default every column of
// the table that can be written. Otherwise like [NewSink].
func NewMapSink(url, tableName string, opts ...SinkOption) (sink.Sink[map[string]any], error) {
	return NewFieldsSink(url, tableName, func(m map[string]any) (map[string]any, error) { return m, nil }, opts...)
}

// NewFieldsSink is [NewMapSink] for records of any type: fields returns a
// record's column → value map (it may return the same map for every
// record: the sink does not keep it). An error of fields fails the job,
// naming the record.
func NewFieldsSink[T any](url, tableName string, fields func(T) (map[string]any, error), opts ...SinkOption) (sink.Sink[T], error) {
	if fields == nil {
		return nil, fmt.Errorf("%w: NewFieldsSink: fields is nil", ErrInvalidConfig)
	}
	s, err := newSink[T](url, tableName, opts)
	if err != nil {
		return nil, err
	}
	s.bind = func(t *table, tm *pgtype.Map) (func(T) ([]any, error), error) {
		// Append writes with COPY in the binary format, into which pgx
		// cannot encode a Go string for timestamptz, date, uuid,
		// numeric, … (Upsert's statements send such a string as text,
		// for the server to parse.) With Append a string for one of them
		// is parsed here: the type's text form as PostgreSQL writes it,
		// or, for timestamps, RFC 3339.
		fromText := make([]pgtype.Codec, len(t.cols))
		for i, c := range t.cols {
			if s.cfg.mode == Append && tm.PlanEncode(c.oid, pgtype.BinaryFormatCode, "") == nil {
				if typ, ok := tm.TypeForOID(c.oid); ok {
					fromText[i] = typ.Codec
				}
			}
		}
		return func(v T) ([]any, error) {
			m, err := fields(v)
			if err != nil {
				return nil, err
			}
			vals := make([]any, len(t.cols))
			n := 0
			for i, c := range t.cols {
				if v, ok := m[c.name]; ok {
					if str, ok := v.(string); ok && fromText[i] != nil {
						pv, err := fromText[i].DecodeValue(tm, c.oid, pgtype.TextFormatCode, []byte(str))
						if err != nil {
							ts, terr := time.Parse(time.RFC3339Nano, str)
							if terr != nil || (c.oid != pgtype.TimestamptzOID && c.oid != pgtype.TimestampOID) {
								return nil, fmt.Errorf("%w: column %q (%s): %w", ErrRowRejected, c.name, c.typ, err)
							}
							pv = ts
						}
						v = pv
					}
					vals[i] = v
					n++
				}
			}
			if n < len(m) {
				for k := range m {
					if _, ok := t.colsIdx[k]; !ok {
						return nil, fmt.Errorf("%w: field %q is not a column of table %s (columns: %q)", ErrColumnNotFound, k, t.name, t.columnNames())
					}
				}
			}
			return vals, nil
		}, nil
	}
	return s.wrap(), nil
}

func newSink[T any](url, tableName string, opts []SinkOption) (*pgSink[T], error) {
	cfg := defaultSinkConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if tableName == "" {
		return nil, fmt.Errorf("%w: table: empty", ErrInvalidConfig)
	}
	cc, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("%w: connection string: %w", ErrInvalidConfig, err)
	}
	if cc.RuntimeParams["application_name"] == "" {
		cc.RuntimeParams["application_name"] = "sluice"
	}
	if cfg.password != nil {
		cc.Password = *cfg.password
	}
	s := &pgSink[T]{cfg: cfg, connCfg: cc, table: tableName, prepared: newTracker()}
	if cfg.position != nil {
		fn, ok := cfg.position.(func(T) string)
		if !ok {
			return nil, fmt.Errorf("%w: RecordPosition: describes a %T, but the sink's records are %T", ErrInvalidConfig, cfg.position, *new(T))
		}
		s.pos = fn
	}
	return s, nil
}

func (s *pgSink[T]) wrap() sink.Sink[T] {
	if s.cfg.guarantee == ExactlyOnce {
		return sink.NewTwoPhase[T, committable](s)
	}
	return plainSink[T]{s}
}

type plainSink[T any] struct{ s *pgSink[T] }

func (p plainSink[T]) CreateWriter(ctx context.Context, ic sink.InitContext) (sink.Writer[T], error) {
	w, err := p.s.newWriter(ctx, ic)
	if err != nil {
		return nil, markUnrecoverable(err)
	}
	return w, nil
}

// CreateWriter makes the writer of one subtask: it connects, checks the
// table, and (exactly-once) rolls back the prepared transactions of
// earlier attempts that no restored checkpoint names.
func (s *pgSink[T]) CreateWriter(ctx context.Context, ic sink.InitContext) (sink.CommittingWriter[T, committable], error) {
	w, err := s.newWriter(ctx, ic)
	if err != nil {
		return nil, markUnrecoverable(err)
	}
	return w, nil
}

// CreateCommitter makes the committer of one subtask; it connects on its
// first commit.
func (s *pgSink[T]) CreateCommitter(_ context.Context, ic sink.InitContext) (sink.Committer[committable], error) {
	return &committer[T]{s: s, log: s.cfg.logger.With("sink", ic.OperatorName(), "subtask", ic.SubtaskIndex())}, nil
}

// CommittableSerializer stores committables as JSON, version 1.
func (s *pgSink[T]) CommittableSerializer() serde.Versioned[committable] { return committableSerde }

// DefaultTransactionPrefix is the gid prefix of a sink without
// [TransactionPrefix]: "sluice-<job id>-<uid>-", where uid is the sink
// operator's uid with every character outside [A-Za-z0-9._-] replaced by
// "_", or "h" and a hash of it when the prefix would be longer than 120
// bytes. It returns "" when ic has no job id.
func DefaultTransactionPrefix(ic sink.InitContext) string {
	if ic.JobID() == "" {
		return ""
	}
	p := "sluice-" + sanitize(ic.JobID()) + "-" + sanitize(ic.OperatorUID()) + "-"
	if len(p) > 120 {
		h := fnv.New64a()
		h.Write([]byte(ic.OperatorUID()))
		p = "sluice-" + sanitize(ic.JobID()) + "-h" + strconv.FormatUint(h.Sum64(), 16) + "-"
	}
	return p
}

func gidRune(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
}

func sanitize(s string) string {
	b := make([]byte, 0, len(s))
	for _, r := range s {
		if gidRune(r) {
			b = append(b, byte(r))
		} else {
			b = append(b, '_')
		}
	}
	return string(b)
}

// connect opens a connection, retrying while the server refuses or
// drops connections (it may be restarting) until ctx is done. A failed
// authentication or a missing database is not retried.
func (s *pgSink[T]) connect(ctx context.Context, log *slog.Logger) (*pgx.Conn, error) {
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		conn, err := pgx.ConnectConfig(ctx, s.connCfg.Copy())
		if err == nil {
			return conn, nil
		}
		if isAuthError(err) || ctx.Err() != nil {
			return nil, fmt.Errorf("postgres sink: connect to %s:%d database %q as %q: %w", s.connCfg.Host, s.connCfg.Port, s.connCfg.Database, s.connCfg.User, err)
		}
		log.Debug("postgres sink: cannot connect; retrying", "attempt", attempt, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("postgres sink: connect to %s:%d database %q as %q: %w (gave up: %w)", s.connCfg.Host, s.connCfg.Port, s.connCfg.Database, s.connCfg.User, err, context.Cause(ctx))
		case <-t.C:
		}
		backoff = min(backoff*2, time.Second)
	}
}

// writer writes the rows of one subtask.
type writer[T any] struct {
	s      *pgSink[T]
	conn   *pgx.Conn
	t      *table
	rowOf  func(T) ([]any, error)
	sub    int
	prefix string // exactly-once: the gid prefix
	log    *slog.Logger

	rows  [][]any
	metas []rowMeta
	recs  []T   // with RecordPosition: the records of rows
	n     int64 // records got in this attempt
	inTx  bool  // exactly-once: a transaction is open
	err   error // the writer failed: the open transaction is lost

	// durable is, at-least-once, the session's synchronous_commit to
	// flush with at each checkpoint ("on", "remote_apply", …), while
	// batches commit with synchronous_commit = off; "" when batches
	// commit with the session's setting (it is off, or syncBatches).
	durable  string
	unsynced bool // batches were committed since the last flush
}

// rowMeta locates a buffered row for error messages.
type rowMeta struct {
	rec   int64
	ts    int64
	hasTS bool
}

func (s *pgSink[T]) newWriter(ctx context.Context, ic sink.InitContext) (_ *writer[T], err error) {
	w := &writer[T]{s: s, sub: ic.SubtaskIndex(),
		log: s.cfg.logger.With("sink", ic.OperatorName(), "subtask", ic.SubtaskIndex(), "table", s.table)}
	ctx, cancel := context.WithTimeoutCause(ctx, s.cfg.setupTimeout,
		fmt.Errorf("postgres sink: SetupTimeout (%v) expired", s.cfg.setupTimeout))
	defer cancel()
	w.conn, err = s.connect(ctx, w.log)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = w.conn.Close(cctx)
			ccancel()
		}
	}()
	if s.cfg.guarantee == ExactlyOnce {
		if v := w.conn.PgConn().ParameterStatus("server_version"); serverMajor(v) < 14 {
			return nil, fmt.Errorf("%w: postgres sink: exactly-once needs PostgreSQL 14 or newer (pg_current_xact_id, pg_xact_status, pg_terminate_backend with a timeout); the server is %q: use DeliveryGuarantee(AtLeastOnce)", ErrInvalidConfig, v)
		}
		var max int
		if err := w.conn.QueryRow(ctx, "SELECT current_setting('max_prepared_transactions')::int").Scan(&max); err != nil {
			return nil, fmt.Errorf("postgres sink: read max_prepared_transactions: %w", err)
		}
		if max <= 0 {
			return nil, fmt.Errorf("%w: postgres sink: exactly-once needs prepared transactions, but the server's max_prepared_transactions is %d: set it to at least the sink's parallelism (%d) in postgresql.conf and restart the server, or use DeliveryGuarantee(AtLeastOnce)",
				ErrPreparedTransactionsDisabled, max, ic.Parallelism())
		}
		if max < ic.Parallelism() {
			return nil, fmt.Errorf("%w: postgres sink: the server's max_prepared_transactions is %d, less than the sink's parallelism %d: every subtask prepares a transaction at each checkpoint; raise it in postgresql.conf and restart the server",
				ErrInvalidConfig, max, ic.Parallelism())
		}
	}
	w.t, err = loadTable(ctx, w.conn, s.table, &s.cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres sink: %w", err)
	}
	w.rowOf, err = s.bind(w.t, w.conn.TypeMap())
	if err != nil {
		return nil, err
	}
	if s.cfg.guarantee != ExactlyOnce {
		if err := w.asyncCommits(ctx); err != nil {
			return nil, fmt.Errorf("postgres sink %q subtask %d: %w", ic.OperatorName(), w.sub, err)
		}
		return w, nil
	}
	w.prefix = s.cfg.gidPrefix
	if w.prefix == "" {
		w.prefix = DefaultTransactionPrefix(ic)
		if w.prefix == "" {
			return nil, fmt.Errorf("%w: postgres sink %q: the job has no id to derive the transaction prefix from: set TransactionPrefix", ErrInvalidConfig, ic.OperatorName())
		}
	}
	if err := w.fence(ctx, ic.Parallelism()); err != nil {
		return nil, fmt.Errorf("postgres sink %q subtask %d: %w", ic.OperatorName(), w.sub, err)
	}
	if err := w.recover(ctx, ic); err != nil {
		return nil, fmt.Errorf("postgres sink %q subtask %d: recover prepared transactions of prefix %q: %w", ic.OperatorName(), w.sub, w.prefix, err)
	}
	if g := ic.Metrics(); g != nil {
		sub := w.sub
		g.Gauge(MetricOldestPreparedAge, func() int64 { return s.prepared.oldestAge(sub, time.Now()) })
	}
	return w, nil
}

// asyncCommits makes an at-least-once writer's batches commit without
// waiting for their WAL to reach the disk (synchronous_commit = off, for
// this session only): a batch's commit then costs no flush of its own.
// Flush, at each checkpoint, makes every batch committed before it
// durable (flushWAL), so a server crash loses at most batches sent after
// the last completed checkpoint, which a restore sends again. A session
// whose synchronous_commit is already off is left as it is.
func (w *writer[T]) asyncCommits(ctx context.Context) error {
	if w.s.syncBatches {
		return nil
	}
	var setting string
	if err := w.conn.QueryRow(ctx, "SELECT current_setting('synchronous_commit')").Scan(&setting); err != nil {
		return fmt.Errorf("read synchronous_commit: %w", err)
	}
	if setting == "off" {
		return nil
	}
	if _, err := w.conn.Exec(ctx, "SET synchronous_commit = off"); err != nil {
		return fmt.Errorf("set synchronous_commit = off: %w", err)
	}
	w.durable = setting
	return nil
}

// flushWAL makes the batches committed since the last checkpoint durable.
// Rows still buffered are sent in a transaction that commits with the
// session's synchronous_commit: its commit waits until the WAL up to its
// commit record, and so every earlier commit, is flushed (and, as that
// setting says, replicated). (A transaction that writes no WAL of its own
// does not wait, even with an id.) Without rows to send it waits until
// the server's WAL writer has flushed the WAL written so far, which
// PostgreSQL does for asynchronous commits within three times
// wal_writer_delay (200 ms by default).
func (w *writer[T]) flushWAL(ctx context.Context) error {
	if w.durable == "" {
		return w.send(ctx)
	}
	if len(w.rows) > 0 {
		if _, err := w.conn.Exec(ctx, "BEGIN; SET LOCAL synchronous_commit = "+quoteLiteral(w.durable)); err != nil {
			return fmt.Errorf("postgres sink: table %s: begin: %w", w.t.name, err)
		}
		w.inTx = true
		if err := w.send(ctx); err != nil {
			return err
		}
		if _, err := w.conn.Exec(ctx, "COMMIT"); err != nil {
			return fmt.Errorf("postgres sink: table %s: commit: %w", w.t.name, err)
		}
		w.inTx, w.unsynced = false, false
		return nil
	}
	if !w.unsynced {
		return nil
	}
	var target string
	if err := w.conn.QueryRow(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&target); err != nil {
		return fmt.Errorf("postgres sink: table %s: read the WAL position: %w", w.t.name, err)
	}
	for wait := 5 * time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		var flushed bool
		if err := w.conn.QueryRow(ctx, "SELECT pg_current_wal_flush_lsn() >= $1::text::pg_lsn", target).Scan(&flushed); err != nil {
			return fmt.Errorf("postgres sink: table %s: wait for the WAL flush to %s: %w", w.t.name, target, err)
		}
		if flushed {
			w.unsynced = false
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("postgres sink: table %s: wait for the WAL flush to %s: %w", w.t.name, target, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// serverMajor is the major version of a server_version ("15.18 (Debian
// …)" → 15), 0 if it does not parse.
func serverMajor(v string) int {
	end := 0
	for end < len(v) && v[end] >= '0' && v[end] <= '9' {
		end++
	}
	n, _ := strconv.Atoi(v[:end])
	return n
}

// sessionName is the application_name of writer sub's connection:
// "sluice-w-<hash of the gid prefix>-<subtask>" (PostgreSQL keeps 63
// bytes of it).
func sessionName(prefix string, sub int) string {
	return sessionPrefix(prefix) + strconv.Itoa(sub)
}

func sessionPrefix(prefix string) string {
	h := fnv.New64a()
	h.Write([]byte(prefix))
	return "sluice-w-" + strconv.FormatUint(h.Sum64(), 16) + "-"
}

// fence terminates the sessions of earlier attempts' writers that this
// writer replaces (old subtask j with j % parallelism == subtask), as
// Kafka fences a transactional id: a writer that failed without Close (a
// hung process, one cut off by the network, an abandoned attempt) may
// still hold an open transaction whose row locks would block this
// writer's rows for ever. Terminating its backend rolls that transaction
// back; what it prepared is recover's.
func (w *writer[T]) fence(ctx context.Context, parallelism int) error {
	if _, err := w.conn.Exec(ctx, "SELECT set_config('application_name', $1, false)", sessionName(w.prefix, w.sub)); err != nil {
		return fmt.Errorf("set application_name: %w", err)
	}
	type session struct {
		PID  int32
		Name string
	}
	rows, err := w.conn.Query(ctx, `SELECT pid, application_name FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND left(application_name, length($1)) = $1`, sessionPrefix(w.prefix))
	if err != nil {
		return fmt.Errorf("list sessions of earlier attempts: %w", err)
	}
	sessions, err := pgx.CollectRows(rows, pgx.RowToStructByPos[session])
	if err != nil {
		return fmt.Errorf("list sessions of earlier attempts: %w", err)
	}
	for _, s := range sessions {
		j, err := strconv.Atoi(s.Name[len(sessionPrefix(w.prefix)):])
		if err != nil || j%parallelism != w.sub {
			continue
		}
		var ok bool
		if err := w.conn.QueryRow(ctx, "SELECT pg_terminate_backend($1, 10000)", s.PID).Scan(&ok); err != nil {
			return fmt.Errorf("terminate session %d of an earlier attempt's writer %d: %w", s.PID, j, err)
		}
		w.log.Info("postgres sink: terminated the session of an earlier attempt's writer", "pid", s.PID, "writer", j, "terminated", ok)
	}
	return nil
}

// recover rolls back the prepared transactions of this job's sink that no
// completed checkpoint names and that this writer is responsible for, by
// the rule of package sink/leftover with gids
// <prefix><subtask>-<checkpoint>: on a fresh start (nothing restored) those
// of old subtasks j with j % parallelism == subtask; after a restore of
// checkpoint r only those prepared after r (checkpoint > r). The ones up to
// r are the restored committables, which the committer commits.
func (w *writer[T]) recover(ctx context.Context, ic sink.InitContext) error {
	rows, err := w.conn.Query(ctx, `SELECT gid FROM pg_prepared_xacts
		WHERE database = current_database() AND left(gid, length($1)) = $1 ORDER BY gid`, w.prefix)
	if err != nil {
		return fmt.Errorf("list pg_prepared_xacts: %w", err)
	}
	gids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("list pg_prepared_xacts: %w", err)
	}
	req := leftover.Request{Parser: leftover.Scheme{Prefix: w.prefix}, Subtask: w.sub, Parallelism: ic.Parallelism(), Existing: gids}
	if id, ok := ic.RestoredCheckpointID(); ok && id > 0 {
		req.Restored, req.Checkpoint = true, id
	}
	abort, err := leftover.Abort(req)
	if err != nil {
		return err
	}
	for _, gid := range abort {
		_, err := w.conn.Exec(ctx, "ROLLBACK PREPARED '"+gid+"'")
		if err != nil && !notPrepared(err) { // another writer was quicker: fine
			return fmt.Errorf("roll back %s: %w", gid, err)
		}
		w.log.Info("postgres sink: rolled back a prepared transaction of an earlier attempt", "gid", gid)
	}
	return nil
}

// Write buffers the record's row and sends the buffer when it holds
// BatchSize rows (exactly-once Upsert: only at the checkpoint).
func (w *writer[T]) Write(ctx context.Context, v T, m sink.Meta) error {
	if w.err != nil {
		return w.err
	}
	vals, err := w.rowOf(v)
	if err != nil {
		return markUnrecoverable(fmt.Errorf("postgres sink: table %s: record %d of subtask %d%s: %w", w.t.name, w.n, w.sub, w.at(v), err))
	}
	if len(vals) != len(w.t.cols) {
		return fmt.Errorf("postgres sink: table %s: record %d of subtask %d: the row mapper returned %d values for %d columns %q", w.t.name, w.n, w.sub, len(vals), len(w.t.cols), w.t.columnNames())
	}
	w.rows = append(w.rows, vals)
	w.metas = append(w.metas, rowMeta{rec: w.n, ts: m.Timestamp, hasTS: m.HasTimestamp})
	if w.s.pos != nil {
		w.recs = append(w.recs, v)
	}
	w.n++
	if len(w.rows) >= w.s.cfg.batchSize && !(w.s.cfg.guarantee == ExactlyOnce && w.s.cfg.mode == Upsert) {
		return w.send(ctx)
	}
	return nil
}

// Flush sends every buffered row: into the open transaction
// (exactly-once), or committed and, with every batch committed before,
// flushed to disk (at-least-once).
func (w *writer[T]) Flush(ctx context.Context, _ bool) error {
	if w.err != nil {
		return w.err
	}
	return w.flushWAL(ctx)
}

// send writes the buffered rows: COPY (Append) or a pipelined batch of
// upserts (Upsert).
func (w *writer[T]) send(ctx context.Context) error {
	if len(w.rows) == 0 {
		return nil
	}
	if w.s.cfg.guarantee == ExactlyOnce && !w.inTx {
		if _, err := w.conn.Exec(ctx, "BEGIN ISOLATION LEVEL READ COMMITTED"); err != nil {
			return w.fail(fmt.Errorf("postgres sink: table %s: begin: %w", w.t.name, err))
		}
		w.inTx = true
	}
	var err error
	if w.s.cfg.mode == Upsert {
		err = w.upsert(ctx)
	} else {
		err = w.copy(ctx)
	}
	if err != nil {
		return w.fail(err)
	}
	clear(w.rows)
	clear(w.recs)
	w.rows, w.metas, w.recs = w.rows[:0], w.metas[:0], w.recs[:0]
	w.unsynced = w.durable != "" && !w.inTx
	return nil
}

// at is " (<position>)" of a record with RecordPosition, else "".
func (w *writer[T]) at(v T) string {
	if w.s.pos == nil {
		return ""
	}
	if p := w.s.pos(v); p != "" {
		return " (" + p + ")"
	}
	return ""
}

// fail marks the writer failed (its transaction, if any, is lost).
func (w *writer[T]) fail(err error) error {
	if w.s.cfg.guarantee == ExactlyOnce {
		w.err = err
	}
	return err
}

func (w *writer[T]) copy(ctx context.Context) error {
	src := &rowSource{rows: w.rows, i: -1}
	_, err := w.conn.CopyFrom(ctx, w.t.ident, w.t.columnNames(), src)
	if err == nil {
		return nil
	}
	if pg, ok := isDataError(err); ok {
		if line, ok := copyErrorLine(pg); ok && line <= len(w.rows) {
			return w.rowError(line-1, pg.ColumnName, pg.ConstraintName, pg.Code, err)
		}
		return fmt.Errorf("postgres sink: table %s: COPY of %d rows (records %d to %d of subtask %d) failed: %w", w.t.name, len(w.rows), w.metas[0].rec, w.metas[len(w.metas)-1].rec, w.sub, err)
	}
	if ctx.Err() == nil && src.i >= 0 && src.i < len(w.rows) && !w.conn.IsClosed() {
		// Not the server's: the encoder's (a value the column's type does
		// not take). The row is the last one handed out.
		if col, ok := w.badColumn(w.rows[src.i]); ok {
			return w.rowError(src.i, col, "", "", err)
		}
	}
	return fmt.Errorf("postgres sink: table %s: COPY: %w", w.t.name, err)
}

// badColumn finds the column whose value does not encode.
func (w *writer[T]) badColumn(vals []any) (string, bool) {
	m := w.conn.TypeMap()
	for i, v := range vals {
		if _, err := m.Encode(w.t.cols[i].oid, pgx.BinaryFormatCode, v, nil); err != nil {
			return w.t.cols[i].name, true
		}
	}
	return "", false
}

func (w *writer[T]) upsert(ctx context.Context) error {
	size := w.s.cfg.batchSize
	for start := 0; start < len(w.rows); start += size {
		end := min(start+size, len(w.rows))
		b := &pgx.Batch{}
		for _, r := range w.rows[start:end] {
			b.Queue(w.t.insert, r...)
		}
		br := w.conn.SendBatch(ctx, b)
		var err error
		at := -1
		for i := start; i < end; i++ {
			if _, err = br.Exec(); err != nil {
				at = i
				break
			}
		}
		cerr := br.Close()
		if err == nil {
			err = cerr
		}
		if err == nil {
			continue
		}
		if pg, ok := isDataError(err); ok && at >= 0 {
			return w.rowError(at, pg.ColumnName, pg.ConstraintName, pg.Code, err)
		}
		if ctx.Err() == nil && at >= 0 && !w.conn.IsClosed() {
			if col, ok := w.badColumn(w.rows[at]); ok {
				return w.rowError(at, col, "", "", err)
			}
		}
		return fmt.Errorf("postgres sink: table %s: upsert of %d rows (records %d to %d of subtask %d): %w", w.t.name, end-start, w.metas[start].rec, w.metas[end-1].rec, w.sub, err)
	}
	return nil
}

func (w *writer[T]) rowError(i int, col, constraint, code string, err error) error {
	m := w.metas[i]
	if col == "" && constraint == "" && !w.conn.IsClosed() {
		// The server parsed a value it does not take ("invalid input
		// syntax"): name the column whose value does not encode.
		col, _ = w.badColumn(w.rows[i])
	}
	var pos string
	if w.s.pos != nil && i < len(w.recs) {
		pos = w.s.pos(w.recs[i])
	}
	return &RowError{Table: w.t.name, Column: col, Constraint: constraint, Code: code, Subtask: w.sub,
		Record: m.rec, Position: pos, Timestamp: m.ts, HasTimestamp: m.hasTS, Values: renderRow(w.t.cols, w.rows[i]), Err: err}
}

// rowSource hands the buffered rows to CopyFrom and remembers the last one
// it handed out.
type rowSource struct {
	rows [][]any
	i    int
}

func (s *rowSource) Next() bool {
	if s.i+1 >= len(s.rows) {
		return false
	}
	s.i++
	return true
}
func (s *rowSource) Values() ([]any, error) { return s.rows[s.i], nil }
func (s *rowSource) Err() error             { return nil }

// PrepareCommit sends the buffered rows and prepares the open transaction
// as <prefix><subtask>-<checkpointID>. With no rows since the last
// checkpoint it prepares nothing.
func (w *writer[T]) PrepareCommit(ctx context.Context, checkpointID int64) ([]committable, error) {
	if err := w.Flush(ctx, false); err != nil {
		return nil, err
	}
	if !w.inTx {
		return nil, nil
	}
	var xid uint64
	if err := w.conn.QueryRow(ctx, "SELECT pg_current_xact_id()::text::numeric::int8").Scan(&xid); err != nil {
		return nil, w.fail(fmt.Errorf("postgres sink: table %s: transaction id: %w", w.t.name, err))
	}
	gid := w.prefix + strconv.Itoa(w.sub) + "-" + strconv.FormatInt(checkpointID, 10)
	now := time.Now()
	if _, err := w.conn.Exec(ctx, "PREPARE TRANSACTION '"+gid+"'"); err != nil {
		return nil, w.fail(fmt.Errorf("postgres sink: table %s: prepare transaction %s: %w", w.t.name, gid, err))
	}
	w.inTx = false
	w.s.prepared.add(w.sub, gid, now)
	return []committable{{GID: gid, XID: xid, Checkpoint: checkpointID, Prepared: now.UnixMilli()}}, nil
}

// NotifyCheckpointAborted keeps what was prepared: with tolerable
// checkpoint failures the runtime commits an aborted checkpoint's
// committables with the next completed checkpoint (design.md I6), so
// rolling them back here would lose their rows; without tolerance the job
// fails over and the new writers roll back everything no completed
// checkpoint names.
func (w *writer[T]) NotifyCheckpointAborted(context.Context, int64) error { return nil }

// Close rolls back an open transaction (not a prepared one: that is the
// committer's or recovery's) and closes the connection.
func (w *writer[T]) Close() error {
	if w.conn == nil || w.conn.IsClosed() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if w.inTx {
		_, _ = w.conn.Exec(ctx, "ROLLBACK")
	}
	return w.conn.Close(ctx)
}

// committer commits prepared transactions from a connection of its own.
type committer[T any] struct {
	s    *pgSink[T]
	log  *slog.Logger
	conn *pgx.Conn
}

// commitRetries is how often a commit that failed for a reason other than
// the transaction's state (the server restarting, a dropped connection)
// asks to be retried before it fails the job.
const commitRetries = 8

// Commit runs COMMIT PREPARED for each committable. A gid that is no
// longer prepared is judged by its transaction id: committed is a success
// (an earlier attempt committed it), rolled back fails the job with
// ErrRolledBack.
func (c *committer[T]) Commit(ctx context.Context, reqs []sink.CommitRequest[committable]) error {
	for _, r := range reqs {
		cm := r.Committable()
		if c.conn == nil || c.conn.IsClosed() {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			conn, err := c.s.connect(cctx, c.log)
			cancel()
			if err != nil {
				c.retryOrFail(ctx, r, err)
				continue
			}
			c.conn = conn
		}
		_, err := c.conn.Exec(ctx, "COMMIT PREPARED '"+cm.GID+"'")
		switch {
		case err == nil:
			c.s.prepared.done(cm.GID)
		case notPrepared(err):
			c.judge(ctx, r, cm)
		default:
			c.retryOrFail(ctx, r, fmt.Errorf("postgres sink: commit prepared %s: %w", cm.GID, err))
		}
	}
	return nil
}

func (c *committer[T]) retryOrFail(ctx context.Context, r sink.CommitRequest[committable], err error) {
	if c.conn != nil && !c.conn.IsClosed() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = c.conn.Close(cctx)
		cancel()
	}
	c.conn = nil
	if isAuthError(err) || ctx.Err() != nil || r.Retries() >= commitRetries {
		r.SignalFailedWithUnknownReason(err)
		return
	}
	c.log.Warn("postgres sink: commit failed; retrying later", "gid", r.Committable().GID, "err", err)
	r.RetryLater()
}

// judge settles a committable whose gid is not prepared (any more).
func (c *committer[T]) judge(ctx context.Context, r sink.CommitRequest[committable], cm committable) {
	var status *string
	err := c.conn.QueryRow(ctx, "SELECT pg_xact_status($1::text::xid8)", strconv.FormatUint(cm.XID, 10)).Scan(&status)
	switch {
	case err != nil:
		c.retryOrFail(ctx, r, fmt.Errorf("postgres sink: status of transaction %d (gid %s): %w", cm.XID, cm.GID, err))
	case status == nil:
		r.SignalFailedWithUnknownReason(fmt.Errorf("postgres sink: prepared transaction %s (checkpoint %d) is gone and the server no longer knows whether its transaction %d committed", cm.GID, cm.Checkpoint, cm.XID))
	case *status == "committed":
		c.s.prepared.done(cm.GID)
		r.SignalAlreadyCommitted()
	case *status == "aborted":
		c.s.prepared.done(cm.GID)
		r.SignalFailedWithUnknownReason(fmt.Errorf("%w: %s (checkpoint %d, transaction %d) was rolled back before its commit; its rows are lost", ErrRolledBack, cm.GID, cm.Checkpoint, cm.XID))
	default: // "in progress": prepared under another database?
		c.retryOrFail(ctx, r, fmt.Errorf("postgres sink: prepared transaction %s is not in this database, but its transaction %d is %s", cm.GID, cm.XID, *status))
	}
}

func (c *committer[T]) Close() error {
	if c.conn == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return c.conn.Close(ctx)
}

// tracker remembers when the sink's prepared transactions were prepared,
// until their commit, for MetricOldestPreparedAge.
type tracker struct {
	mu  sync.Mutex
	pre map[string]entryAt
}

type entryAt struct {
	sub int
	at  time.Time
}

func newTracker() *tracker { return &tracker{pre: map[string]entryAt{}} }

func (t *tracker) add(sub int, gid string, at time.Time) {
	t.mu.Lock()
	t.pre[gid] = entryAt{sub, at}
	t.mu.Unlock()
}

func (t *tracker) done(gid string) {
	t.mu.Lock()
	delete(t.pre, gid)
	t.mu.Unlock()
}

func (t *tracker) oldestAge(sub int, now time.Time) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	var age int64
	for _, e := range t.pre {
		if e.sub == sub {
			age = max(age, now.Sub(e.at).Milliseconds())
		}
	}
	return age
}
