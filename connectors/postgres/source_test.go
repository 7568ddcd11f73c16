package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/connectortest/fakes"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// fillTable creates a table of n rows of many types: id 1 … n (id 7 of
// every 1000 has NULLs in every other column).
func fillTable(t *testing.T, prefix string, n int) string {
	t.Helper()
	table := newTable(t, prefix, `id bigint PRIMARY KEY, i integer, f double precision, n numeric, s text,
		b boolean, ts timestamptz, d date, by bytea, j jsonb, u uuid`)
	mustExec(t, fmt.Sprintf(`INSERT INTO %s
		SELECT g, g*2, g/4.0, (g::numeric * 1.25), 'row ' || g, g %% 2 = 0,
			timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second', date '2024-01-01' + (g %% 365),
			decode(lpad(to_hex(g), 8, '0'), 'hex'), jsonb_build_object('g', g, 'half', g / 2.0),
			md5(g::text)::uuid
		FROM generate_series(1, %d) g`, table, n),
		fmt.Sprintf("UPDATE %s SET i = NULL, f = NULL, n = NULL, s = NULL, b = NULL, ts = NULL, d = NULL, by = NULL, j = NULL, u = NULL WHERE id %% 1000 = 7", table))
	return table
}

// checkRow checks the decoded row of id against fillTable's values.
func checkRow(row map[string]any) error {
	id, ok := row["id"].(int64)
	if !ok {
		return fmt.Errorf("id %#v is not an int64", row["id"])
	}
	if id%1000 == 7 {
		for _, c := range []string{"i", "f", "n", "s", "b", "ts", "d", "by", "j", "u"} {
			if v, ok := row[c]; !ok || v != nil {
				return fmt.Errorf("id %d column %s: %#v, want nil", id, c, v)
			}
		}
		return nil
	}
	ts := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(id) * time.Second)
	want := map[string]any{"i": id * 2, "f": float64(id) / 4, "s": fmt.Sprintf("row %d", id), "b": id%2 == 0}
	for c, w := range want {
		if row[c] != w {
			return fmt.Errorf("id %d column %s: %#v, want %#v", id, c, row[c], w)
		}
	}
	if n, ok := row["n"].(json.Number); !ok || n.String() != fmt.Sprintf("%d.%02d", id*125/100, id*125%100) {
		return fmt.Errorf("id %d column n: %#v", id, row["n"])
	}
	if tm, ok := row["ts"].(time.Time); !ok || !tm.Equal(ts) {
		return fmt.Errorf("id %d column ts: %#v, want %v", id, row["ts"], ts)
	}
	if _, ok := row["d"].(time.Time); !ok {
		return fmt.Errorf("id %d column d: %#v", id, row["d"])
	}
	if by, ok := row["by"].([]byte); !ok || len(by) != 4 || int64(by[0])<<24|int64(by[1])<<16|int64(by[2])<<8|int64(by[3]) != id {
		return fmt.Errorf("id %d column by: %#v", id, row["by"])
	}
	if j, ok := row["j"].(map[string]any); !ok || j["g"] != json.Number(fmt.Sprint(id)) {
		return fmt.Errorf("id %d column j: %#v", id, row["j"])
	}
	if u, ok := row["u"].(string); !ok || len(u) != 36 {
		return fmt.Errorf("id %d column u: %#v", id, row["u"])
	}
	return nil
}

// TestSnapshotSourceUnderFailures reads a 50k-row table in 17 chunks of
// 3000 rows, each in pages of 1000, at parallelism 3 into an exactly-once
// test sink, while readers fail after N records (mid-chunk) and during a
// checkpoint: every row comes out exactly once with its values.
func TestSnapshotSourceUnderFailures(t *testing.T) {
	url := needServer(t)
	const n = 50_000
	table := fillTable(t, "snap", n)
	src, err := NewSnapshotSource(url, table, ChunkSize(3000), FetchSize(1000))
	if err != nil {
		t.Fatal(err)
	}
	plan := faultinject.NewPlan(
		faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: 0, Records: 4500},
		faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: 1, Records: 7200},
		faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: 2, Records: 2100},
		faultinject.Fault{Kind: faultinject.DuringSnapshot, Subtask: faultinject.AnySubtask, Checkpoint: 3},
	)
	store := testsink.NewStore[Change]()
	env := stream.New(stream.Parallelism(3), stream.CheckpointEvery(20*time.Millisecond),
		stream.Restart(restart.Exponential(20*time.Millisecond, time.Second, 20)), stream.Logger(stream.DiscardLogger()))
	s := stream.FromSource(env, faultinject.WrapSource(src, plan), watermark.None[Change](), "pg")
	s = stream.Map(s, func(c Change) Change { time.Sleep(20 * time.Microsecond); return c }) // let checkpoints happen
	stream.SinkTo(s, testsink.NewTwoPhase(store), "out")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	res, err := env.Execute(ctx, "snapshot")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(plan.Fired()); got < 3 {
		t.Errorf("only %d faults fired (%v)", got, plan.Fired())
	}
	t.Logf("%d restarts, %d checkpoints", res.Restarts, res.Checkpoints.Completed)
	out, err := store.Final()
	if err != nil {
		t.Fatal(err)
	}
	checkOnce(t, out, n)
}

// checkOnce checks that out holds ids 1 … n once each, with their values.
func checkOnce(t *testing.T, out []Change, n int) {
	t.Helper()
	seen := make(map[int64]int, n)
	bad := 0
	for _, c := range out {
		if c.Op != OpRead {
			t.Fatalf("op %v in a snapshot", c.Op)
		}
		id, _ := c.Key.(int64)
		seen[id]++
		if err := checkRow(c.After); err != nil && bad < 5 {
			bad++
			t.Error(err)
		}
	}
	missing, twice := 0, 0
	for id := int64(1); id <= int64(n); id++ {
		switch seen[id] {
		case 0:
			missing++
		case 1:
		default:
			twice++
		}
	}
	if missing > 0 || twice > 0 || len(out) != n {
		t.Fatalf("got %d rows for %d: %d missing, %d more than once", len(out), n, missing, twice)
	}
}

// pollUntil polls r into out until done or a bound (count and time).
func pollUntil[T any](t *testing.T, r source.Reader[T, Split], out source.Output[T], done func() bool) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for i := 0; i < 100_000 && !done(); i++ {
		st, err := r.PollNext(out)
		if err != nil {
			t.Fatal(err)
		}
		if st == source.EndOfInput {
			return
		}
		if st == source.NothingAvailable && !done() {
			select {
			case <-r.Available():
			case <-deadline:
				t.Fatal("no progress within 30s")
			}
		}
	}
	if !done() {
		t.Fatal("not done after the bound")
	}
}

// TestSnapshotResumesMidChunk reads one page of a chunk, snapshots the
// reader, and resumes the snapshot's split in a new reader: the chunk
// comes out whole, no row twice, and the split's position was the last
// key read (mid-chunk).
func TestSnapshotResumesMidChunk(t *testing.T) {
	url := needServer(t)
	table := fillTable(t, "midchunk", 2500)
	src, err := NewSnapshotSource(url, table, ChunkSize(2000), FetchSize(300))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	splits, err := src.(*pgSource[Change]).discover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(splits) != 2 || *splits[0].Hi != "2000" || splits[1].Lo == nil || *splits[1].Lo != "2000" || splits[1].Hi != nil {
		t.Fatalf("chunks %+v", splits)
	}
	r1, err := src.CreateReader(&fakes.ReaderContext{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r1.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r1.AddSplits(splits[:1]); err != nil {
		t.Fatal(err)
	}
	out1 := &fakes.Output[Change]{}
	pollUntil(t, r1, out1, func() bool { return len(out1.Values()) >= 300 })
	state, err := r1.SnapshotState(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := r1.Close(); err != nil {
		t.Fatal(err)
	}
	got := out1.Values()
	if len(state) != 1 || state[0].Lo == nil || *state[0].Lo != fmt.Sprint(len(got)) {
		t.Fatalf("after %d rows the split is %+v (lo %s); want position %d", len(got), state, strOr(state[0].Lo, "nil"), len(got))
	}
	r2, err := src.CreateReader(&fakes.ReaderContext{})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if err := r2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r2.AddSplits(state); err != nil {
		t.Fatal(err)
	}
	r2.NotifyNoMoreSplits()
	out2 := &fakes.Output[Change]{}
	pollUntil(t, r2, out2, func() bool { return false })
	all := append(got, out2.Values()...)
	ids := make([]int64, len(all))
	for i, c := range all {
		ids[i] = c.Key.(int64)
	}
	want := make([]int64, 2000)
	for i := range want {
		want[i] = int64(i + 1)
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("chunk 0 read as %d rows (first %v…), want ids 1 … 2000 in order once", len(ids), ids[:min(5, len(ids))])
	}
}

// TestSnapshotTextKey chunks a table by a text key: bounds and order are
// the server's (its collation), so every row comes out once.
func TestSnapshotTextKey(t *testing.T) {
	url := needServer(t)
	table := newTable(t, "textkey", "name text PRIMARY KEY, v int")
	mustExec(t, "INSERT INTO "+table+" SELECT 'k' || g || CASE WHEN g % 3 = 0 THEN ' Ä' ELSE 'b' END, g FROM generate_series(1, 5000) g")
	src, err := NewSnapshotSource(url, table, ChunkSize(700), FetchSize(256))
	if err != nil {
		t.Fatal(err)
	}
	store := testsink.NewStore[Change]()
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(20*time.Millisecond), stream.Logger(stream.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, src, watermark.None[Change](), "pg"), testsink.NewTwoPhase(store), "out")
	if _, err := env.Execute(t.Context(), "textkey"); err != nil {
		t.Fatal(err)
	}
	out, _ := store.Final()
	seen := map[int64]bool{}
	for _, c := range out {
		v := c.After["v"].(int64)
		if seen[v] {
			t.Fatalf("row %d twice", v)
		}
		seen[v] = true
	}
	if len(seen) != 5000 {
		t.Fatalf("%d rows, want 5000", len(seen))
	}
}

func TestDecodeText(t *testing.T) {
	for _, tc := range []struct {
		oid  uint32
		in   string
		want any
	}{
		{20, "-9223372036854775808", int64(math.MinInt64)},
		{23, "42", int64(42)},
		{701, "Infinity", math.Inf(1)},
		{1700, "12.50", json.Number("12.50")},
		{1700, "NaN", "NaN"},
		{16, "t", true},
		{25, "x", "x"},
	} {
		got, err := decodeText(tc.oid, []byte(tc.in))
		if err != nil || got != tc.want {
			t.Errorf("decodeText(%d, %q) = %#v, %v; want %#v", tc.oid, tc.in, got, err, tc.want)
		}
	}
	if _, err := decodeText(17, []byte("nothex")); err == nil {
		t.Error("bytea not in hex: no error")
	}
}

func TestSourceBadInput(t *testing.T) {
	url := needServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	s, err := NewSnapshotSource(url, "no_such_source_table")
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.(*pgSource[Change]).discover(ctx)
	if !errors.Is(err, ErrTableNotFound) {
		t.Errorf("error %v does not wrap ErrTableNotFound", err)
	}
	wantErr(t, err, `"no_such_source_table"`, "does not exist")

	nopk := newTable(t, "nopk", "a int, b int")
	s, _ = NewSnapshotSource(url, nopk)
	_, err = s.(*pgSource[Change]).discover(ctx)
	wantErr(t, err, nopk, "no primary key", "KeyColumn")

	comp := newTable(t, "comp", "a int, b int, c int, PRIMARY KEY (a, b)")
	s, _ = NewSnapshotSource(url, comp, KeyColumns("a", "c"))
	_, err = s.(*pgSource[Change]).discover(ctx)
	wantErr(t, err, comp, `key column "c"`, "may be NULL")

	s, _ = NewSnapshotSource(url, comp, KeyColumn("d"))
	_, err = s.(*pgSource[Change]).discover(ctx)
	wantErr(t, err, comp, `no column "d"`)

	if _, err := NewSnapshotSource(url, comp, ChunkSize(0)); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("ChunkSize(0): %v", err)
	}
	if _, err := NewCDCSource(url, comp, Slot("Bad-Name")); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("Slot(Bad-Name): %v", err)
	}
}
