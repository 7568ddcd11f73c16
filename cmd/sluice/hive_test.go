package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
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
	t.Parallel() // mostly waits on its processes; its topics, tables and dirs are its own
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
	atKill := hiveOutput(t, out)
	t.Logf("killed with %d records, %d partitions with _SUCCESS and %d registered", len(ids), len(atKill.success), len(hivePartitions(t, addr, db, "events")))

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
	// Late data (docs/cli.md, partition commit): records of a partition
	// committed already are written as usual and commit it again; the
	// metastore keeps it once (checked above) and its _SUCCESS is
	// written again after its last files.
	end := hiveOutput(t, out)
	late := 0
	for part := range atKill.success {
		if end.records[part] > atKill.records[part] {
			late++
		}
	}
	if late == 0 {
		t.Errorf("no partition committed before the kill got records later: the test did not exercise late data (%v at the kill, %v at the end)", atKill.records, end.records)
	}
	for part, last := range end.newest {
		if s, ok := end.success[part]; ok && s.Before(last) {
			t.Errorf("partition %s: _SUCCESS (%v) is older than its newest part file (%v): not committed again after late data", part, s, last)
		}
	}
	t.Logf("%d partitions committed before the kill got late records and were committed again", late)
}

// hiveFiles is the committed output of a file sink with one level of
// Hive-style partitions, read with encoding/json.
type hiveFiles struct {
	ids     map[int64]int        // record id → times found
	records map[string]int       // partition directory → records
	success map[string]time.Time // partition directory → its _SUCCESS's modification time
	newest  map[string]time.Time // partition directory → its newest part file's modification time
}

// hiveOutput reads the committed JSON lines part files under dir (hidden
// in-progress files left out); a record whose field named by its
// partition directory (dt=…, user=…) has another value fails t.
func hiveOutput(t *testing.T, dir string) hiveFiles {
	t.Helper()
	h := hiveFiles{ids: map[int64]int{}, records: map[string]int{}, success: map[string]time.Time{}, newest: map[string]time.Time{}}
	parts, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return h
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, pd := range parts {
		key, val, ok := strings.Cut(pd.Name(), "=")
		if !pd.IsDir() || !ok {
			continue
		}
		files, err := os.ReadDir(filepath.Join(dir, pd.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if f.IsDir() || strings.HasPrefix(f.Name(), ".") {
				continue
			}
			info, err := f.Info()
			if err != nil {
				t.Fatal(err)
			}
			if f.Name() == "_SUCCESS" {
				h.success[pd.Name()] = info.ModTime()
				continue
			}
			if info.ModTime().After(h.newest[pd.Name()]) {
				h.newest[pd.Name()] = info.ModTime()
			}
			b, err := os.ReadFile(filepath.Join(dir, pd.Name(), f.Name()))
			if err != nil {
				t.Fatal(err)
			}
			for line := range strings.SplitSeq(strings.TrimSpace(string(b)), "\n") {
				if line == "" {
					continue
				}
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("%s/%s: %q: %v", pd.Name(), f.Name(), line, err)
				}
				id, _ := rec["id"].(float64)
				if fmt.Sprint(rec[key]) != val {
					t.Fatalf("%s/%s: record %v is in the partition of %s=%s", pd.Name(), f.Name(), rec, key, val)
				}
				h.ids[int64(id)]++
				h.records[pd.Name()]++
			}
		}
	}
	return h
}

// TestHiveMetastorePartitionTimeKill9Resume: with the partition-time
// trigger, a partition is complete when the watermark passes its time
// plus the delay; the CLI's sources emit no watermark before the end of
// their input (docs/cli.md), so no partition may get its _SUCCESS or
// its metastore registration before the input ends, however many of its
// files are committed. Datagen records under ten dt=… partitions (a map
// transform gives each record its day), policies [success-file,
// metastore], killed with -9 once thousands of records are committed:
// no _SUCCESS, no registered partition. Resumed with --from to the end:
// each record once, every partition registered once at its directory,
// with a _SUCCESS written after its last part file.
func TestHiveMetastorePartitionTimeKill9Resume(t *testing.T) {
	t.Parallel() // mostly waits on its processes; its topics, tables and dirs are its own
	addr := hiveMetastore(t)
	const n = 20000
	dir := t.TempDir()
	out, ckpt := filepath.Join(dir, "out"), filepath.Join(dir, "checkpoints")
	db := fmt.Sprintf("clipt_%d", time.Now().UnixNano()%1e9)
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
		PartitionKeys: []hive.Column{{Name: "dt", Type: "string"}}}); err != nil {
		t.Fatal(err)
	}
	file := writePipeline(t, dir, `name: hive-partition-time
parallelism: 2
delivery: exactly-once
checkpoint: {interval: 200ms, dir: "${CKPT}"}
restart: {strategy: none}
source: {type: datagen, options: {count: 20000, splits: 2, rate: 1000}}
transforms:
  - map: '{"id": id, "dt": "2026-11-" + string(20 + id % 10)}'
sink:
  type: file
  options:
    path: "${OUT}"
    partition-by: [dt]
    partition-commit.policy: [success-file, metastore]
    partition-commit.trigger: partition-time
    partition-commit.delay: 1h
    hive-metastore: "${HMS}"
    hive-table: "${TABLE}"
`)
	env := []string{"OUT=" + out, "CKPT=" + ckpt, "HMS=" + addr, "TABLE=" + db + ".events"}
	p := start(t, env, "run", "--progress", "off", file)
	guard := time.Now().Add(3 * time.Minute) // a hang guard, not a timing assertion
	for len(hiveOutput(t, out).ids) < 3000 {
		select {
		case <-p.done:
			t.Fatalf("sluice ended before the kill:\n%s", p.stderr())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(guard) {
			t.Fatalf("not 3000 records committed in three minutes:\n%s", p.stderr())
		}
	}
	// the metastore first: a registration is the last step of a commit
	regs := hivePartitions(t, addr, db, "events")
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	atKill := hiveOutput(t, out)
	if len(atKill.ids) == n {
		t.Fatal("the job had finished before the kill")
	}
	if len(atKill.success) != 0 || len(regs) != 0 {
		t.Fatalf("before the end of the input (%d of %d records committed, in %d partitions): _SUCCESS in %v, metastore partitions %q; want none",
			len(atKill.ids), n, len(atKill.records), slices.Collect(maps.Keys(atKill.success)), regs)
	}
	t.Logf("killed with %d records committed in %d partitions, none complete: no _SUCCESS, no metastore partition", len(atKill.ids), len(atKill.records))

	p = start(t, env, "run", "--progress", "off", "--from", ckpt, file)
	if code := p.wait(t); code != 0 {
		t.Fatalf("resumed run: exit %d\n%s", code, p.stderr())
	}
	end := hiveOutput(t, out)
	for id := range int64(n) {
		if end.ids[id] != 1 {
			t.Fatalf("record %d is %d times in the output, want once", id, end.ids[id])
		}
	}
	if len(end.ids) != n {
		t.Fatalf("%d distinct ids, want %d", len(end.ids), n)
	}
	var want []string
	for part, last := range end.newest {
		if s, ok := end.success[part]; !ok {
			t.Errorf("partition %s has no _SUCCESS", part)
		} else if s.Before(last) {
			t.Errorf("partition %s: _SUCCESS (%v) is older than its newest part file (%v)", part, s, last)
		}
		want = append(want, strings.TrimPrefix(part, "dt=")+"="+filepath.Join(out, part))
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
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
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
