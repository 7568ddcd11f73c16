package postgres

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectortest/fakes"
	"github.com/sluice-io/sluice/sink"
)

// wantErr fails unless err is non-nil and its message holds every part.
func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one naming %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q does not name %q", err, p)
		}
	}
	t.Logf("the error: %v", err)
}

func TestWrongPassword(t *testing.T) {
	u, err := url.Parse(needServer(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "wrong-password")
	table := newTable(t, "pw", "k bigint, v text")
	s, err := newRowSink(u.String(), table, func(r [2]any) ([]any, error) { return r[:], nil }, []SinkOption{Columns("k", "v")})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = s.newWriter(t.Context(), &fakes.InitContext{})
	wantErr(t, err, "password authentication failed", "sluice")
	if strings.Contains(err.Error(), "wrong-password") {
		t.Errorf("the error shows the password: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("a wrong password took %v to fail: it must not be retried until SetupTimeout", d)
	}
}

func TestMissingTable(t *testing.T) {
	s := kvSink(t, "no_such_table")
	_, err := s.newWriter(t.Context(), &fakes.InitContext{})
	if !errors.Is(err, ErrTableNotFound) {
		t.Errorf("error %v does not wrap ErrTableNotFound", err)
	}
	wantErr(t, err, `"no_such_table"`, "does not exist")
}

func TestMissingColumn(t *testing.T) {
	table := newTable(t, "nocol", "k bigint, value text")
	s := kvSink(t, table) // columns k, v
	_, err := s.newWriter(t.Context(), &fakes.InitContext{})
	if !errors.Is(err, ErrColumnNotFound) {
		t.Errorf("error %v does not wrap ErrColumnNotFound", err)
	}
	wantErr(t, err, table, `no column "v"`, "value text")

	// A map record with a field that is not a column.
	ms, err := NewMapSink(needServer(t), table, DeliveryGuarantee(AtLeastOnce))
	if err != nil {
		t.Fatal(err)
	}
	w, err := ms.CreateWriter(t.Context(), &fakes.InitContext{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	err = w.Write(t.Context(), map[string]any{"k": int64(1), "vlaue": "typo"}, sink.Meta{})
	wantErr(t, err, table, `field "vlaue"`, "record 0")
}

func TestUpsertNeedsUniqueKey(t *testing.T) {
	table := newTable(t, "nokey", "k bigint, v text")
	s := kvSink(t, table, WriteMode(Upsert))
	_, err := s.newWriter(t.Context(), &fakes.InitContext{})
	wantErr(t, err, table, "no primary key", "Key")
	s = kvSink(t, table, WriteMode(Upsert), Key("v"))
	_, err = s.newWriter(t.Context(), &fakes.InitContext{})
	wantErr(t, err, table, "unique index", `"v"`)
}

// TestRejectedRows: rows the table rejects fail the writer with a
// RowError naming the table, the column or constraint, the record's
// position and its values, in every mode.
func TestRejectedRows(t *testing.T) {
	for _, mode := range []struct {
		name string
		opts []SinkOption
	}{
		{"exactly-once-append", nil},
		{"exactly-once-upsert", []SinkOption{WriteMode(Upsert)}},
		{"at-least-once-append", []SinkOption{DeliveryGuarantee(AtLeastOnce)}},
		{"at-least-once-upsert", []SinkOption{DeliveryGuarantee(AtLeastOnce), WriteMode(Upsert)}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			for _, c := range []struct {
				name  string
				row   [2]any
				parts []string
				check func(*RowError) bool
			}{
				{"check-constraint", [2]any{int64(-5), "neg"}, []string{`constraint "positive_k"`, "record 3", "k=-5"},
					func(e *RowError) bool { return e.Constraint == "positive_k" && e.Code == "23514" }},
				{"not-null", [2]any{int64(9), nil}, []string{`column "v"`, "record 3", "null value"},
					func(e *RowError) bool { return e.Column == "v" && e.Code == "23502" }},
				{"type", [2]any{"not a number", "x"}, []string{`column "k"`, "record 3", `"not a number"`},
					func(e *RowError) bool { return e.Column == "k" }},
			} {
				t.Run(c.name, func(t *testing.T) {
					table := newTable(t, "reject", "k bigint CONSTRAINT positive_k CHECK (k > 0) PRIMARY KEY, v text NOT NULL")
					s := kvSink(t, table, mode.opts...)
					w, err := s.newWriter(t.Context(), &fakes.InitContext{ID: "rejecttest000001"})
					if err != nil {
						t.Fatal(err)
					}
					defer w.Close()
					rows := [][2]any{{int64(1), "a"}, {int64(2), "b"}, {int64(3), "c"}, c.row, {int64(4), "d"}}
					for _, r := range rows {
						if err = w.Write(t.Context(), r, sink.Meta{Timestamp: 1_700_000_000_000, HasTimestamp: true}); err != nil {
							break
						}
					}
					if err == nil {
						err = w.Flush(t.Context(), true)
					}
					var re *RowError
					if !errors.As(err, &re) || !errors.Is(err, ErrRowRejected) {
						t.Fatalf("error %v is not a RowError", err)
					}
					wantErr(t, err, append([]string{"table public." + table, "subtask 0", "event time 2023-11-14"}, c.parts...)...)
					if !c.check(re) || re.Record != 3 {
						t.Errorf("RowError %+v", re)
					}
				})
			}
		})
	}
}

// TestPreparedTransactionsDisabled starts a second server with
// max_prepared_transactions = 0: an exactly-once writer fails at start
// with an error naming the setting; an at-least-once one works.
func TestPreparedTransactionsDisabled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server of its own: skipped with -short")
	}
	own := startOwnServer(t, "SLUICE_POSTGRES_MAX_PREPARED=0")
	mustExecURL(t, own.url, "CREATE TABLE t (k bigint, v text)")
	s, err := newRowSink(own.url, "t", func(r [2]any) ([]any, error) { return r[:], nil }, []SinkOption{Columns("k", "v")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.newWriter(t.Context(), &fakes.InitContext{Parallel: 3})
	if !errors.Is(err, ErrPreparedTransactionsDisabled) {
		t.Errorf("error %v does not wrap ErrPreparedTransactionsDisabled", err)
	}
	wantErr(t, err, "max_prepared_transactions is 0", "at least the sink's parallelism (3)", "AtLeastOnce")

	s, err = newRowSink(own.url, "t", func(r [2]any) ([]any, error) { return r[:], nil }, []SinkOption{Columns("k", "v"), DeliveryGuarantee(AtLeastOnce)})
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.newWriter(t.Context(), &fakes.InitContext{})
	if err != nil {
		t.Fatalf("at-least-once on that server: %v", err)
	}
	defer w.Close()
	if err := w.Write(t.Context(), [2]any{int64(1), "a"}, sink.Meta{}); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(t.Context(), true); err != nil {
		t.Fatal(err)
	}
}

func TestInvalidConfig(t *testing.T) {
	row := func(r [2]any) ([]any, error) { return r[:], nil }
	for _, c := range []struct {
		name string
		err  func() error
		part string
	}{
		{"no columns", func() error { _, err := NewSink("postgres://127.0.0.1/x", "t", row); return err }, "Columns: required"},
		{"nil mapper", func() error { _, err := NewSink[int]("postgres://127.0.0.1/x", "t", nil, Columns("a")); return err }, "row mapper is nil"},
		{"batch size", func() error {
			_, err := NewSink("postgres://127.0.0.1/x", "t", row, Columns("a"), BatchSize(0))
			return err
		}, "BatchSize"},
		{"key without upsert", func() error {
			_, err := NewSink("postgres://127.0.0.1/x", "t", row, Columns("a"), Key("a"))
			return err
		}, "Key is only for"},
		{"prefix", func() error {
			_, err := NewSink("postgres://127.0.0.1/x", "t", row, Columns("a"), TransactionPrefix("a'b"))
			return err
		}, "TransactionPrefix"},
		{"url", func() error { _, err := NewMapSink("postgres://[::1", "t"); return err }, "connection string"},
		{"duplicate column", func() error { _, err := NewMapSink("postgres://127.0.0.1/x", "t", Columns("a", "a")); return err }, `column "a" twice`},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.err()
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %v does not wrap ErrInvalidConfig", err)
			}
			wantErr(t, err, c.part)
		})
	}
}

// TestTooFewPreparedTransactions: a parallelism above the server's
// max_prepared_transactions (20 on the test server) fails at start,
// naming the setting, instead of at the first checkpoint.
func TestTooFewPreparedTransactions(t *testing.T) {
	table := newTable(t, "fewprep", "k bigint, v text")
	s := kvSink(t, table)
	_, err := s.newWriter(t.Context(), &fakes.InitContext{Parallel: 21})
	wantErr(t, err, "max_prepared_transactions is 20", "parallelism 21")
}
