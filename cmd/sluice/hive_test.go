package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/hive"
)

// hiveMetastore returns the real metastore's address or skips t.
func hiveMetastore(t *testing.T) string {
	t.Helper()
	a := os.Getenv("SLUICE_HIVE_METASTORE")
	if a == "" {
		t.Skip("SLUICE_HIVE_METASTORE is not set: start one with `eval \"$(scripts/hive-metastore.sh start)\"; export SLUICE_HIVE_METASTORE SLUICE_HIVE_METASTORE_RUN` (scripts/test.sh does)")
	}
	return a
}

// hivePartitions lists the table's partitions through a client of the
// test's own, as "values=location" strings (location without "file:").
func hivePartitions(t *testing.T, addr, db, table string) []string {
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

// TestHiveMetastorePartitionCommitKill9Resume drives the binary: datagen
// records under user=… partitions, committed with partition-commit.policy
// [success-file, metastore] to a real Hive Metastore table, killed with -9
// once some partitions are registered and resumed with --from. At the end
// every record is in the files once, and the table has each of the ten
// partitions once, at its directory, each with a _SUCCESS.
func TestHiveMetastorePartitionCommitKill9Resume(t *testing.T) {
	addr := hiveMetastore(t)
	const n = 20000 // at 1000 a second: the kill comes long before the end
	dir := t.TempDir()
	out, ckpt := filepath.Join(dir, "out"), filepath.Join(dir, "checkpoints")

	db := fmt.Sprintf("cli_%d", time.Now().UnixNano()%1e9)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := hive.NewClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.CreateDatabase(ctx, db, "file://"+dir+"/db"); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateExternalTable(ctx, hive.TableSpec{DB: db, Name: "events", Location: "file://" + out,
		Columns:       []hive.Column{{Name: "id", Type: "bigint"}},
		PartitionKeys: []hive.Column{{Name: "user", Type: "string"}}}); err != nil {
		t.Fatal(err)
	}

	file := writePipeline(t, dir, `name: hive-partition-commit
parallelism: 2
delivery: exactly-once
checkpoint: {interval: 200ms, dir: "${CKPT}"}
restart: {strategy: none}
source: {type: datagen, options: {count: 20000, splits: 2, rate: 1000}}
sink:
  type: file
  options:
    path: "${OUT}"
    partition-by: [user]
    partition-commit.policy: [success-file, metastore]
    partition-commit.trigger: process-time
    partition-commit.delay: 100ms
    hive-metastore: "${HMS}"
    hive-table: "${TABLE}"
`)
	env := []string{"OUT=" + out, "CKPT=" + ckpt, "HMS=" + addr, "TABLE=" + db + ".events"}
	p := start(t, env, "run", "--progress", "off", file)
	guard := time.Now().Add(3 * time.Minute) // a hang guard, not a timing assertion
	for len(hivePartitions(t, addr, db, "events")) < 2 {
		select {
		case <-p.done:
			t.Fatalf("sluice ended before the kill:\n%s", p.stderr())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(guard) {
			t.Fatalf("no partition registered in three minutes:\n%s", p.stderr())
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	ids, _, _ := fwCommittedIDs(t, out)
	if len(ids) == n {
		t.Fatal("the job had finished before the kill")
	}
	t.Logf("killed with %d records and %d partitions registered", len(ids), len(hivePartitions(t, addr, db, "events")))

	p = start(t, env, "run", "--progress", "off", "--from", ckpt, file)
	if code := p.wait(t); code != 0 {
		t.Fatalf("resumed run: exit %d\n%s", code, p.stderr())
	}
	ids, success, newest := fwCommittedIDs(t, out)
	for id := range int64(n) {
		if ids[id] != 1 {
			t.Fatalf("record %d is %d times in the output, want once", id, ids[id])
		}
	}
	if len(ids) != n {
		t.Fatalf("%d distinct ids, want %d", len(ids), n)
	}
	var want []string
	for part := range newest {
		if _, ok := success[part]; !ok {
			t.Errorf("partition %s has no _SUCCESS", part)
		}
		want = append(want, strings.TrimPrefix(part, "user=")+"="+filepath.Join(out, part))
	}
	slices.Sort(want)
	if len(want) != 10 {
		t.Fatalf("%d partition directories, want 10: %v", len(want), want)
	}
	if got := hivePartitions(t, addr, db, "events"); !slices.Equal(got, want) {
		t.Fatalf("metastore partitions\n got %q\nwant %q", got, want)
	}
}

// TestHiveMetastorePolicyErrors: the metastore policy's configuration
// errors name the option, and a table partitioned otherwise than
// partition-by fails the run at start, naming both.
func TestHiveMetastorePolicyErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ opts, want string }{
		{"hive-table: db.t", "hive-metastore"},
		{"hive-metastore: 127.0.0.1:9083", "hive-table"},
		{"hive-metastore: 127.0.0.1\n    hive-table: db.t", "want host:port"},
		{"hive-metastore: 127.0.0.1:9083\n    hive-table: nodot", "want db.table"},
	} {
		file := writePipeline(t, dir, `name: hive-errors
checkpoint: {interval: 200ms, dir: "${CKPT}"}
source: {type: datagen, options: {count: 10}}
sink:
  type: file
  options:
    path: "${OUT}"
    partition-by: [user]
    partition-commit.policy: [metastore]
    `+tc.opts+`
`)
		p := start(t, []string{"OUT=" + dir + "/out", "CKPT=" + dir + "/ckpt"}, "run", "--progress", "off", file)
		if code := p.wait(t); code == 0 || !strings.Contains(p.stderr(), tc.want) {
			t.Errorf("%q: exit %d, want an error naming %q:\n%s", tc.opts, code, tc.want, p.stderr())
		}
	}

	addr := hiveMetastore(t)
	db := fmt.Sprintf("clierr_%d", time.Now().UnixNano()%1e9)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := hive.NewClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.CreateDatabase(ctx, db, "file://"+dir+"/db"); err != nil {
		t.Fatal(err)
	}
	if err := c.CreateExternalTable(ctx, hive.TableSpec{DB: db, Name: "events", Location: "file://" + dir + "/out",
		Columns:       []hive.Column{{Name: "id", Type: "bigint"}},
		PartitionKeys: []hive.Column{{Name: "dt", Type: "string"}}}); err != nil {
		t.Fatal(err)
	}
	file := writePipeline(t, dir, `name: hive-errors
checkpoint: {interval: 200ms, dir: "${CKPT}"}
source: {type: datagen, options: {count: 10}}
sink:
  type: file
  options:
    path: "${OUT}"
    partition-by: [user]
    partition-commit.policy: [metastore]
    hive-metastore: "${HMS}"
    hive-table: "${TABLE}"
`)
	p := start(t, []string{"OUT=" + dir + "/out", "CKPT=" + dir + "/ckpt", "HMS=" + addr, "TABLE=" + db + ".events"}, "run", "--progress", "off", file)
	if code := p.wait(t); code == 0 || !strings.Contains(p.stderr(), "partitioned by dt") || !strings.Contains(p.stderr(), "partitions are user") {
		t.Errorf("mismatched keys: exit %d:\n%s", code, p.stderr())
	}
}
