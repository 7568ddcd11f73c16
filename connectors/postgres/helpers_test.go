package postgres

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"
)

// urlEnv names the server scripts/postgres.sh started.
const urlEnv = "SLUICE_POSTGRES_URL"

// testURL is a database of this test process on that server (created in
// TestMain, dropped at the end), "" without a server.
var testURL string

func TestMain(m *testing.M) {
	code := func() int {
		if u := os.Getenv(urlEnv); u != "" && os.Getenv(childEnv) == "" {
			drop, err := setupDatabase(u)
			if err != nil {
				fmt.Fprintln(os.Stderr, "postgres tests:", err)
				return 1
			}
			defer drop()
		}
		code := m.Run()
		if code == 0 {
			if err := goleak.Find(); err != nil {
				fmt.Fprintln(os.Stderr, "goleak:", err)
				return 1
			}
		}
		return code
	}()
	os.Exit(code)
}

// setupDatabase creates a database of its own for this test process, so
// that Pending (every prepared transaction in it) sees only this run's.
func setupDatabase(base string) (drop func(), err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", urlEnv, err)
	}
	defer conn.Close(context.Background())
	name := "sluice_test_" + strconv.Itoa(os.Getpid())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return nil, err
	}
	u, err := url.Parse(base)
	if err != nil {
		return nil, err
	}
	u.Path = "/" + name
	testURL = u.String()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			fmt.Fprintln(os.Stderr, "postgres tests: drop database:", err)
			return
		}
		defer c.Close(context.Background())
		rows, _ := c.Query(ctx, "SELECT gid FROM pg_prepared_xacts WHERE database = $1", name)
		gids, _ := pgx.CollectRows(rows, pgx.RowTo[string])
		if len(gids) > 0 {
			fmt.Fprintln(os.Stderr, "postgres tests: prepared transactions left in", name, gids)
		}
		// ROLLBACK PREPARED must run in the transaction's database.
		if d, err := pgx.Connect(ctx, testURL); err == nil {
			for _, g := range gids {
				_, _ = d.Exec(ctx, "ROLLBACK PREPARED '"+g+"'")
			}
			d.Close(context.Background())
		}
		if _, err := c.Exec(ctx, "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
			fmt.Fprintln(os.Stderr, "postgres tests: drop database:", err)
		}
	}, nil
}

// needServer skips a test without a server.
func needServer(t testing.TB) string {
	t.Helper()
	if testURL == "" {
		t.Skipf("%s is not set: these tests need a PostgreSQL server; run `eval \"$(scripts/postgres.sh start)\"; export %s SLUICE_POSTGRES_RUN` (scripts/test.sh does it)", urlEnv, urlEnv)
	}
	return testURL
}

var tableSeq atomic.Int64

// newTable creates a table named <prefix>_<n> with the given column
// definitions and returns its name.
func newTable(t testing.TB, prefix, defs string) string {
	t.Helper()
	name := fmt.Sprintf("%s_%d", prefix, tableSeq.Add(1))
	mustExec(t, "CREATE TABLE "+name+" ("+defs+")")
	return name
}

// mustExec runs statements on a connection of its own.
func mustExec(t testing.TB, sqls ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, needServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, s := range sqls {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// query runs a query on a connection of its own and collects the rows.
func query[R any](ctx context.Context, sql string, args ...any) ([]R, error) {
	conn, err := pgx.Connect(ctx, testURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[R])
}

// preparedGIDs lists the prepared transactions in the test database.
func preparedGIDs(ctx context.Context) ([]string, error) {
	type g struct{ GID string }
	rows, err := query[g](ctx, "SELECT gid FROM pg_prepared_xacts WHERE database = current_database() ORDER BY gid")
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.GID
	}
	return out, err
}

// queryURL is query on the database of url.
func queryURL[R any](ctx context.Context, url, sql string, args ...any) ([]R, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[R])
}

// mustExecURL runs statements on the database of url.
func mustExecURL(t testing.TB, url string, sqls ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for _, s := range sqls {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}
