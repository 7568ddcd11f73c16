package postgres

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// wop is one change of the workload on one key: op and the row's version
// after it (before it, for a delete).
type wop struct {
	op Op
	v  int64
}

// workload inserts, updates and deletes rows of table (id bigint, v
// bigint: the row's version, counted from 0 at its insert) in
// transactions of 1 to 4 changes, every 40th of 600 (so that a
// transaction spans several batches), until changes changes are
// committed. Keys are never reused after a delete. It returns the log of
// committed changes per key; prefilled rows (ids 1 … prefill, version 0)
// start with their insert.
type workload struct {
	table   string
	log     map[int64][]wop
	live    []int64
	ver     map[int64]int64
	nextID  int64
	changes int
}

func newWorkload(table string, prefill int) *workload {
	w := &workload{table: table, log: map[int64][]wop{}, ver: map[int64]int64{}, nextID: int64(prefill) + 1}
	for id := int64(1); id <= int64(prefill); id++ {
		w.log[id] = []wop{{OpInsert, 0}}
		w.live = append(w.live, id)
		w.ver[id] = 0
	}
	return w
}

func (w *workload) run(ctx context.Context, url string, changes int, seed uint64) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	rng := rand.New(rand.NewPCG(seed, 1))
	for txn := 0; w.changes < changes; txn++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		size := 1 + rng.IntN(4)
		if txn%40 == 39 {
			size = 600
		}
		size = min(size, changes-w.changes)
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		touched := map[int64]bool{}
		var pending []func()
		for range size {
			r := rng.IntN(4)
			switch {
			case r == 0 || len(w.live) < 100: // insert
				id := w.nextID
				w.nextID++
				if _, err := tx.Exec(ctx, "INSERT INTO "+w.table+" (id, v) VALUES ($1, 0)", id); err != nil {
					return err
				}
				touched[id] = true
				pending = append(pending, func() { w.log[id] = append(w.log[id], wop{OpInsert, 0}); w.live = append(w.live, id); w.ver[id] = 0 })
			default:
				i := rng.IntN(len(w.live))
				id := w.live[i]
				if touched[id] {
					continue
				}
				touched[id] = true
				if r == 1 { // delete
					if _, err := tx.Exec(ctx, "DELETE FROM "+w.table+" WHERE id = $1", id); err != nil {
						return err
					}
					pending = append(pending, func() {
						w.log[id] = append(w.log[id], wop{OpDelete, w.ver[id]})
						j := slices.Index(w.live, id)
						w.live = slices.Delete(w.live, j, j+1)
					})
				} else {
					if _, err := tx.Exec(ctx, "UPDATE "+w.table+" SET v = v + 1 WHERE id = $1", id); err != nil {
						return err
					}
					pending = append(pending, func() { w.ver[id]++; w.log[id] = append(w.log[id], wop{OpUpdate, w.ver[id]}) })
				}
			}
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		for _, f := range pending {
			f()
		}
		w.changes += len(pending)
		time.Sleep(500 * time.Microsecond)
	}
	return nil
}

// checkExactlyOnce checks the output of the CDC source against the
// workload's log, per key: the output holds the key's snapshot row (or
// none) and then exactly the changes the log has after the state the
// snapshot saw — each once, in order, none missing.
func (w *workload) checkExactlyOnce(t *testing.T, out []Change) {
	t.Helper()
	per := map[int64][]Change{}
	for _, c := range inOrder(out) {
		id, ok := c.Key.(int64)
		if !ok {
			t.Fatalf("key %#v is not an int64", c.Key)
		}
		per[id] = append(per[id], c)
	}
	bad := 0
	for id, log := range w.log {
		got := per[id]
		delete(per, id)
		cut := 0
		if len(got) > 0 && got[0].Op == OpRead {
			cut = int(got[0].After["v"].(int64)) + 1 // insert, then updates 1 … v
			got = got[1:]
		} else if len(got) == 0 || got[0].Op != OpInsert {
			// The snapshot did not see the row: it was inserted after the
			// snapshot read its page (its whole log follows) or deleted
			// before (nothing follows).
			cut = len(log)
		}
		var gotOps []wop
		for _, c := range got {
			img := c.After
			if c.Op == OpDelete {
				img = c.Before
			}
			v, _ := img["v"].(int64)
			gotOps = append(gotOps, wop{c.Op, v})
		}
		if cut > len(log) || !slices.Equal(gotOps, log[cut:]) {
			if bad++; bad <= 5 {
				t.Errorf("key %d: the log is %v; the output %v after the snapshot's %d changes", id, log, gotOps, cut)
			}
		}
	}
	for id, cs := range per {
		if bad++; bad <= 5 {
			t.Errorf("key %d is not in the workload but in the output: %v", id, cs)
		}
	}
	if bad > 0 {
		t.Fatalf("%d keys wrong", bad)
	}
}

// inOrder orders the records as the source emitted them per key: the
// snapshot's rows (LSN 0) first, then the changes by LSN (the workload
// touches a key at most once per transaction). The committed order across
// sink subtasks is not the emission order: chunk readers and the stream
// reader commit in the same checkpoints.
func inOrder(out []Change) []Change {
	out = slices.Clone(out)
	slices.SortStableFunc(out, func(a, b Change) int { return cmp.Compare(a.LSN, b.LSN) })
	return out
}

// apply applies change records to a map id → v.
func apply(out []Change) map[int64]int64 {
	m := map[int64]int64{}
	for _, c := range inOrder(out) {
		id := c.Key.(int64)
		switch c.Op {
		case OpDelete:
			delete(m, id)
		default:
			m[id] = c.After["v"].(int64)
		}
	}
	return m
}

func tableState(ctx context.Context, url, table string) (map[int64]int64, error) {
	type row struct{ ID, V int64 }
	rows, err := queryURL[row](ctx, url, "SELECT id, v FROM "+table)
	if err != nil {
		return nil, err
	}
	m := make(map[int64]int64, len(rows))
	for _, r := range rows {
		m[r.ID] = r.V
	}
	return m, nil
}

// dropSlot drops the test's slot and publication at the end.
func dropSlot(t *testing.T, url, slot, pub string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Logf("drop slot: %v", err)
			return
		}
		defer conn.Close(context.Background())
		for i := 0; i < 100; i++ { // the walsender may be exiting
			_, err = conn.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", slot)
			if err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			t.Errorf("drop slot %s: %v", slot, err)
		}
		_, _ = conn.Exec(ctx, "DROP PUBLICATION IF EXISTS "+pub)
	})
}

// TestCDCExactlyOnceUnderFailures: a workload inserts, updates and
// deletes rows (20k changes, some transactions of 600 changes) while the
// CDC source snapshots the table (5000 rows, pages of 500) and streams,
// with four injected failures (readers failing after N records, one
// during a checkpoint): the change records applied to a map give the
// table; per key, the output is the snapshot's row and then exactly the
// changes after it (each once); and the slot's confirmed LSN never passes
// the LSN of the last committed checkpoint.
func TestCDCExactlyOnceUnderFailures(t *testing.T) {
	t.Run("chunks", func(t *testing.T) { cdcUnderFailures(t, 3, ChunkSize(1200)) })
	t.Run("in-stream", func(t *testing.T) { cdcUnderFailures(t, 2, SnapshotInStream()) })
}

func cdcUnderFailures(t *testing.T, parallelism int, opts ...SourceOption) {
	url := needServer(t)
	const prefill, changes = 5000, 20_000
	table := newTable(t, "cdc", "id bigint PRIMARY KEY, v bigint NOT NULL")
	mustExec(t, "ALTER TABLE "+table+" REPLICA IDENTITY FULL",
		fmt.Sprintf("INSERT INTO %s SELECT g, 0 FROM generate_series(1, %d) g", table, prefill))
	slot, pub := "s_"+table, "p_"+table
	dropSlot(t, url, slot, pub)
	// The slot and publication exist before the job (CreateSlot is off).
	mustExec(t, "CREATE PUBLICATION "+pub+" FOR TABLE "+table,
		"SELECT pg_create_logical_replication_slot('"+slot+"', 'pgoutput')")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	type lsnRow struct{ L string }
	startRows, err := queryURL[lsnRow](ctx, url, "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", slot)
	if err != nil {
		t.Fatal(err)
	}
	start, _ := parseLSN(startRows[0].L)

	// The confirmed LSN may reach what a committed checkpoint allows, no more.
	var mu sync.Mutex
	allowed := start
	testHooks.Lock()
	testHooks.committed = func(_ int64, lsn uint64) { mu.Lock(); allowed = max(allowed, lsn); mu.Unlock() }
	testHooks.Unlock()
	t.Cleanup(func() { testHooks.Lock(); testHooks.committed = nil; testHooks.Unlock() })

	src, err := NewCDCSource(url, table, append([]SourceOption{Slot(slot), Publication(pub), FetchSize(500), StatusInterval(50 * time.Millisecond)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	plan := faultinject.NewPlan(
		faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: faultinject.AnySubtask, Records: 2600},
		faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: faultinject.AnySubtask, Records: 6100},
		faultinject.Fault{Kind: faultinject.DuringSnapshot, Subtask: faultinject.AnySubtask, Checkpoint: 12},
		faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: faultinject.AnySubtask, Records: 9300},
	)
	store := testsink.NewStore[Change]()
	env := stream.New(stream.Parallelism(parallelism), stream.CheckpointEvery(50*time.Millisecond),
		stream.Restart(restart.Exponential(20*time.Millisecond, time.Second, 30)), stream.Logger(stream.DiscardLogger()))
	s := stream.FromSource(env, faultinject.WrapSource(src, plan), watermark.None[Change](), "cdc")
	stream.SinkTo(s, testsink.NewTwoPhase(store), "out")
	h, err := env.Start(ctx, "cdc")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { h.Cancel(); _, _ = h.Wait() }()

	w := newWorkload(table, prefill)
	werr := make(chan error, 1)
	go func() { werr <- w.run(ctx, url, changes, 7) }()

	// Sample the slot's confirmed LSN until the output has caught up with
	// the table (bounded: 3000 rounds, the context's 3 minutes).
	var samples, ahead int
	var final map[int64]int64
	workDone := false
	caughtUp := onCommit(store, func() bool { return mapsEqual(apply(store.Committed()), final) })
	for i := 0; i < 3000 && ctx.Err() == nil; i++ {
		rows, err := queryURL[lsnRow](ctx, url, "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", slot)
		if err != nil {
			t.Fatal(err)
		}
		c, _ := parseLSN(rows[0].L)
		mu.Lock()
		if c > allowed {
			ahead++
			t.Errorf("the slot confirmed %s, past the last committed checkpoint's %s", lsnString(c), lsnString(allowed))
		}
		mu.Unlock()
		samples++
		if !workDone {
			select {
			case err := <-werr:
				if err != nil {
					t.Fatalf("workload: %v", err)
				}
				workDone = true
				if final, err = tableState(ctx, url, table); err != nil {
					t.Fatal(err)
				}
			default:
			}
		}
		if workDone && caughtUp() {
			break
		}
		select {
		case <-h.Done():
			res, err := h.Wait()
			t.Fatalf("the job ended: %v (%d restarts, failures %v)", err, res.Restarts, res.Failures)
		case <-time.After(20 * time.Millisecond):
		}
	}
	h.Cancel()
	res, _ := h.Wait()
	if !workDone {
		t.Fatal("the workload did not finish")
	}
	t.Logf("%d restarts (failures %v), %d checkpoints, %d LSN samples; slot start %s, allowed at the end %s",
		res.Restarts, res.Failures, res.Checkpoints.Completed, samples, lsnString(start), lsnString(allowed))
	if got := len(plan.Fired()); got < 3 {
		t.Errorf("only %d faults fired (%v), want at least 3", got, plan.Fired())
	}
	out := store.Committed()
	if got := apply(out); !mapsEqual(got, final) {
		t.Fatalf("the changes applied give %d rows; the table has %d", len(got), len(final))
	}
	w.checkExactlyOnce(t, out)
	if allowed == start {
		t.Error("no checkpoint LSN was ever confirmed")
	}
}

// onCommit returns cond memoized on store's commit count: cond runs again
// only once a transaction was committed since it last ran. The catch-up
// waits poll every 10 to 20 ms, and applying every committed change on
// each poll took the CPU the job under test needed.
func onCommit[T any](store *testsink.Store[T], cond func() bool) func() bool {
	last, v := -1, false
	return func() bool {
		if n := store.CommitCount(); n != last {
			last, v = n, cond()
		}
		return v
	}
}

func mapsEqual(a, b map[int64]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// TestCDCErrors: a missing publication, a publication without the table,
// a missing slot (CreateSlot off), a missing table and a table without a primary key
// fail with errors naming them.
func TestCDCErrors(t *testing.T) {
	url := needServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	table := newTable(t, "cdcerr", "id bigint PRIMARY KEY, v int")
	discover := func(table string, opts ...SourceOption) error {
		s, err := NewCDCSource(url, table, opts...)
		if err != nil {
			return err
		}
		_, err = s.(*pgSource[Change]).discover(ctx)
		return err
	}
	err := discover(table, Publication("no_such_pub"))
	if !errors.Is(err, ErrPublicationNotFound) {
		t.Errorf("%v does not wrap ErrPublicationNotFound", err)
	}
	wantErr(t, err, `publication "no_such_pub" does not exist`, "CreatePublication")

	other := newTable(t, "cdcother", "id bigint PRIMARY KEY")
	pub := "p_" + other
	mustExec(t, "CREATE PUBLICATION "+pub+" FOR TABLE "+other)
	t.Cleanup(func() { mustExec(t, "DROP PUBLICATION "+pub) })
	err = discover(table, Publication(pub))
	if !errors.Is(err, ErrPublicationNotFound) {
		t.Errorf("%v does not wrap ErrPublicationNotFound", err)
	}
	wantErr(t, err, pub, "does not publish table public."+table)

	mustExec(t, "ALTER PUBLICATION "+pub+" ADD TABLE "+table)
	err = discover(table, Publication(pub), Slot("no_such_slot"))
	if !errors.Is(err, ErrSlotNotFound) {
		t.Errorf("%v does not wrap ErrSlotNotFound", err)
	}
	wantErr(t, err, `replication slot "no_such_slot" does not exist`, "CreateSlot")

	err = discover("no_such_cdc_table")
	if !errors.Is(err, ErrTableNotFound) {
		t.Errorf("%v does not wrap ErrTableNotFound", err)
	}
	wantErr(t, err, `"no_such_cdc_table"`)

	nk := newTable(t, "cdcnokey", "name text")
	wantErr(t, discover(nk), "no primary key", "KeyColumns")
}

// TestCDCWALLevel: a server with wal_level = replica fails the CDC source
// with an error naming the setting.
func TestCDCWALLevel(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server of its own: skipped with -short")
	}
	own := startOwnServer(t, "SLUICE_POSTGRES_WAL_LEVEL=replica")
	mustExecURL(t, own.url, "CREATE TABLE w (id bigint PRIMARY KEY)")
	s, err := NewCDCSource(own.url, "w", CreateSlot(true), CreatePublication(true))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.(*pgSource[Change]).discover(t.Context())
	if !errors.Is(err, ErrWALLevel) {
		t.Errorf("%v does not wrap ErrWALLevel", err)
	}
	wantErr(t, err, "wal_level", `"replica"`, "logical")
	if !strings.Contains(err.Error(), "postgresql.conf") {
		t.Errorf("the error does not say where to set it: %v", err)
	}
}

func (w wop) String() string { return fmt.Sprintf("%c%d", w.op, w.v) }

func TestDebeziumEnvelope(t *testing.T) {
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	c := Change{Op: OpUpdate, Table: "public.orders", Key: int64(7), LSN: 0x16B3748, Xid: 42, CommitTime: at,
		Before: map[string]any{"id": int64(7), "amount": json.Number("1.50")},
		After:  map[string]any{"id": int64(7), "amount": json.Number("2.50")}}
	b, err := c.Debezium("shop")
	if err != nil {
		t.Fatal(err)
	}
	var env struct {
		Before, After map[string]any
		Op            string
		TsMs          int64 `json:"ts_ms"`
		Source        struct {
			Connector, Name, Snapshot, Schema, Table string
			TsMs                                     int64  `json:"ts_ms"`
			TxID                                     uint32 `json:"txId"`
			LSN                                      uint64
		}
	}
	if err := json.Unmarshal(b, &env); err != nil {
		t.Fatal(err)
	}
	if env.Op != "u" || env.Before["amount"] != 1.5 || env.After["amount"] != 2.5 || env.TsMs == 0 {
		t.Errorf("envelope %s", b)
	}
	s := env.Source
	if s.Connector != "postgresql" || s.Name != "shop" || s.Snapshot != "false" || s.Schema != "public" || s.Table != "orders" ||
		s.TsMs != at.UnixMilli() || s.TxID != 42 || s.LSN != 0x16B3748 {
		t.Errorf("source block %+v of %s", s, b)
	}
	d, _ := Change{Op: OpDelete, Table: "public.orders", Before: map[string]any{"id": int64(7)}}.Debezium("x")
	if !strings.Contains(string(d), `"after":null`) || !strings.Contains(string(d), `"op":"d"`) {
		t.Errorf("delete envelope %s", d)
	}
	r, _ := Change{Op: OpRead, Table: "public.orders", After: map[string]any{"id": int64(7)}}.Debezium("x")
	if !strings.Contains(string(r), `"snapshot":"true"`) || !strings.Contains(string(r), `"op":"r"`) {
		t.Errorf("read envelope %s", r)
	}
}

// TestCDCRestoreInNewJob: a CDC job (slot and publication created by the
// source) is cancelled after a workload and a new job restored from its
// latest checkpoint goes on through a second workload: the output of both
// is every change once. A third job restored from a checkpoint taken
// during the snapshot, older than what the slot confirmed since, fails
// with ErrSlotAhead instead of skipping the changes in between.
func TestCDCRestoreInNewJob(t *testing.T) {
	url := needServer(t)
	const prefill = 1000
	table := newTable(t, "cdcres", "id bigint PRIMARY KEY, v bigint NOT NULL")
	mustExec(t, "ALTER TABLE "+table+" REPLICA IDENTITY FULL",
		fmt.Sprintf("INSERT INTO %s SELECT g, 0 FROM generate_series(1, %d) g", table, prefill))
	slot, pub := "s_"+table, "p_"+table
	dropSlot(t, url, slot, pub)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	src, err := NewCDCSource(url, table, Slot(slot), Publication(pub), CreateSlot(true), CreatePublication(true), FetchSize(100))
	if err != nil {
		t.Fatal(err)
	}
	store := testsink.NewStore[Change]()
	dir := t.TempDir()
	newEnv := func(opts ...stream.Option) *stream.Environment {
		env := stream.New(append([]stream.Option{stream.Parallelism(1), stream.CheckpointEvery(30 * time.Millisecond),
			stream.CheckpointDir(dir), stream.RetainCheckpoints(10_000), stream.Logger(stream.DiscardLogger())}, opts...)...)
		s := stream.FromSource(env, src, watermark.None[Change](), "cdc")
		s = stream.Map(s, func(c Change) Change { time.Sleep(50 * time.Microsecond); return c })
		stream.SinkTo(s, testsink.NewTwoPhase(store), "out")
		return env
	}
	w := newWorkload(table, prefill)
	// run runs a job with a workload of n changes until the output has
	// caught up with the table, and returns its first and last checkpoints.
	run := func(env *stream.Environment, n int, seed uint64) (first, last *checkpoint.Snapshot) {
		h, err := env.Start(ctx, "cdc")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { h.Cancel(); _, _ = h.Wait() }()
		werr := make(chan error, 1)
		go func() { werr <- w.run(ctx, url, w.changes+n, seed) }()
		var final map[int64]int64
		caughtUp := onCommit(store, func() bool { return mapsEqual(apply(store.Committed()), final) })
		for i := 0; i < 6000 && ctx.Err() == nil; i++ {
			if first == nil && len(store.Committed()) > 0 {
				first = h.Latest() // the reader holds the stream split
			}
			if final == nil {
				select {
				case err := <-werr:
					if err != nil {
						t.Fatal(err)
					}
					if final, err = tableState(ctx, url, table); err != nil {
						t.Fatal(err)
					}
				default:
				}
			}
			if final != nil && caughtUp() {
				return first, h.Latest()
			}
			select {
			case <-h.Done():
				_, err := h.Wait()
				t.Fatalf("the job ended: %v", err)
			case <-time.After(10 * time.Millisecond):
			}
		}
		t.Fatal("the output did not catch up with the table")
		return nil, nil
	}
	early, last := run(newEnv(), 3000, 1)
	if early == nil || last == nil {
		t.Fatal("no checkpoint")
	}
	run(newEnv(stream.RestoreFrom(last)), 3000, 2)
	w.checkExactlyOnce(t, store.Committed())

	jctx, jcancel := context.WithTimeout(ctx, time.Minute)
	defer jcancel()
	_, err = newEnv(stream.RestoreFrom(early)).Execute(jctx, "cdc")
	if !errors.Is(err, ErrSlotAhead) {
		t.Fatalf("restored from checkpoint %d: %v; want ErrSlotAhead", early.ID, err)
	}
	wantErr(t, err, slot, "past the restored position")
}

// TestCDCConfirmsWhileIdle: while the captured table is quiet and other
// tables are written, the slot's confirmed LSN still moves on (after
// checkpoints), so the server can release that WAL.
func TestCDCConfirmsWhileIdle(t *testing.T) {
	url := needServer(t)
	table := newTable(t, "cdcidle", "id bigint PRIMARY KEY")
	other := newTable(t, "cdcbusy", "id bigint PRIMARY KEY")
	slot, pub := "s_"+table, "p_"+table
	dropSlot(t, url, slot, pub)
	src, err := NewCDCSource(url, table, Slot(slot), Publication(pub), CreateSlot(true), CreatePublication(true), StatusInterval(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	env := stream.New(stream.CheckpointEvery(30*time.Millisecond), stream.Logger(stream.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, src, watermark.None[Change](), "cdc"), testsink.NewTwoPhase(testsink.NewStore[Change]()), "out")
	h, err := env.Start(ctx, "idle")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { h.Cancel(); _, _ = h.Wait() }()
	type lsnRow struct{ L *string }
	slotLSN := func() uint64 {
		rows, err := queryURL[lsnRow](ctx, url, "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = $1", slot)
		if err != nil || len(rows) == 0 || rows[0].L == nil {
			return 0
		}
		l, _ := parseLSN(*rows[0].L)
		return l
	}
	for i := 0; i < 500 && slotLSN() == 0; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	start := slotLSN()
	for i := range 200 {
		mustExec(t, fmt.Sprintf("INSERT INTO %s VALUES (%d)", other, i))
	}
	type lsn struct{ L string }
	rows, err := queryURL[lsn](ctx, url, "SELECT pg_current_wal_lsn()::text")
	if err != nil {
		t.Fatal(err)
	}
	end, _ := parseLSN(rows[0].L)
	var got uint64
	for i := 0; i < 1500 && ctx.Err() == nil; i++ {
		if got = slotLSN(); got+1 >= end {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got+1 < end {
		t.Fatalf("the slot confirmed %s (it started at %s); the other table's writes end at %s", lsnString(got), lsnString(start), lsnString(end))
	}
}
