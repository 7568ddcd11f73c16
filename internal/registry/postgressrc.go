package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sluice-io/sluice/connectors/postgres"
	"github.com/sluice-io/sluice/internal/format"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// The PostgreSQL source (connectors/postgres): a table read once in
// chunks by key (mode: snapshot, bounded), or read and then followed
// through logical replication (mode: cdc, unbounded). Its defaults are the
// library's.

// postgresSourceOptions are the source's options; url, password and
// password-file are the sink's.
var postgresSourceOptions = append(append([]Option{}, postgresSinkOptions[:3]...),
	Option{Name: "table", Type: String, Required: true,
		Description: "the table to read, as PostgreSQL parses a name: orders, sales.orders, \"Mixed Case\"; it must exist"},
	Option{Name: "mode", Type: Enum, Values: []string{"snapshot", "cdc"}, Default: "snapshot",
		Description: "snapshot: read the table once, in chunks of chunk-size rows by key (read in parallel), and end (bounded); a restore resumes each chunk after its last key read. cdc: read the table the same way and then stream its inserts, updates and deletes from a logical replication slot (pgoutput), unbounded; the server needs wal_level = logical, the job checkpoints, and the slot confirms only what a completed checkpoint holds"},
	Option{Name: "key", Type: Strings, Default: []string{}, Check: checkColumnNames,
		Description: "the columns the table is ordered and chunked by, together unique and each NOT NULL: any types PostgreSQL orders (integers, text with its collation, uuid, numeric, timestamps); empty = the table's primary key. cdc: every change must carry them (the primary key, the replica identity's columns, or REPLICA IDENTITY FULL)"},
	Option{Name: "chunk-size", Type: Int, Default: int64(8192), Check: Between(1, 1<<30),
		Description: "rows per chunk of the snapshot (one split each)"},
	Option{Name: "fetch-size", Type: Int, Default: int64(8192), Check: Between(1, 1_000_000),
		Description: "rows one query reads (a page of a chunk; cdc: also the most changes one read of the stream takes)"},
	Option{Name: "slot", Type: String, Default: "", Check: checkSlotName,
		Description: "cdc: the logical replication slot (lower-case letters, digits, _); empty = sluice_<table> (the table name in lower case, other characters as _). One job per slot"},
	Option{Name: "publication", Type: String, Default: "", Check: checkSlotName,
		Description: "cdc: the publication, which must publish the table; empty = sluice_<table>, as slot"},
	Option{Name: "create-slot", Type: Bool, Default: false,
		Description: "cdc: create the slot (pgoutput) when it does not exist; false = a missing slot ends the job at once naming it (create it with SELECT pg_create_logical_replication_slot('<slot>', 'pgoutput'))"},
	Option{Name: "create-publication", Type: Bool, Default: false,
		Description: "cdc: create the publication (FOR TABLE the table) when it does not exist (needs the CREATE privilege on the database and ownership of the table); false = a missing publication ends the job at once naming it"},
	Option{Name: "skip-snapshot", Type: Bool, Default: false,
		Description: "cdc: stream the changes from the slot's position without reading the table first"},
	Option{Name: "envelope", Type: Enum, Values: []string{"plain", "debezium"}, Default: "plain",
		Description: "the record value: plain = {\"op\", \"table\", \"key\", \"before\", \"after\", \"lsn\", \"commit_time\", \"xid\"}; debezium = Debezium's JSON envelope {\"before\", \"after\", \"op\", \"source\", \"ts_ms\"}. op is r (snapshot row), c, u or d"},
	Option{Name: "server-name", Type: String, Default: "",
		Description: "envelope: debezium: the source block's name (Debezium's topic prefix); empty = the slot's name"},
	Option{Name: "status-interval", Type: Duration, Default: 10 * time.Second, Check: Positive,
		Description: "cdc: the longest time between two standby status updates to the server (they confirm the LSN of the last completed checkpoint); below the server's wal_sender_timeout"},
	Option{Name: "chunk-wait-warning", Type: Duration, Default: time.Minute, Check: Positive,
		Description: "cdc: how long the stream waits for the snapshot's chunks without another one arriving before it logs a warning naming the chunks still missing (again after each further wait); a chunk arrives once it was read to its end and a checkpoint holding that completed"},
	Option{Name: "setup-timeout", Type: Duration, Default: 60 * time.Second, Check: Positive,
		Description: "bounds the setup: connecting, the checks, creating the slot and the publication, computing the chunks"},
)

func init() {
	MustRegisterSource(Source{
		Name: "postgres",
		Description: "Reads a PostgreSQL table in chunks by key, in parallel (mode: snapshot, bounded), or reads it and then streams its changes " +
			"through logical replication, exactly once across restores (mode: cdc); each record is a change as JSON (plain or Debezium's envelope), " +
			"keyed by the row's key (connectors/postgres).",
		Options:  postgresSourceOptions,
		Validate: validatePostgresSource,
		Build:    buildPostgresSource,
	})
}

// cdcOnlyOptions are the options that do something only in mode: cdc.
var cdcOnlyOptions = []string{"slot", "publication", "create-slot", "create-publication", "skip-snapshot", "status-interval", "chunk-wait-warning"}

func validatePostgresSource(o Options) error {
	if _, err := pgx.ParseConfig(o.String("url")); err != nil {
		return &OptionError{Option: "url", Err: errors.New("not a PostgreSQL URL (postgres://user@host:5432/db) or keyword/value connection string (host=… dbname=…) that pgx parses (value not shown)")}
	}
	if o.String("password") != "" && o.String("password-file") != "" {
		return &OptionError{Option: "password-file", Err: errors.New("password is set too; set one of them")}
	}
	if o.String("mode") != "cdc" {
		for _, n := range cdcOnlyOptions {
			if setOtherThanDefault(o, n) {
				return &OptionError{Option: n, Err: fmt.Errorf("only with mode: cdc (the mode is %s)", o.String("mode"))}
			}
		}
	}
	if o.String("server-name") != "" && o.String("envelope") != "debezium" {
		return &OptionError{Option: "server-name", Err: errors.New("only with envelope: debezium")}
	}
	return nil
}

// setOtherThanDefault reports whether option n of the source is set to
// another value than its default. A cdc-only option set to its default
// is let through in snapshot mode: it changes nothing, and one pipeline
// file serves both modes with create-slot: ${CREATE_SLOT:-false}.
func setOtherThanDefault(o Options, n string) bool {
	if !o.IsSet(n) {
		return false
	}
	for _, opt := range postgresSourceOptions {
		if opt.Name == n {
			return !reflect.DeepEqual(o.m[n], opt.Default)
		}
	}
	return true
}

func checkSlotName(v any) error {
	s, _ := v.(string)
	if len(s) > 63 {
		return fmt.Errorf("%d characters; at most 63", len(s))
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_') {
			return fmt.Errorf("character %q not allowed: only lower-case letters, digits and '_'", r)
		}
	}
	return nil
}

func buildPostgresSource(c BuildContext) (stream.DataStream[Record], error) {
	o := c.Options
	cdc := o.String("mode") == "cdc"
	opts := []postgres.SourceOption{postgres.ChunkSize(int(o.Int("chunk-size"))), postgres.FetchSize(int(o.Int("fetch-size"))),
		postgres.SourceSetupTimeout(o.Duration("setup-timeout")), postgres.SourceLogger(c.Logger)}
	if k := o.Strings("key"); len(k) > 0 {
		opts = append(opts, postgres.KeyColumns(k...))
	}
	pw, set, err := postgresPassword(o)
	if err != nil {
		return stream.DataStream[Record]{}, err
	}
	if set {
		opts = append(opts, postgres.SourcePassword(pw))
	}
	if cdc {
		opts = append(opts, postgres.CreateSlot(o.Bool("create-slot")), postgres.CreatePublication(o.Bool("create-publication")),
			postgres.StatusInterval(o.Duration("status-interval")), postgres.ChunkWaitWarning(o.Duration("chunk-wait-warning")))
		if s := o.String("slot"); s != "" {
			opts = append(opts, postgres.Slot(s))
		}
		if p := o.String("publication"); p != "" {
			opts = append(opts, postgres.Publication(p))
		}
		if o.Bool("skip-snapshot") {
			opts = append(opts, postgres.SkipSnapshot())
		}
	}
	url, table := o.String("url"), o.String("table")
	var src source.Source[postgres.Change, postgres.Split, postgres.EnumState]
	if cdc {
		src, err = postgres.NewCDCSource(url, table, opts...)
	} else {
		src, err = postgres.NewSnapshotSource(url, table, opts...)
	}
	if err != nil {
		return stream.DataStream[Record]{}, err
	}
	debezium := o.String("envelope") == "debezium"
	name := o.String("server-name")
	if name == "" {
		name = o.String("slot")
	}
	if name == "" {
		name = postgres.DefaultSlotName(table)
	}
	jc, err := format.Builtin().New("json", format.Config{})
	if err != nil {
		return stream.DataStream[Record]{}, err
	}
	codecs := &Codecs{Value: jc}
	decode := c.DecodeValues
	changes := stream.FromSource(c.Env, src, watermark.None[postgres.Change](), c.Name, stream.UID(c.UID))
	return stream.TryMap(changes, func(ch postgres.Change) (Record, error) {
		key, err := json.Marshal(ch.Key)
		if err != nil {
			return Record{}, unrecoverable{fmt.Errorf("postgres source: table %s: the key %v: %w", ch.Table, ch.Key, err)}
		}
		var r Record
		if debezium {
			b, err := ch.Debezium(name)
			if err != nil {
				return Record{}, unrecoverable{fmt.Errorf("postgres source: table %s key %s: the Debezium envelope: %w", ch.Table, key, err)}
			}
			r = RawRecord(b, codecs)
			if decode {
				if r, err = r.Decode(context.Background()); err != nil {
					return r, unrecoverable{fmt.Errorf("postgres source: table %s key %s: %w", ch.Table, key, err)}
				}
			}
		} else {
			r = NewRecord(PostgresChangeValue(ch))
		}
		r = r.WithKey(key)
		if !ch.CommitTime.IsZero() {
			r = r.WithTimestamp(ch.CommitTime)
		}
		return r, nil
	}, stream.Name(c.Name+"-records")), nil
}

// PostgresChangeValue is the value of a change record of the postgres
// source with envelope: plain: {"op": "r|c|u|d", "table": "schema.name",
// "key": the key (a list for a composite key), "before": row|null,
// "after": row|null, "lsn": the commit LSN as a number (0 for snapshot
// rows), "commit_time": time|null, "xid": the transaction id (0 for
// snapshot rows)}.
func PostgresChangeValue(ch postgres.Change) map[string]any {
	var commit any
	if !ch.CommitTime.IsZero() {
		commit = ch.CommitTime
	}
	return map[string]any{
		"op":          ch.Op.String(),
		"table":       ch.Table,
		"key":         ch.Key,
		"before":      rowOrNil(ch.Before),
		"after":       rowOrNil(ch.After),
		"lsn":         int64(ch.LSN),
		"commit_time": commit,
		"xid":         int64(ch.Xid),
	}
}

func rowOrNil(m map[string]any) any {
	if m == nil {
		return nil
	}
	return m
}
