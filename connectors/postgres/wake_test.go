package postgres

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestFetchAfterWakeUp: readerbase wakes a fetcher by cancelling the ctx
// of the Fetch in progress (when splits are added), and pgx closes a
// connection whose query is cancelled. The next Fetch must read on a new
// connection instead of failing with "conn closed" (a CI flake of
// TestSnapshotTextKey).
func TestFetchAfterWakeUp(t *testing.T) {
	url := needServer(t)
	table := newTable(t, "wake", "id int PRIMARY KEY, v int")
	mustExec(t, "INSERT INTO "+table+" SELECT g, g FROM generate_series(1, 100) g")
	src, err := NewSnapshotSource(url, table, FetchSize(1000))
	if err != nil {
		t.Fatal(err)
	}
	r := &splitReader[Change]{s: src.(*pgSource[Change]), confirm: &atomic.Uint64{}, ready: &atomic.Pointer[map[string][]Segment]{}}
	defer func() { _ = r.Close() }()
	if err := r.AddSplits([]Split{{ID: "chunk-0"}}); err != nil {
		t.Fatal(err)
	}

	// Hold a lock that blocks the page query, then wake the Fetch.
	ctx := t.Context()
	locker, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = locker.Close(context.Background()) }()
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.connectOnce(ctx); err != nil { // connect and load the table before the lock
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	fctx, wake := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = r.Fetch(fctx)
	wake()
	if err == nil {
		t.Fatal("Fetch returned no error while the table was locked and its ctx was cancelled")
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	b, err := r.Fetch(ctx)
	if err != nil {
		t.Fatalf("Fetch after a wake-up: %v", err)
	}
	if n := len(b.Records); n != 1 || len(b.Records[0].Records) != 100 {
		t.Fatalf("Fetch after a wake-up: %d split batches, want 1 with 100 rows", n)
	}
}
