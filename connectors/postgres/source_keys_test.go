package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/connectortest/fakes"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// keyKinds are tables of rows (id bigint, v bigint) keyed by columns
// derived from id by a trigger (generated columns are not replicated), so
// that the key order is not id's: the workload of cdc_test.go writes them
// by id, and checks look at id.
var keyKinds = []struct {
	name, defs, set string
	goCmp           bool // the reconciliation compares keys in Go (else the server)
}{
	{"text", "k text PRIMARY KEY", "NEW.k := 'k' || NEW.id || CASE WHEN NEW.id % 3 = 0 THEN ' Ä' ELSE 'b' END;", false},
	{"uuid", "u uuid PRIMARY KEY", "NEW.u := md5(NEW.id::text)::uuid;", true},
	{"composite", "a int, b text, PRIMARY KEY (a, b)", "NEW.a := (NEW.id * 7919) % 13; NEW.b := 'x' || NEW.id;", false},
	{"numeric", "n numeric PRIMARY KEY", "NEW.n := ((NEW.id * 7919) % 100003) / 8.0 + NEW.id * 100003;", false},
}

// keyTable creates a table of keyKinds[i].
func keyTable(t *testing.T, prefix string, i int) string {
	t.Helper()
	kk := keyKinds[i]
	table := newTable(t, prefix, "id bigint NOT NULL UNIQUE, v bigint NOT NULL, "+kk.defs)
	mustExec(t, "CREATE FUNCTION "+table+"_key() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "+kk.set+" RETURN NEW; END $$",
		"CREATE TRIGGER "+table+"_key BEFORE INSERT ON "+table+" FOR EACH ROW EXECUTE FUNCTION "+table+"_key()")
	return table
}

// byID returns out with each Key replaced by the row's id.
func byID(t *testing.T, out []Change) []Change {
	t.Helper()
	res := make([]Change, len(out))
	for i, c := range out {
		img := c.After
		if img == nil {
			img = c.Before
		}
		id, ok := img["id"].(int64)
		if !ok {
			t.Fatalf("change %+v has no id", c)
		}
		c.Key = id
		res[i] = c
	}
	return res
}

// TestSnapshotKeyTypes reads tables keyed by text, uuid, a composite
// (integer, text) and numeric in chunks of 700 rows and pages of 256 at
// parallelism 2, with readers failing mid-chunk: every row comes out
// exactly once.
func TestSnapshotKeyTypes(t *testing.T) {
	url := needServer(t)
	const n = 6000
	for i, kk := range keyKinds {
		t.Run(kk.name, func(t *testing.T) {
			table := keyTable(t, "snapkey", i)
			mustExec(t, fmt.Sprintf("INSERT INTO %s (id, v) SELECT g, g * 10 FROM generate_series(1, %d) g", table, n))
			src, err := NewSnapshotSource(url, table, ChunkSize(700), FetchSize(256))
			if err != nil {
				t.Fatal(err)
			}
			plan := faultinject.NewPlan(
				faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: 0, Records: 1000},
				faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: 1, Records: 1900},
			)
			store := testsink.NewStore[Change]()
			env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(20*time.Millisecond),
				stream.Restart(restart.Exponential(20*time.Millisecond, time.Second, 20)), stream.Logger(stream.DiscardLogger()))
			s := stream.FromSource(env, faultinject.WrapSource(src, plan), watermark.None[Change](), "pg")
			s = stream.Map(s, func(c Change) Change { time.Sleep(20 * time.Microsecond); return c })
			stream.SinkTo(s, testsink.NewTwoPhase(store), "out")
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			if _, err := env.Execute(ctx, "snapkey"); err != nil {
				t.Fatal(err)
			}
			if got := len(plan.Fired()); got < 2 {
				t.Errorf("only %d faults fired", got)
			}
			out, err := store.Final()
			if err != nil {
				t.Fatal(err)
			}
			seen := map[int64]int{}
			for _, c := range byID(t, out) {
				id := c.Key.(int64)
				seen[id]++
				if c.After["v"] != id*10 {
					t.Fatalf("row %d: v %v", id, c.After["v"])
				}
			}
			for id := int64(1); id <= n; id++ {
				if seen[id] != 1 {
					t.Fatalf("row %d came out %d times (%d records for %d rows)", id, seen[id], len(out), n)
				}
			}
			if len(out) != n {
				t.Fatalf("%d records for %d rows", len(out), n)
			}
		})
	}
}

// TestSnapshotCompositePosition: a chunk split's position is the last
// key read, the JSON array of its columns' text forms, and a reader
// restored from it goes on after that key.
func TestSnapshotCompositePosition(t *testing.T) {
	url := needServer(t)
	table := newTable(t, "comppos", "a int, b text, v int NOT NULL, PRIMARY KEY (a, b)")
	mustExec(t, "INSERT INTO "+table+" SELECT g % 4, 'r' || g, g FROM generate_series(1, 1000) g")
	src, err := NewSnapshotSource(url, table, ChunkSize(5000), FetchSize(100))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	splits, err := src.(*pgSource[Change]).discover(ctx)
	if err != nil || len(splits) != 1 {
		t.Fatalf("splits %+v, %v", splits, err)
	}
	read := func(splits []Split, enough int) ([]Change, []Split) {
		r, err := src.CreateReader(&fakes.ReaderContext{})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		if err := r.AddSplits(splits); err != nil {
			t.Fatal(err)
		}
		if enough == 0 {
			r.NotifyNoMoreSplits()
		}
		out := &fakes.Output[Change]{}
		pollUntil(t, r, out, func() bool { return enough > 0 && len(out.Values()) >= enough })
		st, err := r.SnapshotState(1)
		if err != nil {
			t.Fatal(err)
		}
		return out.Values(), st
	}
	first, st := read(splits, 250)
	last := first[len(first)-1].Key.([]any)
	want, _ := json.Marshal([]string{fmt.Sprint(last[0]), last[1].(string)})
	if len(st) != 1 || st[0].Lo == nil || *st[0].Lo != string(want) {
		t.Fatalf("after %d rows the position is %+v, want %s", len(first), st, want)
	}
	rest, _ := read(st, 0)
	seen := map[int64]bool{}
	for _, c := range append(first, rest...) {
		v := c.After["v"].(int64)
		if seen[v] {
			t.Fatalf("row %d twice", v)
		}
		seen[v] = true
	}
	if len(seen) != 1000 {
		t.Fatalf("%d rows, want 1000", len(seen))
	}
}

// TestCDCKeyTypes runs the CDC workload of cdc_test.go (inserts, updates,
// deletes) on tables keyed by text, uuid, a composite and numeric while
// the source snapshots them in chunks (parallel, 3 readers) and streams,
// with readers failing: the changes applied give the table, and per row
// every change comes out once, after the snapshot's row.
func TestCDCKeyTypes(t *testing.T) {
	url := needServer(t)
	const prefill, changes = 4000, 6000
	for i, kk := range keyKinds {
		t.Run(kk.name, func(t *testing.T) {
			table := keyTable(t, "cdckey", i)
			mustExec(t, "ALTER TABLE "+table+" REPLICA IDENTITY FULL",
				fmt.Sprintf("INSERT INTO %s (id, v) SELECT g, 0 FROM generate_series(1, %d) g", table, prefill))
			slot, pub := "s_"+table, "p_"+table
			dropSlot(t, url, slot, pub)
			src, err := NewCDCSource(url, table, Slot(slot), Publication(pub), CreateSlot(true), CreatePublication(true),
				ChunkSize(500), FetchSize(200), StatusInterval(50*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			plan := faultinject.NewPlan(
				faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: faultinject.AnySubtask, Records: 1500},
				faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: faultinject.AnySubtask, Records: 3100},
				faultinject.Fault{Kind: faultinject.DuringSnapshot, Subtask: faultinject.AnySubtask, Checkpoint: 8},
			)
			store := testsink.NewStore[Change]()
			env := stream.New(stream.Parallelism(3), stream.CheckpointEvery(50*time.Millisecond),
				stream.Restart(restart.Exponential(20*time.Millisecond, time.Second, 30)), stream.Logger(stream.DiscardLogger()))
			s := stream.FromSource(env, faultinject.WrapSource(src, plan), watermark.None[Change](), "cdc")
			s = stream.Map(s, func(c Change) Change { time.Sleep(50 * time.Microsecond); return c }) // a slow snapshot
			stream.SinkTo(s, testsink.NewTwoPhase(store), "out")
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			h, err := env.Start(ctx, "cdckey")
			if err != nil {
				t.Fatal(err)
			}
			defer func() { h.Cancel(); _, _ = h.Wait() }()
			w := newWorkload(table, prefill)
			if err := w.run(ctx, url, changes, 11); err != nil {
				t.Fatalf("workload: %v", err)
			}
			final, err := tableState(ctx, url, table)
			if err != nil {
				t.Fatal(err)
			}
			caught := false
			caughtUp := onCommit(store, func() bool { return mapsEqual(apply(byID(t, store.Committed())), final) })
			for i := 0; i < 6000 && ctx.Err() == nil && !caught; i++ {
				caught = caughtUp()
				select {
				case <-h.Done():
					res, err := h.Wait()
					t.Fatalf("the job ended: %v (%d restarts, failures %v)", err, res.Restarts, res.Failures)
				case <-time.After(20 * time.Millisecond):
				}
			}
			h.Cancel()
			res, _ := h.Wait()
			t.Logf("%d restarts (failures %v), %d checkpoints", res.Restarts, res.Failures, res.Checkpoints.Completed)
			out := byID(t, store.Committed())
			if !caught {
				t.Fatalf("the changes applied give %d rows; the table has %d", len(apply(out)), len(final))
			}
			if got := len(plan.Fired()); got < 2 {
				t.Errorf("only %d faults fired (%v)", got, plan.Fired())
			}
			w.checkExactlyOnce(t, out)
		})
	}
}

// TestKeyComparison: the segments the reconciliation finds for keys are
// those the server's order gives, in Go (uuid) and by the server (text,
// composite, numeric) alike.
func TestKeyComparison(t *testing.T) {
	url := needServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	for i, kk := range keyKinds {
		table := keyTable(t, "keycmp", i)
		mustExec(t, "INSERT INTO "+table+" (id, v) SELECT g, 0 FROM generate_series(1, 500) g")
		st, err := loadSourceTable(ctx, conn, table, nil)
		if err != nil {
			t.Fatal(err)
		}
		if st.goComparable() != kk.goCmp {
			t.Errorf("%s: goComparable %v", kk.name, st.goComparable())
		}
		// Pages of 64 rows in the server's order: row i is in page i/64.
		var segs []Segment
		var keys [][]string
		var lo *string
		for page := 0; ; page++ {
			_, pk, err := st.readPage(ctx, conn, lo, nil, 64)
			if err != nil {
				t.Fatal(err)
			}
			if len(pk) == 0 {
				break
			}
			for _, k := range pk {
				parts, err := st.decodeKey(k)
				if err != nil {
					t.Fatal(err)
				}
				keys = append(keys, parts)
			}
			hi := pk[len(pk)-1]
			segs = append(segs, Segment{Lo: lo, Hi: &hi})
			lo = &hi
		}
		segs[len(segs)-1].Hi = nil
		r := &splitReader[Change]{conn: conn, t: st}
		got, err := r.findSegments(segs, keys)
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range got {
			if s != i/64 {
				t.Fatalf("%s: key %d %v is in segment %d, want %d", kk.name, i, keys[i], s, i/64)
			}
		}
	}
}

// TestCDCTruncateEndsTheJob: a TRUNCATE of the captured table ends the
// job at once (no restarts: a restore would meet it again), naming it.
func TestCDCTruncateEndsTheJob(t *testing.T) {
	url := needServer(t)
	table := newTable(t, "cdctrunc", "id bigint PRIMARY KEY, v bigint NOT NULL")
	mustExec(t, "INSERT INTO "+table+" SELECT g, 0 FROM generate_series(1, 100) g")
	slot, pub := "s_"+table, "p_"+table
	dropSlot(t, url, slot, pub)
	src, err := NewCDCSource(url, table, Slot(slot), Publication(pub), CreateSlot(true), CreatePublication(true))
	if err != nil {
		t.Fatal(err)
	}
	store := testsink.NewStore[Change]()
	env := stream.New(stream.CheckpointEvery(50*time.Millisecond),
		stream.Restart(restart.Exponential(20*time.Millisecond, time.Second, 20)), stream.Logger(stream.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, src, watermark.None[Change](), "cdc"), testsink.NewTwoPhase(store), "out")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	h, err := env.Start(ctx, "trunc")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { h.Cancel(); _, _ = h.Wait() }()
	for i := 0; i < 1000 && len(store.Committed()) < 100; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	mustExec(t, "TRUNCATE "+table)
	select {
	case <-h.Done():
	case <-ctx.Done():
		t.Fatal("the job did not end after the TRUNCATE")
	}
	res, err := h.Wait()
	if !errors.Is(err, restart.ErrUnrecoverable) || !strings.Contains(fmt.Sprint(err), "truncated") || res.Restarts != 0 {
		t.Fatalf("the job ended with %v after %d restarts; want the TRUNCATE, unrecoverable, at once", err, res.Restarts)
	}
}

// TestSourceUnrecoverable: the sources' setup errors a restart cannot fix
// are restart.ErrUnrecoverable with their message unchanged; others not.
func TestSourceUnrecoverable(t *testing.T) {
	for _, e := range []error{ErrWALLevel, ErrSlotNotFound, ErrPublicationNotFound, ErrSlotAhead, ErrTableNotFound, ErrColumnNotFound, ErrInvalidConfig} {
		err := fmt.Errorf("postgres CDC source: x: %w", e)
		m := sourceUnrecoverable(err)
		if !errors.Is(m, restart.ErrUnrecoverable) || !errors.Is(m, e) || m.Error() != err.Error() {
			t.Errorf("sourceUnrecoverable(%v) = %v", err, m)
		}
	}
	if err := sourceUnrecoverable(errors.New("connection refused")); errors.Is(err, restart.ErrUnrecoverable) {
		t.Errorf("a refused connection is unrecoverable")
	}
	if sourceUnrecoverable(nil) != nil {
		t.Error("nil is not nil")
	}
}
