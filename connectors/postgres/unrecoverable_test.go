package postgres

import (
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/sluice-io/sluice/restart"
)

// TestUnrecoverableErrors: errors a restart cannot fix (a wrong password,
// a missing table or column, a rejected row, a configuration the server
// refuses) are restart.ErrUnrecoverable, so the job fails at once instead
// of restarting into the same error; a dropped connection is not.
func TestUnrecoverableErrors(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("connect: %w", &pgconn.PgError{Code: "28P01"}),
		fmt.Errorf("x: %w", ErrTableNotFound),
		fmt.Errorf("x: %w", ErrColumnNotFound),
		fmt.Errorf("x: %w", ErrPreparedTransactionsDisabled),
		fmt.Errorf("x: %w", ErrInvalidConfig),
	} {
		m := markUnrecoverable(err)
		if !errors.Is(m, restart.ErrUnrecoverable) || m.Error() != err.Error() || !errors.Is(m, errors.Unwrap(err)) {
			t.Errorf("markUnrecoverable(%v) = %v: want it unrecoverable, same message, same chain", err, m)
		}
	}
	if err := (&RowError{Err: errors.New("x")}); !errors.Is(err, restart.ErrUnrecoverable) || !errors.Is(err, ErrRowRejected) {
		t.Errorf("a RowError is not unrecoverable")
	}
	conn := fmt.Errorf("connect: %w", &pgconn.PgError{Code: "57P01"})
	if errors.Is(markUnrecoverable(conn), restart.ErrUnrecoverable) {
		t.Errorf("a terminated connection is marked unrecoverable")
	}
}
