package hive_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluice-io/sluice/connectors/file"
	"github.com/sluice-io/sluice/connectors/hive"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// metastore returns the real metastore's address or skips t.
func metastore(t testing.TB) string {
	t.Helper()
	a := os.Getenv("SLUICE_HIVE_METASTORE")
	if a == "" {
		t.Skip("SLUICE_HIVE_METASTORE is not set: start one with `eval \"$(scripts/hive-metastore.sh start)\"; export SLUICE_HIVE_METASTORE SLUICE_HIVE_METASTORE_RUN` (scripts/test.sh does)")
	}
	return a
}

var seq atomic.Int64

// newTable creates a fresh database and an external JSON table in it,
// partitioned by keys, and returns the database, the table and its
// location.
func newTable(t *testing.T, addr string, keys ...string) (db, table, loc string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := hive.NewClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n := seq.Add(1)
	db = fmt.Sprintf("t%d_%d", time.Now().UnixNano()%1e9, n)
	loc = t.TempDir()
	if err := c.CreateDatabase(ctx, db, "file://"+loc); err != nil {
		t.Fatal(err)
	}
	pk := make([]hive.Column, 0, len(keys))
	for _, k := range keys {
		pk = append(pk, hive.Column{Name: k, Type: "string"})
	}
	table = "events"
	if err := c.CreateExternalTable(ctx, hive.TableSpec{
		DB: db, Name: table, Location: "file://" + loc + "/events",
		Columns:       []hive.Column{{Name: "id", Type: "bigint"}, {Name: "user", Type: "string"}},
		PartitionKeys: pk,
	}); err != nil {
		t.Fatal(err)
	}
	return db, table, loc + "/events"
}

func part(base string, kv ...string) file.Partition {
	var p file.Partition
	var segs []string
	for i := 0; i+1 < len(kv); i += 2 {
		p.Values = append(p.Values, file.PartitionValue{Name: kv[i], Value: kv[i+1]})
		segs = append(segs, kv[i]+"="+kv[i+1])
	}
	p.Path = strings.Join(segs, "/")
	p.Location = base + "/" + p.Path
	return p
}

func committer(t *testing.T, addr, db, table string, opts ...hive.Option) *hive.Committer {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pc, err := hive.NewPartitionCommitter(ctx, addr, db, table, opts...)
	if err != nil {
		t.Fatal(err)
	}
	c := pc.(*hive.Committer)
	t.Cleanup(func() { c.Close() })
	return c
}

// partitions lists the table's partitions through a client of its own,
// sorted by values, as "v1/v2=location" strings.
func partitions(t *testing.T, addr, db, table string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := hive.NewClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ps, err := c.Partitions(ctx, db, table)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, p := range ps {
		out = append(out, strings.Join(p.Values, "/")+"="+strings.TrimPrefix(p.Location, "file:"))
	}
	slices.Sort(out)
	return out
}

func TestCommitAndReadBack(t *testing.T) {
	addr := metastore(t)
	db, table, loc := newTable(t, addr, "dt", "hr")
	pc := committer(t, addr, db, table, hive.WithPartitionKeys("dt", "hr"))
	if got := pc.PartitionKeys(); !slices.Equal(got, []string{"dt", "hr"}) {
		t.Fatalf("partition keys %v", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ps := []file.Partition{
		part(loc, "dt", "2026-11-30", "hr", "13"),
		part(loc, "dt", "2026-11-30", "hr", "14"),
		part(loc, "dt", "2026-12-01", "hr", "00"),
	}
	for _, p := range ps {
		if err := pc.CommitPartition(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{
		"2026-11-30/13=" + loc + "/dt=2026-11-30/hr=13",
		"2026-11-30/14=" + loc + "/dt=2026-11-30/hr=14",
		"2026-12-01/00=" + loc + "/dt=2026-12-01/hr=00",
	}
	if got := partitions(t, addr, db, table); !slices.Equal(got, want) {
		t.Fatalf("partitions\n got %q\nwant %q", got, want)
	}

	c, err := hive.NewClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got, found, err := c.Partition(ctx, db, table, []string{"2026-11-30", "14"})
	if err != nil || !found {
		t.Fatalf("get_partition: found %v, %v", found, err)
	}
	if !strings.HasSuffix(got.Location, loc+"/dt=2026-11-30/hr=14") || !slices.Equal(got.Values, []string{"2026-11-30", "14"}) {
		t.Fatalf("get_partition: %+v", got)
	}
	if _, found, err := c.Partition(ctx, db, table, []string{"2026-11-30", "15"}); err != nil || found {
		t.Fatalf("missing partition: found %v, %v", found, err)
	}
	tb, err := c.Table(ctx, db, table)
	if err != nil {
		t.Fatal(err)
	}
	if tb.Type != "EXTERNAL_TABLE" || !slices.Equal(tb.PartitionKeys, []string{"dt", "hr"}) {
		t.Fatalf("table %+v", tb)
	}
}

func TestCommitIdempotent(t *testing.T) {
	addr := metastore(t)
	db, table, loc := newTable(t, addr, "dt")
	pc := committer(t, addr, db, table)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p := part(loc, "dt", "2026-11-30")
	for range 3 {
		if err := pc.CommitPartition(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	// a second committer (a restarted job) commits it again
	if err := committer(t, addr, db, table).CommitPartition(ctx, p); err != nil {
		t.Fatal(err)
	}
	want := []string{"2026-11-30=" + loc + "/dt=2026-11-30"}
	if got := partitions(t, addr, db, table); !slices.Equal(got, want) {
		t.Fatalf("partitions\n got %q\nwant %q", got, want)
	}
	// the same partition at another location: moved there
	moved := p
	moved.Location = loc + "-v2/dt=2026-11-30/"
	if err := pc.CommitPartition(ctx, moved); err != nil {
		t.Fatal(err)
	}
	want = []string{"2026-11-30=" + loc + "-v2/dt=2026-11-30"}
	if got := partitions(t, addr, db, table); !slices.Equal(got, want) {
		t.Fatalf("after a move\n got %q\nwant %q", got, want)
	}
}

func TestCommitValuesInKeyOrder(t *testing.T) {
	addr := metastore(t)
	db, table, loc := newTable(t, addr, "dt", "hr")
	pc := committer(t, addr, db, table)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// directory order differs from the table's key order; names match
	// case-insensitively
	p := part(loc, "HR", "07", "dt", "2026-11-30")
	if err := pc.CommitPartition(ctx, p); err != nil {
		t.Fatal(err)
	}
	want := []string{"2026-11-30/07=" + loc + "/HR=07/dt=2026-11-30"}
	if got := partitions(t, addr, db, table); !slices.Equal(got, want) {
		t.Fatalf("partitions\n got %q\nwant %q", got, want)
	}
}

func TestCommitErrors(t *testing.T) {
	addr := metastore(t)
	db, table, loc := newTable(t, addr, "dt", "hr")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	_, err := hive.NewPartitionCommitter(ctx, addr, db, "nope")
	if !errors.Is(err, hive.ErrNoSuchTable) || !strings.Contains(err.Error(), db+".nope") {
		t.Errorf("missing table: %v", err)
	}
	_, err = hive.NewPartitionCommitter(ctx, addr, "no_such_db", table)
	if !errors.Is(err, hive.ErrNoSuchTable) {
		t.Errorf("missing database: %v", err)
	}
	_, err = hive.NewPartitionCommitter(ctx, addr, db, table, hive.WithPartitionKeys("dt"))
	if !errors.Is(err, hive.ErrPartitionKeys) || !strings.Contains(err.Error(), "the sink's partitions are dt, table "+db+"."+table) ||
		!strings.Contains(err.Error(), "partitioned by dt/hr") {
		t.Errorf("WithPartitionKeys(dt): %v", err)
	}
	_, err = hive.NewPartitionCommitter(ctx, addr, db, table, hive.WithPartitionKeys("hr", "dt"))
	if !errors.Is(err, hive.ErrPartitionKeys) {
		t.Errorf("WithPartitionKeys(hr, dt): %v", err)
	}

	pc := committer(t, addr, db, table)
	for _, p := range []file.Partition{
		part(loc, "dt", "2026-11-30"),
		part(loc, "dt", "2026-11-30", "hour", "13"),
		part(loc, "dt", "2026-11-30", "hr", "13", "min", "05"),
		part(loc, "dt", "2026-11-30", "dt", "2026-12-01"),
	} {
		err := pc.CommitPartition(ctx, p)
		if !errors.Is(err, hive.ErrPartitionKeys) || !strings.Contains(err.Error(), p.Path) {
			t.Errorf("partition %s: %v", p.Path, err)
		}
	}
	if got := partitions(t, addr, db, table); len(got) != 0 {
		t.Errorf("partitions after failed commits: %q", got)
	}

	// an unpartitioned table
	c, err := hive.NewClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.CreateExternalTable(ctx, hive.TableSpec{DB: db, Name: "flat", Location: "file://" + loc + "-flat",
		Columns: []hive.Column{{Name: "id", Type: "bigint"}}}); err != nil {
		t.Fatal(err)
	}
	_, err = hive.NewPartitionCommitter(ctx, addr, db, "flat")
	if !errors.Is(err, hive.ErrPartitionKeys) || !strings.Contains(err.Error(), "not partitioned") {
		t.Errorf("unpartitioned table: %v", err)
	}
}

func TestUnreachable(t *testing.T) {
	// a loopback port that nobody listens on
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	_, err = hive.NewPartitionCommitter(ctx, addr, "db", "t", hive.RetryTimeout(time.Second), hive.Backoff(50*time.Millisecond, 200*time.Millisecond))
	if !errors.Is(err, hive.ErrUnreachable) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("unreachable metastore: %v", err)
	}
	t.Logf("gave up after %v: %v", time.Since(start), err)

	// the context ends the retries
	ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	_, err = hive.NewPartitionCommitter(ctx2, addr, "db", "t", hive.RetryTimeout(time.Minute))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("context deadline: %v", err)
	}
	for _, o := range []hive.Option{hive.RetryTimeout(0), hive.CallTimeout(-1), hive.Backoff(time.Second, time.Millisecond), hive.WithPartitionKeys()} {
		if _, err := hive.NewClient(addr, o); !errors.Is(err, hive.ErrInvalidConfig) {
			t.Errorf("bad option: %v", err)
		}
	}
}

// metastoreScript runs scripts/hive-metastore.sh CMD on the test's
// metastore (its run dir from SLUICE_HIVE_METASTORE_RUN).
func metastoreScript(t *testing.T, cmd string) {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	script := filepath.Join(filepath.Dir(self), "..", "..", "scripts", "hive-metastore.sh")
	out, err := exec.Command(script, cmd).CombinedOutput()
	if err != nil {
		t.Fatalf("hive-metastore.sh %s: %v\n%s", cmd, err, out)
	}
}

// TestCommitAcrossMetastoreCrash kills the metastore with SIGKILL between
// commits and while a commit waits, restarts it on its Derby database, and
// checks that the retried commit lands and every partition is there once.
func TestCommitAcrossMetastoreCrash(t *testing.T) {
	addr := metastore(t)
	if os.Getenv("SLUICE_HIVE_METASTORE_RUN") == "" {
		t.Skip("SLUICE_HIVE_METASTORE_RUN is not set: the test restarts the metastore of that run dir")
	}
	if testing.Short() {
		t.Skip("restarts the metastore")
	}
	db, table, loc := newTable(t, addr, "dt")
	pc := committer(t, addr, db, table, hive.RetryTimeout(5*time.Minute), hive.CallTimeout(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var want []string
	commit := func(day string) error {
		p := part(loc, "dt", day)
		want = append(want, day+"="+p.Location)
		return pc.CommitPartition(ctx, p)
	}
	for _, d := range []string{"2026-11-01", "2026-11-02"} {
		if err := commit(d); err != nil {
			t.Fatal(err)
		}
	}

	metastoreScript(t, "kill9")
	// the committer's connection is dead; this commit retries until the
	// metastore is back
	done := make(chan error, 1)
	go func() { done <- commit("2026-11-03") }()
	time.Sleep(2 * time.Second)
	metastoreScript(t, "restart")
	if err := <-done; err != nil {
		t.Fatalf("commit across the restart: %v", err)
	}
	// a repeated commit of an earlier partition (a job restarted from an
	// older checkpoint) and a new one
	if err := pc.CommitPartition(ctx, part(loc, "dt", "2026-11-02")); err != nil {
		t.Fatal(err)
	}
	if err := commit("2026-11-04"); err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	if got := partitions(t, addr, db, table); !slices.Equal(got, want) {
		t.Fatalf("partitions after the crash\n got %q\nwant %q", got, want)
	}
}

// TestCommitRelativeLocation: a relative local location is registered as
// an absolute path; CloseAfterCall leaves no connection open between
// commits and still commits.
func TestCommitRelativeLocation(t *testing.T) {
	addr := metastore(t)
	db, table, _ := newTable(t, addr, "dt")
	pc := committer(t, addr, db, table, hive.CloseAfterCall())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := pc.CommitPartition(ctx, part("out", "dt", "2026-11-30")); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"2026-11-30=" + filepath.Join(wd, "out", "dt=2026-11-30")}
	if got := partitions(t, addr, db, table); !slices.Equal(got, want) {
		t.Fatalf("partitions\n got %q\nwant %q", got, want)
	}
}
