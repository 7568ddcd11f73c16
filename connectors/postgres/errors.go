package postgres

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/sluice-io/sluice/restart"
)

var (
	// ErrPreparedTransactionsDisabled is wrapped by the error of an
	// exactly-once sink on a server whose max_prepared_transactions is 0.
	ErrPreparedTransactionsDisabled = errors.New("postgres: max_prepared_transactions is 0")
	// ErrRolledBack is wrapped by the commit error of a prepared
	// transaction that is gone and was rolled back, not committed: its
	// rows are lost.
	ErrRolledBack = errors.New("postgres: prepared transaction was rolled back")
	// ErrRowRejected is wrapped by a [RowError].
	ErrRowRejected = errors.New("postgres: row rejected")
)

// RowError is the error of a row the table rejected: a constraint, a
// type, a value the sink cannot encode. The job fails with it (a rejected
// row is never dropped).
type RowError struct {
	// Table is the target table (schema.name).
	Table string
	// Column is the column, when PostgreSQL or the encoder names one.
	Column string
	// Constraint is the violated constraint, when there is one.
	Constraint string
	// Code is the SQLSTATE ("" for an encoding error).
	Code string
	// Subtask is the writer's subtask.
	Subtask int
	// Record is the record's position: the number of records the writer
	// got before it in this attempt (0-based).
	Record int64
	// Position is where the job read the record (RecordPosition), ""
	// when not known.
	Position string
	// Timestamp is the record's event time in ms since the epoch, when
	// it has one (HasTimestamp).
	Timestamp    int64
	HasTimestamp bool
	// Values is the row as written, abbreviated.
	Values string
	// Err is PostgreSQL's error (a *pgconn.PgError) or the encoder's.
	Err error
}

func (e *RowError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "postgres sink: table %s rejected record %d of subtask %d", e.Table, e.Record, e.Subtask)
	if e.Position != "" {
		fmt.Fprintf(&b, " (%s)", e.Position)
	}
	if e.HasTimestamp {
		fmt.Fprintf(&b, " (event time %s)", time.UnixMilli(e.Timestamp).UTC().Format(time.RFC3339Nano))
	}
	if e.Column != "" {
		fmt.Fprintf(&b, ", column %q", e.Column)
	}
	if e.Constraint != "" {
		fmt.Fprintf(&b, ", constraint %q", e.Constraint)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	var pg *pgconn.PgError
	if errors.As(e.Err, &pg) && pg.Detail != "" {
		fmt.Fprintf(&b, " (%s)", pg.Detail)
	}
	fmt.Fprintf(&b, "; row %s", e.Values)
	return b.String()
}

// Unwrap returns ErrRowRejected and the cause.
func (e *RowError) Unwrap() []error { return []error{ErrRowRejected, e.Err} }

// Is reports a RowError as restart.ErrUnrecoverable: restored from its
// checkpoint, the job would meet the same row again.
func (e *RowError) Is(target error) bool { return target == restart.ErrUnrecoverable }

// unrecoverable is an error that reports itself as
// restart.ErrUnrecoverable without changing its message: a setting or a
// schema a restart cannot change (a wrong password, a missing table or
// column, max_prepared_transactions).
type unrecoverable struct{ error }

func (u unrecoverable) Unwrap() error        { return u.error }
func (u unrecoverable) Is(target error) bool { return target == restart.ErrUnrecoverable }

// markUnrecoverable marks err as restart.ErrUnrecoverable when it is one
// a restart cannot fix.
func markUnrecoverable(err error) error {
	if err == nil || errors.Is(err, restart.ErrUnrecoverable) {
		return err
	}
	if isAuthError(err) || errors.Is(err, ErrTableNotFound) || errors.Is(err, ErrColumnNotFound) || errors.Is(err, ErrRowRejected) ||
		errors.Is(err, ErrPreparedTransactionsDisabled) || errors.Is(err, ErrInvalidConfig) {
		return unrecoverable{err}
	}
	return err
}

// renderRow renders values for an error message, at most about 300 bytes.
func renderRow(cols []column, values []any) string {
	var b strings.Builder
	b.WriteByte('(')
	for i, v := range values {
		if i > 0 {
			b.WriteString(", ")
		}
		if i < len(cols) {
			b.WriteString(cols[i].name)
			b.WriteByte('=')
		}
		s := fmt.Sprintf("%#v", v)
		if len(s) > 60 {
			s = s[:57] + "..."
		}
		b.WriteString(s)
		if b.Len() > 300 {
			b.WriteString(", ...")
			break
		}
	}
	b.WriteByte(')')
	return b.String()
}

var copyLine = regexp.MustCompile(`COPY [^,]*, line (\d+)`)

// copyErrorLine returns the 1-based line of a COPY error's context.
func copyErrorLine(pg *pgconn.PgError) (int, bool) {
	m := copyLine.FindStringSubmatch(pg.Where)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(m[1])
	return n, err == nil && n > 0
}

// isDataError reports whether a server error is about the data of a row
// (class 22 data exception, class 23 integrity constraint violation)
// rather than the connection or the server.
func isDataError(err error) (*pgconn.PgError, bool) {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) {
		return nil, false
	}
	return pg, strings.HasPrefix(pg.Code, "22") || strings.HasPrefix(pg.Code, "23")
}

// isAuthError reports a failed authentication (SQLSTATE class 28): no
// point in retrying the connection.
func isAuthError(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && (strings.HasPrefix(pg.Code, "28") || pg.Code == "3D000")
}

// notPrepared reports "prepared transaction with identifier … does not
// exist" (SQLSTATE 42704).
func notPrepared(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "42704"
}
