package postgres

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/internal/testutil/tcpproxy"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// startCutProxy starts a loopback proxy to the host of rawURL and returns
// it with rawURL pointing at it; the proxy is closed at the end of the
// test.
func startCutProxy(t *testing.T, rawURL string) (*tcpproxy.Proxy, string) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	p := tcpproxy.Start(t, u.Host)
	u.Host = p.Addr()
	return p, u.String()
}

// changeRow is a change record as the test's sink writes it into its
// table: the key, the operation, the row's version (v) after it (before
// it, for a delete) and the LSN.
func changeRow(c Change) ([]any, error) {
	id, ok := c.Key.(int64)
	if !ok {
		return nil, fmt.Errorf("key %#v is not an int64", c.Key)
	}
	img := c.After
	if c.Op == OpDelete {
		img = c.Before
	}
	v, ok := img["v"].(int64)
	if !ok {
		return nil, fmt.Errorf("key %d: %c without v: %v", id, c.Op, img)
	}
	return []any{id, string(rune(c.Op)), v, int64(c.LSN)}, nil
}

// TestCDCFaults: a workload inserts, updates and deletes rows (40k
// changes by default, SLUICE_CDC_CHANGES to change; transactions of 1 to
// 4 changes and every 40th of 600; the injected faults fire within the
// first 10k, and 100k only added cuts of the same kind for a minute more) while the CDC source snapshots the
// table (20k rows, chunks of 4000) and streams, into the exactly-once
// Postgres sink (an append-only change table: a change written twice
// would show), both through a TCP proxy. Faults: injected reader, writer,
// checkpoint and committer failures (faultinject, with the restart
// strategy recovering) and cuts of every connection through the proxy
// (the replication stream, the snapshot queries, the sink's writers and
// committers). The change table, applied per key in LSN order, ends equal
// to the source table; per key it holds the snapshot's row and then
// exactly the workload's changes after it, each once (checkExactlyOnce,
// against the workload's own log); no prepared transaction is left.
func TestCDCFaults(t *testing.T) {
	dbURL := needServer(t)
	changes := 40_000
	if v := os.Getenv("SLUICE_CDC_CHANGES"); v != "" {
		var err error
		if changes, err = strconv.Atoi(v); err != nil || changes < 1000 {
			t.Fatalf("SLUICE_CDC_CHANGES=%q: want a number ≥ 1000", v)
		}
	}
	const prefill = 20_000
	table := newTable(t, "cdcf", "id bigint PRIMARY KEY, v bigint NOT NULL")
	out := newTable(t, "cdcf_out", "id bigint NOT NULL, op text NOT NULL, v bigint NOT NULL, lsn bigint NOT NULL")
	mustExec(t, "ALTER TABLE "+table+" REPLICA IDENTITY FULL",
		fmt.Sprintf("INSERT INTO %s SELECT g, 0 FROM generate_series(1, %d) g", table, prefill))
	slot, pub := "s_"+table, "p_"+table
	dropSlot(t, dbURL, slot, pub)
	mustExec(t, "CREATE PUBLICATION "+pub+" FOR TABLE "+table,
		"SELECT pg_create_logical_replication_slot('"+slot+"', 'pgoutput')")
	// A hang guard, not a timing assertion: at load 42 the workload alone
	// (40k changes) ran past 4 minutes.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()

	proxy, viaProxy := startCutProxy(t, dbURL)
	src, err := NewCDCSource(viaProxy, table, Slot(slot), Publication(pub), ChunkSize(4000), FetchSize(1000),
		StatusInterval(100*time.Millisecond), SourceSetupTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	sk, err := NewSink(viaProxy, out, changeRow, Columns("id", "op", "v", "lsn"), TransactionPrefix("cdcf-"), SetupTimeout(30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	plan := faultinject.NewPlan(
		faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: faultinject.AnySubtask, Records: 7000},
		faultinject.Fault{Kind: faultinject.DuringSnapshot, Subtask: faultinject.AnySubtask, Checkpoint: 8},
		faultinject.Fault{Kind: faultinject.WriterAfterRecords, Subtask: faultinject.AnySubtask, Records: 12_000},
		faultinject.Fault{Kind: faultinject.BeforeCommit, Subtask: faultinject.AnySubtask, Checkpoint: 16},
		faultinject.Fault{Kind: faultinject.AfterPrepareCommit, Subtask: faultinject.AnySubtask, Checkpoint: 24},
		faultinject.Fault{Kind: faultinject.DuringCommit, Subtask: faultinject.AnySubtask, Checkpoint: 32},
		faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: faultinject.AnySubtask, Records: 20_000},
	)
	// The restart budget is not what the test proves: the cuts come every
	// 2.5 s for as long as the workload runs, and a cut may also hit a
	// restart under way (its connect or setup fails, one more restart).
	// At load 30 the workload ran 115 s and 60 attempts ran out (46 cuts,
	// 7 injected faults and the restarts they cut). The context bounds it.
	env := stream.New(stream.Parallelism(3), stream.CheckpointEvery(200*time.Millisecond),
		stream.Restart(restart.Exponential(20*time.Millisecond, time.Second, 1000)), stream.Logger(stream.DiscardLogger()))
	s := stream.FromSource(env, faultinject.WrapSource(src, plan), watermark.None[Change](), "cdc")
	stream.SinkTo(s, faultinject.WrapSink(sk, plan), "pg")
	h, err := env.Start(ctx, "cdc-faults")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { h.Cancel(); _, _ = h.Wait() }()

	w := newWorkload(table, prefill)
	werr := make(chan error, 1)
	go func() { werr <- w.run(ctx, dbURL, changes, 11) }()

	// While the workload runs: cut every connection through the proxy
	// every 2.5 s (a cut fires when it closed a connection).
	t0 := time.Now()
	cuts := 0
	workDone := false
	for !workDone {
		select {
		case err := <-werr:
			if err != nil {
				t.Fatalf("workload: %v", err)
			}
			workDone = true
		case <-h.Done():
			res, err := h.Wait()
			t.Fatalf("the job ended: %v (%d restarts, failures %v)", err, res.Restarts, res.Failures)
		case <-time.After(2500 * time.Millisecond):
			if k := proxy.Cut(); k > 0 {
				cuts++
				t.Logf("%5.1fs: cut %d connections", time.Since(t0).Seconds(), k)
			}
		}
	}
	t.Logf("%5.1fs: the workload committed %d changes", time.Since(t0).Seconds(), w.changes)
	final, err := tableState(ctx, dbURL, table)
	if err != nil {
		t.Fatal(err)
	}
	// Wait (bounded: 1500 rounds, the context's minutes) until the change
	// table, applied, equals the source table.
	const diff = `WITH last AS (SELECT DISTINCT ON (id) id, op, v FROM %[1]s ORDER BY id, lsn DESC)
		SELECT count(*) FROM (SELECT id, v FROM last WHERE op <> 'd') l FULL JOIN %[2]s s USING (id)
		WHERE l.v IS DISTINCT FROM s.v`
	type n struct{ N int64 }
	caught := false
	for i := 0; i < 1500 && ctx.Err() == nil && !caught; i++ {
		if d, err := queryURL[n](ctx, dbURL, fmt.Sprintf(diff, out, table)); err == nil && d[0].N == 0 {
			caught = true
			break
		}
		select {
		case <-h.Done():
			res, err := h.Wait()
			t.Fatalf("the job ended: %v (%d restarts, failures %v)", err, res.Restarts, res.Failures)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if !caught {
		t.Fatalf("the change table did not catch up with the source table")
	}
	res, err := h.Stop(ctx)
	if err != nil {
		t.Fatalf("stop: %v", err)
	}
	t.Logf("%5.1fs: caught up and stopped; faults fired: %d injected (%v), %d connection cuts; %d restarts, %d checkpoints",
		time.Since(t0).Seconds(), len(plan.Fired()), plan.Fired(), cuts, res.Restarts, res.Checkpoints.Completed)
	if got := len(plan.Fired()) + cuts; got < 5 {
		t.Errorf("only %d faults fired (%v and %d cuts), want at least 5", got, plan.Fired(), cuts)
	}

	// The independent check: every change record of the table, per key
	// against the workload's log.
	type row struct {
		ID  int64
		Op  string
		V   int64
		LSN int64
	}
	rows, err := queryURL[row](ctx, dbURL, "SELECT id, op, v, lsn FROM "+out)
	if err != nil {
		t.Fatal(err)
	}
	got := make([]Change, len(rows))
	for i, r := range rows {
		img := map[string]any{"v": r.V}
		got[i] = Change{Op: Op(r.Op[0]), Key: r.ID, LSN: uint64(r.LSN), After: img, Before: img}
	}
	if a := apply(got); !mapsEqual(a, final) {
		t.Fatalf("the changes applied give %d rows; the table has %d", len(a), len(final))
	}
	w.checkExactlyOnce(t, got)
	t.Logf("%d change records for %d changes and %d snapshot rows", len(rows), w.changes, prefill)
	if gids, err := preparedGIDs(ctx); err != nil || len(gids) > 0 {
		t.Errorf("prepared transactions left: %v %v", gids, err)
	}
}
