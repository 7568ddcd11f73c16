package postgres

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectortest/fakes"
	"github.com/sluice-io/sluice/sink"
)

// TestAtLeastOnceDurableAtFlush: at-least-once writers commit their
// batches with synchronous_commit = off, and Flush (the checkpoint's)
// makes them durable. Three checkpoints' rows (2500 each: two batches
// sent by Write, the rest by Flush) are written, the server is killed
// with SIGKILL right after the third Flush returns, and restarted: every
// row of the three checkpoints is in the table, in both modes. The
// server's WAL writer runs every 10 s only (wal_writer_delay), so that
// nothing but the flush at the checkpoint writes the last commits'
// WAL. A control run sends rows without the checkpoint's flush and kills
// the server the same way: it logs what was lost (the WAL still in the
// server's buffers) — what the flush is for. Last, a checkpoint whose rows
// all went out in full batches (Flush has nothing to send and waits for
// the WAL flush) survives a crash too.
func TestAtLeastOnceDurableAtFlush(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server of its own: skipped with -short")
	}
	own := startOwnServer(t)
	for _, mode := range []Mode{Append, Upsert} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			mustExecURL(t, own.url, "ALTER SYSTEM SET wal_writer_delay = '10s'", "SELECT pg_reload_conf()")
			table := fmt.Sprintf("durable_%d", mode)
			defs := "k bigint NOT NULL, v text NOT NULL"
			if mode == Upsert {
				defs = "k bigint PRIMARY KEY, v text NOT NULL"
			}
			mustExecURL(t, own.url, "CREATE TABLE "+table+" ("+defs+")")
			s, err := newRowSink(own.url, table, func(r [2]any) ([]any, error) { return r[:], nil },
				[]SinkOption{Columns("k", "v"), DeliveryGuarantee(AtLeastOnce), WriteMode(mode), BatchSize(1000)})
			if err != nil {
				t.Fatal(err)
			}
			const perCheckpoint = 2500
			w := durableWriter(t, s)
			if w.durable == "" {
				t.Fatalf("the writer commits its batches synchronously (synchronous_commit is off on the server?)")
			}
			var next int64
			for range 3 {
				durableWrite(t, w, &next, perCheckpoint)
				if err := w.Flush(t.Context(), false); err != nil {
					t.Fatalf("Flush: %v", err)
				}
			}
			own.crash(t)
			if got := durableKeys(t, own.url, table); got != next {
				t.Errorf("after the crash the table has %d of the %d rows of the completed checkpoints", got, next)
			}

			// The control: rows sent (committed asynchronously) but not
			// flushed by a checkpoint.
			w = durableWriter(t, s)
			before := next
			durableWrite(t, w, &next, perCheckpoint)
			if err := w.send(t.Context()); err != nil {
				t.Fatal(err)
			}
			own.crash(t)
			got := durableKeys(t, own.url, table)
			t.Logf("control: of %d rows committed asynchronously and not flushed, %d were lost with the server's crash", next-before, next-got)

			// A checkpoint whose rows all went out in full batches: Flush
			// has nothing to send and waits for the WAL writer (with its
			// default delay again) to flush what the batches committed.
			mustExecURL(t, own.url, "ALTER SYSTEM RESET wal_writer_delay", "SELECT pg_reload_conf()")
			next = got
			w = durableWriter(t, s)
			durableWrite(t, w, &next, 2000)
			if len(w.rows) != 0 || !w.unsynced {
				t.Fatalf("%d rows buffered, unsynced %v: want the two batches sent, not flushed", len(w.rows), w.unsynced)
			}
			if err := w.Flush(t.Context(), false); err != nil {
				t.Fatalf("Flush: %v", err)
			}
			own.crash(t)
			if got := durableKeys(t, own.url, table); got != next {
				t.Errorf("after the crash the table has %d of the %d rows of the completed checkpoints", got, next)
			}
		})
	}
}

// durableWriter is an at-least-once writer of s, closed at the end of the
// test.
func durableWriter(t *testing.T, s *pgSink[[2]any]) *writer[[2]any] {
	t.Helper()
	w, err := s.newWriter(t.Context(), &fakes.InitContext{ID: "durable0000000001"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

// durableWrite writes n rows (k, "v<k>") from *next on.
func durableWrite(t *testing.T, w *writer[[2]any], next *int64, n int) {
	t.Helper()
	for range n {
		if err := w.Write(t.Context(), [2]any{*next, "v" + strconv.FormatInt(*next, 10)}, sink.Meta{}); err != nil {
			t.Fatalf("Write: %v", err)
		}
		*next++
	}
}

// durableKeys checks that table holds the keys 0 … n-1 once each, for
// some n, and returns n.
func durableKeys(t *testing.T, url, table string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	type st struct{ N, Distinct, Max int64 }
	r, err := queryURL[st](ctx, url, "SELECT count(*), count(DISTINCT k), coalesce(max(k), -1) FROM "+table)
	if err != nil {
		t.Fatal(err)
	}
	if r[0].N != r[0].Distinct || r[0].Max != r[0].N-1 {
		t.Fatalf("table %s: %d rows, %d keys, the largest %d: want the keys 0 … n-1 once each", table, r[0].N, r[0].Distinct, r[0].Max)
	}
	return r[0].N
}

// crash kills the server with SIGKILL and starts it again (crash
// recovery from the WAL).
func (s *ownServer) crash(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for _, arg := range []string{"kill9", "restart"} {
		if out, err := s.cmd(ctx, arg).CombinedOutput(); err != nil {
			t.Fatalf("scripts/postgres.sh %s: %v: %s", arg, err, out)
		}
	}
}
