package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectortest/fakes"
	"github.com/sluice-io/sluice/sink"
)

// request is a sink.CommitRequest that records the committer's verdict.
type request struct {
	c       committable
	retries int
	verdict string // "", "already", "retry", "known", "unknown"
	err     error
}

func (r *request) Committable() committable          { return r.c }
func (r *request) CheckpointID() int64               { return r.c.Checkpoint }
func (r *request) Retries() int                      { return r.retries }
func (r *request) RetryLater()                       { r.verdict = "retry" }
func (r *request) UpdateAndRetryLater(c committable) { r.c, r.verdict = c, "retry" }
func (r *request) SignalAlreadyCommitted()           { r.verdict = "already" }
func (r *request) SignalFailedWithKnownReason(err error) {
	r.verdict, r.err = "known", err
}
func (r *request) SignalFailedWithUnknownReason(err error) {
	r.verdict, r.err = "unknown", err
}

func commit(t *testing.T, c sink.Committer[committable], cs ...committable) []*request {
	t.Helper()
	reqs := make([]sink.CommitRequest[committable], len(cs))
	out := make([]*request, len(cs))
	for i, cm := range cs {
		out[i] = &request{c: cm}
		reqs[i] = out[i]
	}
	if err := c.Commit(t.Context(), reqs); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	return out
}

// kvSink is a sink of (k, v) pairs into table (k bigint, v text).
func kvSink(t *testing.T, table string, opts ...SinkOption) *pgSink[[2]any] {
	t.Helper()
	s, err := newRowSink(needServer(t), table, func(r [2]any) ([]any, error) { return r[:], nil },
		append([]SinkOption{Columns("k", "v")}, opts...))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// prepare writes rows with a new writer of ic and prepares them at
// checkpoint id; the writer is closed (its prepared transaction stays).
func prepareRows(t *testing.T, s *pgSink[[2]any], w *writer[[2]any], id int64, rows ...[2]any) []committable {
	t.Helper()
	for _, r := range rows {
		if err := w.Write(t.Context(), r, sink.Meta{}); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := w.PrepareCommit(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func newTestWriter(t *testing.T, s *pgSink[[2]any], ic *fakes.InitContext) *writer[[2]any] {
	t.Helper()
	w, err := s.newWriter(t.Context(), ic)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

func keys(t *testing.T, table string) []int64 {
	t.Helper()
	type k struct{ K int64 }
	rows, err := query[k](t.Context(), "SELECT k FROM "+table+" ORDER BY k")
	if err != nil {
		t.Fatal(err)
	}
	out := make([]int64, len(rows))
	for i, r := range rows {
		out[i] = r.K
	}
	return out
}

func gidsWithPrefix(t *testing.T, prefix string) []string {
	t.Helper()
	all, err := preparedGIDs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, g := range all {
		if strings.HasPrefix(g, prefix) {
			out = append(out, g)
		}
	}
	return out
}

// TestLeftoversOfHigherParallelism: a run at parallelism 4 prepared
// checkpoints 2 and 3 on every subtask and crashed after checkpoint 2
// completed (1 was committed). A restore of checkpoint 2 at parallelism 2:
// the new writers roll back what every old subtask (0–3) prepared at 3,
// keep what was prepared at 2, which the committer commits from the
// restored committables. Then a fresh start (nothing restored) at
// parallelism 1 rolls back everything of the prefix.
func TestLeftoversOfHigherParallelism(t *testing.T) {
	table := newTable(t, "leftover", "k bigint NOT NULL, v text")
	s := kvSink(t, table)
	const job = "leftovertest1234"
	var restored []committable // checkpoint 2's committables
	cm, err := s.CreateCommitter(t.Context(), &fakes.InitContext{ID: job})
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	for sub := range 4 {
		w := newTestWriter(t, s, &fakes.InitContext{ID: job, Subtask: sub, Parallel: 4})
		c1 := prepareRows(t, s, w, 1, [2]any{int64(100 + sub), "c1"})
		restored = append(restored, prepareRows(t, s, w, 2, [2]any{int64(200 + sub), "c2"})...)
		prepareRows(t, s, w, 3, [2]any{int64(300 + sub), "c3"})
		for _, r := range commit(t, cm, c1...) {
			if r.verdict != "" {
				t.Fatalf("commit %v: %s %v", r.c.GID, r.verdict, r.err)
			}
		}
	}
	prefix := DefaultTransactionPrefix(&fakes.InitContext{ID: job})
	if got := gidsWithPrefix(t, prefix); len(got) != 8 {
		t.Fatalf("prepared before the restore: %v, want 8 (checkpoints 2 and 3 of 4 subtasks)", got)
	}
	// The restore at parallelism 2: writers first, as the runtime does.
	for sub := range 2 {
		newTestWriter(t, s, &fakes.InitContext{ID: job, Subtask: sub, Parallel: 2, Restored: 2, HasRestored: true})
	}
	got := gidsWithPrefix(t, prefix)
	var want []string
	for sub := range 4 {
		want = append(want, fmt.Sprintf("%s%d-2", prefix, sub))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("after the restore at parallelism 2 prepared are %v, want checkpoint 2's %v", got, want)
	}
	for _, r := range commit(t, cm, restored...) {
		if r.verdict != "" {
			t.Fatalf("commit restored %v: %s %v", r.c.GID, r.verdict, r.err)
		}
	}
	if k := keys(t, table); !slices.Equal(k, []int64{100, 101, 102, 103, 200, 201, 202, 203}) {
		t.Errorf("table keys %v, want checkpoints 1 and 2 of subtasks 0–3", k)
	}
	// Fresh start at parallelism 1 after more was prepared: all rolled back.
	w := newTestWriter(t, s, &fakes.InitContext{ID: job, Subtask: 0, Parallel: 3})
	prepareRows(t, s, w, 7, [2]any{int64(700), "c7"})
	newTestWriter(t, s, &fakes.InitContext{ID: job, Subtask: 0, Parallel: 1})
	if got := gidsWithPrefix(t, prefix); len(got) != 0 {
		t.Errorf("after a fresh start prepared are %v, want none", got)
	}
}

// TestCommitTwice: committing a committed prepared transaction again is a
// success (SignalAlreadyCommitted) and adds nothing; committing one that
// was rolled back fails the job with ErrRolledBack.
func TestCommitTwice(t *testing.T) {
	table := newTable(t, "twice", "k bigint NOT NULL, v text")
	s := kvSink(t, table)
	ic := &fakes.InitContext{ID: "committwice00001"}
	w := newTestWriter(t, s, ic)
	cs := prepareRows(t, s, w, 1, [2]any{int64(1), "a"}, [2]any{int64(2), "b"})
	cm, err := s.CreateCommitter(t.Context(), ic)
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	if r := commit(t, cm, cs...)[0]; r.verdict != "" {
		t.Fatalf("first commit: %s %v", r.verdict, r.err)
	}
	// A new committer, as after a restart.
	cm2, _ := s.CreateCommitter(t.Context(), ic)
	defer cm2.Close()
	if r := commit(t, cm2, cs...)[0]; r.verdict != "already" {
		t.Errorf("second commit: verdict %q (%v), want already committed", r.verdict, r.err)
	}
	if k := keys(t, table); !slices.Equal(k, []int64{1, 2}) {
		t.Errorf("table keys %v, want [1 2]", k)
	}

	rolled := prepareRows(t, s, w, 2, [2]any{int64(3), "c"})
	mustExec(t, "ROLLBACK PREPARED '"+rolled[0].GID+"'")
	r := commit(t, cm2, rolled...)[0]
	if r.verdict != "unknown" || !errors.Is(r.err, ErrRolledBack) {
		t.Errorf("commit of a rolled back transaction: verdict %q, error %v; want unknown with ErrRolledBack", r.verdict, r.err)
	} else {
		t.Logf("the error: %v", r.err)
	}
}

// TestOldestPreparedAgeMetric: the gauge is 0 without a prepared
// transaction, positive while one waits for its commit, 0 after it.
func TestOldestPreparedAgeMetric(t *testing.T) {
	table := newTable(t, "metric", "k bigint NOT NULL, v text")
	s := kvSink(t, table)
	ic := &fakes.InitContext{ID: "metrictest000001"}
	w := newTestWriter(t, s, ic)
	age := func() int64 {
		return s.prepared.oldestAge(0, time.Now().Add(time.Second)) // a second later
	}
	if a := age(); a != 0 {
		t.Fatalf("age before any prepare: %d", a)
	}
	cs := prepareRows(t, s, w, 1, [2]any{int64(1), "a"})
	if a := age(); a < 1000 {
		t.Errorf("age a second after the prepare: %d ms, want >= 1000", a)
	}
	gauge := func() (int64, bool) {
		for _, smp := range ic.Registry.Snapshot() {
			if smp.Name == MetricOldestPreparedAge && smp.Gauge {
				return smp.Value, true
			}
		}
		return 0, false
	}
	if _, ok := gauge(); !ok {
		t.Errorf("no gauge %s in the writer's metric group", MetricOldestPreparedAge)
	}
	cm, _ := s.CreateCommitter(t.Context(), ic)
	defer cm.Close()
	commit(t, cm, cs...)
	if a := age(); a != 0 {
		t.Errorf("age after the commit: %d", a)
	}
	if v, _ := gauge(); v != 0 {
		t.Errorf("gauge after the commit: %d", v)
	}
}

// TestZombieWriterFenced: a writer of an earlier attempt that was
// abandoned without Close (a hung process, kill -9 of a process whose
// connection the server has not noticed yet) still holds an open
// transaction with rows under a primary key. The next attempt's writer
// of that subtask terminates the zombie's session when it starts, so its
// rows with the same keys are not blocked by the zombie's row locks.
// Without the fence the second writer waits for ever (here: until the
// 20 s bound).
func TestZombieWriterFenced(t *testing.T) {
	table := newTable(t, "zombie", "k bigint PRIMARY KEY, v text")
	s := kvSink(t, table)
	ic := &fakes.InitContext{ID: "zombietest000001", Parallel: 2}
	zombie := newTestWriter(t, s, ic)
	for k := range int64(10) {
		if err := zombie.Write(t.Context(), [2]any{k, "zombie"}, sink.Meta{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := zombie.Flush(t.Context(), false); err != nil { // rows in the open transaction
		t.Fatal(err)
	}
	// Attempt 1 of the same subtask (and a writer of the other subtask,
	// which must leave the zombie alone... and is left alone by it).
	other := newTestWriter(t, s, &fakes.InitContext{ID: "zombietest000001", Parallel: 2, Subtask: 1, AttemptNum: 1})
	if other.conn.IsClosed() {
		t.Fatal("writer 1 closed")
	}
	next := newTestWriter(t, s, &fakes.InitContext{ID: "zombietest000001", Parallel: 2, AttemptNum: 1})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for k := range int64(10) {
		if err := next.Write(ctx, [2]any{k, "next"}, sink.Meta{}); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := next.PrepareCommit(ctx, 1)
	if err != nil {
		t.Fatalf("the next attempt's writer: %v (blocked by the zombie's transaction?)", err)
	}
	cm, _ := s.CreateCommitter(t.Context(), ic)
	defer cm.Close()
	commit(t, cm, cs...)
	if k := keys(t, table); len(k) != 10 {
		t.Errorf("table keys %v, want 0…9 once", k)
	}
	if err := zombie.Flush(t.Context(), false); err == nil {
		zombie.rows = append(zombie.rows, []any{int64(99), "x"})
		zombie.metas = append(zombie.metas, rowMeta{})
		if err := zombie.Flush(t.Context(), false); err == nil {
			t.Errorf("the zombie's connection still works")
		}
	}
}

// TestUnreachableServer: a writer gives up after SetupTimeout, naming the
// address and the cause.
func TestUnreachableServer(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	s, err := newRowSink("postgres://u:p@"+addr+"/db?sslmode=disable", "t", func(r [2]any) ([]any, error) { return r[:], nil },
		[]SinkOption{Columns("k", "v"), SetupTimeout(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.newWriter(t.Context(), &fakes.InitContext{})
	wantErr(t, err, addr[strings.LastIndex(addr, ":")+1:], "connect to 127.0.0.1", "SetupTimeout (1s) expired", "refused")
}
