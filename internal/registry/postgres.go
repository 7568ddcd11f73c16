package registry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/sluice-io/sluice/connectors/postgres"
	"github.com/sluice-io/sluice/internal/format"
	"github.com/sluice-io/sluice/stream"
)

// The PostgreSQL sink's options (connectors/postgres). Their defaults are
// the library's.
var postgresSinkOptions = []Option{
	{Name: "url", Type: String, Required: true, Secret: true,
		Description: "the server and database: a URL (postgres://user:password@host:5432/db?sslmode=verify-full) or a libpq keyword/value string; it may hold a password, so it is never shown: use ${VAR}"},
	{Name: "password", Type: String, Default: "", Secret: true,
		Description: "password, overriding the url's (and PGPASSWORD, ~/.pgpass); never shown; use ${VAR}, or password-file; empty = the url's"},
	{Name: "password-file", Type: String, Default: "",
		Description: "file holding the password (one trailing newline is dropped), read when the job starts; instead of password"},
	{Name: "table", Type: String, Required: true,
		Description: "the table to write, as PostgreSQL parses a name: orders, sales.orders, \"Mixed Case\"; it must exist"},
	{Name: "columns", Type: Strings, Default: []string{}, Check: checkColumnNames,
		Description: "the columns written; empty = every column of the table that can be written (not generated, not GENERATED ALWAYS AS IDENTITY), in table order; set it to leave out a column whose default should apply (a serial id). A record's field missing from it is written as NULL, a field that is not one of them fails the job naming it"},
	{Name: "mode", Type: Enum, Values: []string{"append", "upsert"}, Default: "append",
		Description: "append: COPY every record as a new row; upsert: INSERT … ON CONFLICT (key) DO UPDATE SET the other columns, so a record written again leaves the same table (at-least-once delivery gives exactly-once results)"},
	{Name: "key", Type: Strings, Default: []string{}, Check: checkColumnNames,
		Description: "upsert only: the conflict columns, exactly those of the primary key or of a unique index, all among columns; empty = the table's primary key"},
	{Name: "batch-size", Type: Int, Default: int64(1000), Check: Between(1, 1_000_000),
		Description: "rows buffered before they are sent (one COPY or one pipelined batch of upserts); every buffered row is sent at each checkpoint; exactly-once upsert sends a checkpoint interval's rows only at the checkpoint"},
	{Name: "transaction-prefix", Type: String, Default: "", Check: checkTransactionPrefix,
		Description: "exactly-once: prefix of the prepared transactions' gids <prefix><subtask>-<checkpoint> (ASCII letters, digits, _ . -, at most 120 bytes); empty = sluice-<job id>-<sink uid>-, unique per job and stable across restores; a prefix set here must be unique among the jobs writing to the server (each one rolls back the others' prepared transactions)"},
	{Name: "setup-timeout", Type: Duration, Default: 60 * time.Second, Check: Positive,
		Description: "bounds a writer's start: connecting (retried while the server refuses connections; a wrong password is not retried), the table check, the recovery of prepared transactions"},
}

func init() {
	MustRegisterSink(Sink{
		Name: "postgres",
		Description: "Writes each record's fields as a row into a PostgreSQL table, appended (COPY) or upserted (INSERT … ON CONFLICT); " +
			"exactly-once with a prepared transaction per checkpoint per subtask (the server needs max_prepared_transactions ≥ the parallelism), " +
			"or at-least-once (connectors/postgres).",
		ExactlyOnce:   true,
		Options:       postgresSinkOptions,
		Validate:      validatePostgresSink,
		CheckDelivery: postgresCheckDelivery,
		Step: func(name string, _ Options) (func(Record) (Record, error), bool, error) {
			return postgresStep(name), true, nil
		},
		Build: buildPostgresSink,
	})
}

func buildPostgresSink(c BuildContext, in stream.DataStream[Record]) error {
	opts, err := postgresSinkOpts(c)
	if err != nil {
		return err
	}
	step := postgresStep(c.Name)
	fields := func(r Record) (map[string]any, error) {
		if !c.StepApplied || !r.Decoded() {
			var err error
			if r, err = step(r); err != nil {
				return nil, unrecoverable{err} // the same record fails after a restart
			}
		}
		m, _ := r.Object()
		return m, nil
	}
	s, err := postgres.NewFieldsSink(c.Options.String("url"), c.Options.String("table"), fields, opts...)
	if err != nil {
		return err
	}
	stream.SinkTo(in, s, c.Name, stream.UID(c.UID))
	return nil
}

// postgresSinkOpts are the library options of the sink's options and the
// pipeline's delivery.
func postgresSinkOpts(c BuildContext) ([]postgres.SinkOption, error) {
	o := c.Options
	g := postgres.AtLeastOnce
	if c.Delivery == ExactlyOnce {
		g = postgres.ExactlyOnce
	}
	mode := postgres.Append
	if o.String("mode") == "upsert" {
		mode = postgres.Upsert
	}
	opts := []postgres.SinkOption{postgres.DeliveryGuarantee(g), postgres.WriteMode(mode),
		postgres.BatchSize(int(o.Int("batch-size"))), postgres.SetupTimeout(o.Duration("setup-timeout")),
		postgres.Logger(c.Logger), postgres.RecordPosition(describePosition)}
	if cols := o.Strings("columns"); len(cols) > 0 {
		opts = append(opts, postgres.Columns(cols...))
	}
	if key := o.Strings("key"); len(key) > 0 {
		opts = append(opts, postgres.Key(key...))
	}
	if p := o.String("transaction-prefix"); p != "" {
		opts = append(opts, postgres.TransactionPrefix(p))
	}
	pw, set, err := postgresPassword(o)
	if err != nil {
		return nil, err
	}
	if set {
		opts = append(opts, postgres.Password(pw))
	}
	return opts, nil
}

// describePosition names where the source read r (`topic "t" partition 1
// offset 42`, `file in/a.jsonl line 3 (offset 40)`), "" if it did not say.
func describePosition(r Record) string {
	p := r.Pos().Resolve()
	if p == nil {
		return ""
	}
	return p.Describe(p.Line())
}

// postgresStep decodes a record's value and checks that it is an object,
// whose fields are the row's columns. The pipeline runs it before the sink
// under its on-error policy.
func postgresStep(sink string) func(Record) (Record, error) {
	return func(r Record) (Record, error) {
		r, err := r.Decode(context.Background())
		if err != nil {
			return r, fmt.Errorf("postgres sink %s: decode the value: %w", sink, err)
		}
		if _, ok := r.Object(); !ok {
			at := ""
			if p := describePosition(r); p != "" {
				at = " at " + p
			}
			return r, fmt.Errorf("postgres sink %s: the record%s is a %s, not an object: a row's columns are an object's fields", sink, at, format.KindOf(r.Value()))
		}
		return r, nil
	}
}

// postgresPassword returns password, or the content of password-file
// without one trailing newline; set is false when neither is set.
func postgresPassword(o Options) (pw string, set bool, err error) {
	f := o.String("password-file")
	if f == "" {
		pw = o.String("password")
		return pw, pw != "", nil
	}
	b, err := os.ReadFile(f)
	if err != nil {
		return "", false, fmt.Errorf("password-file: %w", err)
	}
	pw = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if pw == "" {
		return "", false, fmt.Errorf("password-file %s is empty", f)
	}
	return pw, true, nil
}

// validatePostgresSink checks rules across options, each reported at an
// option's line.
func validatePostgresSink(o Options) error {
	if _, err := pgx.ParseConfig(o.String("url")); err != nil {
		// pgx's error repeats the string (its password redacted only on a
		// best-effort basis): say what is wrong without it.
		return &OptionError{Option: "url", Err: errors.New("not a PostgreSQL URL (postgres://user@host:5432/db) or keyword/value connection string (host=… dbname=…) that pgx parses (value not shown)")}
	}
	if o.String("password") != "" && o.String("password-file") != "" {
		return &OptionError{Option: "password-file", Err: errors.New("password is set too; set one of them")}
	}
	if len(o.Strings("key")) > 0 && o.String("mode") != "upsert" {
		return &OptionError{Option: "key", Err: errors.New("only with mode: upsert (append has no conflict columns)")}
	}
	if cols := o.Strings("columns"); len(cols) > 0 {
		for _, k := range o.Strings("key") {
			if !slices.Contains(cols, k) {
				return &OptionError{Option: "key", Err: fmt.Errorf("key column %q is not among columns", k)}
			}
		}
	}
	return nil
}

// postgresCheckDelivery refuses options that do nothing with the
// pipeline's delivery.
func postgresCheckDelivery(d Delivery, o Options) error {
	if d != ExactlyOnce && o.String("transaction-prefix") != "" {
		return &OptionError{Option: "transaction-prefix", Err: fmt.Errorf("only with delivery: exactly-once (the pipeline's delivery is %s: nothing is prepared)", d)}
	}
	return nil
}

func checkColumnNames(v any) error {
	names, _ := v.([]string)
	seen := map[string]bool{}
	for i, n := range names {
		switch {
		case n == "":
			return fmt.Errorf("item %d: empty column name", i+1)
		case seen[n]:
			return fmt.Errorf("column %q given twice", n)
		}
		seen[n] = true
	}
	return nil
}

func checkTransactionPrefix(v any) error {
	p, _ := v.(string)
	if len(p) > 120 {
		return fmt.Errorf("%d bytes; at most 120 (a gid has at most 200)", len(p))
	}
	for _, r := range p {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("character %q not allowed: only ASCII letters, digits, '_', '.' and '-'", r)
		}
	}
	return nil
}
