package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/iceberg"
	s3conn "github.com/sluice-io/sluice/connectors/s3"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// icebergPython is PyIceberg's venv python (scripts/pyiceberg.sh setup),
// or the test is skipped.
func icebergPython(t *testing.T) string {
	t.Helper()
	py := os.Getenv("SLUICE_PYICEBERG")
	if py == "" {
		t.Skip("SLUICE_PYICEBERG is not set: set up PyIceberg with `eval \"$(scripts/pyiceberg.sh setup | grep '^SLUICE_PYICEBERG=')\"; export SLUICE_PYICEBERG`")
	}
	return py
}

// icebergTable is a table as PyIceberg reads it.
type icebergTable struct {
	Columns   []string `json:"columns"`
	Rows      [][]any  `json:"rows"`
	Snapshots []struct {
		ID        int64             `json:"id"`
		Parent    *int64            `json:"parent"`
		Operation string            `json:"operation"`
		Props     map[string]string `json:"props"`
		Added     []string          `json:"added"`   // data files its manifests add
		Deleted   []string          `json:"deleted"` // and delete
	} `json:"snapshots"`
	Files    []string `json:"files"` // referenced by the current snapshot
	Location string   `json:"location"`
}

// icebergRead reads table ident of the SQLite SQL catalog at catalogFile
// with PyIceberg; props are more catalog properties (key=value).
func icebergRead(t *testing.T, py, catalogFile, warehouse, ident string, props ...string) icebergTable {
	t.Helper()
	return icebergReadURI(t, py, "sqlite:///"+catalogFile, warehouse, ident, props...)
}

// icebergReadURI reads table ident with PyIceberg from the catalog at uri:
// a SQLAlchemy URL (a SQL catalog) or an http:// URL (a REST catalog).
func icebergReadURI(t *testing.T, py, uri, warehouse, ident string, props ...string) icebergTable {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	args := append([]string{"testdata/iceberg_read.py", uri, warehouse, ident}, props...)
	cmd := exec.CommandContext(ctx, py, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("PyIceberg read of %s: %v\n%s", ident, err, stderr.String())
	}
	var tbl icebergTable
	if err := json.Unmarshal(out, &tbl); err != nil {
		t.Fatalf("PyIceberg output: %v", err)
	}
	return tbl
}

// icebergTopic creates a topic of 8 partitions.
func icebergTopic(t *testing.T, cl *kgo.Client) string {
	t.Helper()
	topic := fmt.Sprintf("cli-iceberg-%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 8, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic: %v", err)
	}
	return topic
}

// icebergProduce produces JSON orders {"id": i, "customer": …, "amount":
// …} for i in 0 … count-1 over about spread, in batches, with Kafka
// timestamps spread over the two days before now (the day partition gets
// several values; the broker refuses future timestamps). It returns a
// function that waits for the producer and reports its error.
func icebergProduce(t *testing.T, cl *kgo.Client, topic string, count int, spread time.Duration) func() error {
	t.Helper()
	base := time.Now().Add(-72 * time.Hour).Truncate(time.Hour)
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		const batch = 2000
		pause := spread / time.Duration(max(count/batch, 1))
		for from := 0; from < count; from += batch {
			recs := make([]*kgo.Record, 0, batch)
			for i := from; i < min(from+batch, count); i++ {
				recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)),
					Timestamp: base.Add(time.Duration(i) * 172800 * time.Second / time.Duration(count)),
					Value:     fmt.Appendf(nil, `{"id": %d, "customer": "customer-%d", "amount": %d}`, i, i%100, i*7)})
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				done <- fmt.Errorf("produce: %w", err)
				return
			}
			time.Sleep(pause)
		}
		done <- nil
	}()
	return func() error { return <-done }
}

// icebergTotal is the table's record count from its current snapshot's
// summary, read through the sink's own catalog code; -1 before the first
// snapshot.
func icebergTotal(t *testing.T, cat iceberg.Catalog, ident string) int {
	t.Helper()
	ctx := t.Context()
	c, err := cat(ctx)
	if err != nil {
		return -1
	}
	defer func() {
		if cl, ok := c.(interface{ Close() error }); ok {
			_ = cl.Close()
		}
	}()
	id, _ := iceberg.ParseIdentifier(ident)
	tbl, err := c.LoadTable(ctx, id)
	if err != nil || tbl.CurrentSnapshot() == nil || tbl.CurrentSnapshot().Summary == nil {
		return -1
	}
	n, err := strconv.Atoi(tbl.CurrentSnapshot().Summary.Properties["total-records"])
	if err != nil {
		return -1
	}
	return n
}

// TestIcebergKafkaKill9 is issue 18's end to end through
// examples/pipelines/kafka-to-iceberg.yaml: JSON orders from a real Kafka
// topic of 8 partitions → iceberg sink at parallelism 3, checkpoints every
// second, table created by the sink (day(ts), bucket(4, id)) in a SQLite
// SQL catalog with a local warehouse, while a producer writes the orders
// over about 20 s; the process is killed with SIGKILL twice after a
// checkpoint completed and resumed with --from each time, and the third
// run is stopped with SIGTERM once the table holds every order. PyIceberg
// then reads the table: every order exactly once with its fields; every
// snapshot is one append of a distinct checkpoint, in increasing order,
// adding records (so the snapshots are exactly the checkpoints that
// carried data); no data file is referenced twice.
// SLUICE_ICEBERG_RECORDS sets the count (default 50000, as in the S3 and
// REST variants: the kills fall after the first two checkpoints and the
// producer spreads the orders over 20 s whatever their count, so more
// orders only made the independent read longer; the is 500000).
func TestIcebergKafkaKill9(t *testing.T) {
	t.Parallel() // mostly waits on its processes; its topics, tables and dirs are its own
	py := icebergPython(t)
	brokers := kafkaBrokers(t)
	count := icebergRecords(t, 50_000)
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topic := icebergTopic(t, cl)
	work := t.TempDir()
	ckpt := filepath.Join(work, "checkpoints")
	catalogFile := filepath.Join(work, "catalog.db")
	warehouse := filepath.Join(work, "warehouse")
	file := pipelines + "kafka-to-iceberg.yaml"
	env := []string{"KAFKA_BROKERS=" + brokers, "TOPIC=" + topic, "KAFKA_BOUNDED=unbounded",
		"ICEBERG_CATALOG=" + catalogFile, "ICEBERG_WAREHOUSE=" + warehouse, "CHECKPOINTS=" + ckpt,
		"CHECKPOINT_INTERVAL=1s", "CHECKPOINT_RETAIN=10000", "RESTART_ATTEMPTS=10", "RESTART_DELAY=100ms", "ICEBERG_FILE_SIZE=1048576"}
	wait := icebergProduce(t, cl, topic, count, 20*time.Second)
	icebergRunAll(t, env, file, ckpt, iceberg.SQLCatalog("default", catalogFile, "", nil), "shop.orders", count)
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	tbl := icebergRead(t, py, catalogFile, (&url.URL{Scheme: "file", Path: warehouse}).String(), "shop.orders")
	icebergCheck(t, tbl, count)
	icebergAudit(t, tbl, ckpt, env, nil)
}

// icebergRunAll runs the pipeline (unbounded Kafka source) three times:
// the first two are killed with SIGKILL once one of their checkpoints
// completed, each later run resumes with --from; the third is stopped
// with SIGTERM (stop with savepoint) once the table holds count records.
func icebergRunAll(t *testing.T, env []string, file, ckpt string, cat iceberg.Catalog, ident string, count int) {
	t.Helper()
	icebergRunKilled(t, env, file, ckpt)
	p := start(t, env, "run", "--progress", "off", "--from", ckpt, file)
	waitFor(t, p, fmt.Sprintf("the table holds %d records", count), 5*time.Minute, func() bool {
		return icebergTotal(t, cat, ident) >= count
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("the last run, stopped with SIGTERM, exited %d\n%s", code, p.stderr())
	}
	t.Logf("last run stopped: %s", firstMatch(p.stderr(), `job .*(FINISHED|STOPPED|stopped).*`))
}

// icebergRunKilled runs the pipeline twice (the second with --from) and
// kills each run with SIGKILL once one of its checkpoints completed.
func icebergRunKilled(t *testing.T, env []string, file, ckpt string) {
	t.Helper()
	latest := func() string { b, _ := os.ReadFile(filepath.Join(ckpt, "_latest")); return string(b) }
	for i, from := range [][]string{nil, {"--from", ckpt}} {
		before := latest()
		args := append(append([]string{"run", "--progress", "off"}, from...), file)
		p := start(t, env, args...)
		n := 0
		waitFor(t, p, fmt.Sprintf("run %d: a checkpoint completed", i+1), 3*time.Minute, func() bool {
			if l := latest(); l != before {
				before, n = l, n+1
			}
			return n >= 1
		})
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		p.wait(t)
		t.Logf("run %d killed after checkpoint %s", i+1, strings.TrimSpace(latest()))
	}
}

// icebergCheck fails t unless tbl holds orders 0 … count-1 once each and
// its snapshots are one append per data-carrying checkpoint.
func icebergCheck(t *testing.T, tbl icebergTable, count int) {
	t.Helper()
	col := map[string]int{}
	for i, c := range tbl.Columns {
		col[c] = i
	}
	seen := make([]int, count)
	for _, r := range tbl.Rows {
		id := int(r[col["id"]].(float64))
		if id < 0 || id >= count {
			t.Fatalf("unexpected row %v", r)
		}
		seen[id]++
		if c, a := r[col["customer"]], r[col["amount"]]; c != fmt.Sprintf("customer-%d", id%100) || a != float64(id*7) || r[col["ts"]] == nil {
			t.Fatalf("row %v: wrong fields for order %d", r, id)
		}
	}
	var missing, twice int
	for _, n := range seen {
		switch {
		case n == 0:
			missing++
		case n > 1:
			twice++
		}
	}
	if missing > 0 || twice > 0 || len(tbl.Rows) != count {
		t.Errorf("the table holds %d rows, want %d: %d orders missing, %d more than once", len(tbl.Rows), count, missing, twice)
	}
	var last, added int64
	compactions := 0
	for _, s := range tbl.Snapshots {
		if r, ok := s.Props["sluice.compacted-checkpoints"]; ok {
			// a compaction: replaces files, adds no records
			if s.Operation != "replace" || s.Props["added-records"] != s.Props["deleted-records"] {
				t.Errorf("compaction snapshot %d (checkpoints %s): %s, %v", s.ID, r, s.Operation, s.Props)
			}
			compactions++
			continue
		}
		cp, err := strconv.ParseInt(s.Props["sluice.max-committed-checkpoint-id"], 10, 64)
		if err != nil || s.Operation != "append" || s.Props["sluice.job-id"] == "" {
			t.Errorf("snapshot %d (%s, %v) is not an append of the sink", s.ID, s.Operation, s.Props)
			continue
		}
		if _, late := s.Props["sluice.late-checkpoint-id"]; late {
			// late files of a committed checkpoint (after a regional restart)
			t.Logf("snapshot %d: late files of checkpoint %s", s.ID, s.Props["sluice.late-checkpoint-id"])
		} else if cp <= last {
			t.Errorf("snapshot %d commits checkpoint %d after checkpoint %d: a checkpoint in two snapshots, or out of order", s.ID, cp, last)
		}
		last = max(last, cp)
		a, _ := strconv.ParseInt(s.Props["added-records"], 10, 64)
		if a <= 0 {
			t.Errorf("snapshot %d (checkpoint %d) adds no records", s.ID, cp)
		}
		added += a
	}
	if added != int64(count) {
		t.Errorf("the snapshots add %d records, want %d", added, count)
	}
	files := map[string]bool{}
	for _, f := range tbl.Files {
		if files[f] {
			t.Errorf("data file %s referenced twice", f)
		}
		files[f] = true
	}
	t.Logf("PyIceberg read %d rows in %d snapshots (checkpoints up to %d; %d compactions), %d data files", len(tbl.Rows), len(tbl.Snapshots), last, compactions, len(tbl.Files))
}

// icebergRecords is SLUICE_ICEBERG_RECORDS, else def (60000 with -short).
func icebergRecords(t *testing.T, def int) int {
	t.Helper()
	if s := os.Getenv("SLUICE_ICEBERG_RECORDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1000 {
			t.Fatalf("SLUICE_ICEBERG_RECORDS=%q: want a number from 1000", s)
		}
		return n
	}
	if testing.Short() {
		return min(def, 60_000)
	}
	return def
}

// TestIcebergKafkaKill9S3 is TestIcebergKafkaKill9 with the warehouse on
// S3-compatible object storage: versitygw (scripts/s3.sh), through
// iceberg-go's S3 file IO (s3.endpoint, path-style requests); the catalog
// stays a SQLite file. PyIceberg reads the table from the same bucket.
// Default 50000 records (SLUICE_ICEBERG_RECORDS overrides).
func TestIcebergKafkaKill9S3(t *testing.T) {
	t.Parallel() // mostly waits on its processes; its topics, tables and dirs are its own
	py := icebergPython(t)
	brokers := kafkaBrokers(t)
	ep := os.Getenv("SLUICE_S3_ENDPOINT")
	if ep == "" {
		t.Skip("SLUICE_S3_ENDPOINT is not set: start an S3-compatible server with scripts/s3.sh (scripts/test.sh does)")
	}
	ak, sk := os.Getenv("SLUICE_S3_ACCESS_KEY"), os.Getenv("SLUICE_S3_SECRET_KEY")
	s3c, err := s3conn.New(s3conn.Endpoint(ep), s3conn.Credentials(ak, sk))
	if err != nil {
		t.Fatal(err)
	}
	bucket := fmt.Sprintf("iceberg-%d", time.Now().UnixNano())
	if err := s3c.CreateBucket(t.Context(), bucket); err != nil {
		t.Fatal(err)
	}
	count := icebergRecords(t, 50_000)
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topic := icebergTopic(t, cl)
	work := t.TempDir()
	// the example with the S3 properties added to the sink's options
	ex, err := os.ReadFile(pipelines + "kafka-to-iceberg.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s3props := "    properties.s3.endpoint: ${S3_ENDPOINT}\n    properties.s3.region: us-east-1\n" +
		"    properties.s3.access-key-id: ${S3_ACCESS_KEY}\n    properties.s3.secret-access-key: ${S3_SECRET_KEY}\n"
	file := filepath.Join(work, "kafka-to-iceberg-s3.yaml")
	if err := os.WriteFile(file, append(ex, s3props...), 0o600); err != nil {
		t.Fatal(err)
	}
	ckpt := filepath.Join(work, "checkpoints")
	catalogFile := filepath.Join(work, "catalog.db")
	warehouse := "s3://" + bucket + "/warehouse"
	env := []string{"KAFKA_BROKERS=" + brokers, "TOPIC=" + topic, "KAFKA_BOUNDED=unbounded",
		"ICEBERG_CATALOG=" + catalogFile, "ICEBERG_WAREHOUSE=" + warehouse, "CHECKPOINTS=" + ckpt,
		"CHECKPOINT_INTERVAL=1s", "CHECKPOINT_RETAIN=10000", "RESTART_ATTEMPTS=10", "RESTART_DELAY=100ms", "ICEBERG_FILE_SIZE=1048576",
		"S3_ENDPOINT=" + ep, "S3_ACCESS_KEY=" + ak, "S3_SECRET_KEY=" + sk}
	props := map[string]string{"s3.endpoint": ep, "s3.region": "us-east-1", "s3.access-key-id": ak, "s3.secret-access-key": sk}
	wait := icebergProduce(t, cl, topic, count, 20*time.Second)
	icebergRunAll(t, env, file, ckpt, iceberg.SQLCatalog("default", catalogFile, "", props), "shop.orders", count)
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	var kv []string
	for k, v := range props {
		kv = append(kv, k+"="+v)
	}
	tbl := icebergRead(t, py, catalogFile, warehouse, "shop.orders", kv...)
	icebergCheck(t, tbl, count)
	icebergAudit(t, tbl, ckpt, env, props)
	for _, f := range tbl.Files {
		if !strings.HasPrefix(f, "s3://"+bucket+"/") {
			t.Errorf("data file %s is not in the bucket", f)
		}
	}
}

// TestIcebergKafkaKill9REST is TestIcebergKafkaKill9 with the table in an
// Iceberg REST catalog: Apache Iceberg's own RESTCatalogServer
// (scripts/iceberg-rest.sh, at $SLUICE_ICEBERG_REST; its warehouse is a
// local directory) through examples/pipelines/kafka-to-iceberg-rest.yaml;
// two SIGKILLs, --from, SIGTERM; PyIceberg's RestCatalog reads the table
// back through the same server. Default 50000 records
// (SLUICE_ICEBERG_RECORDS overrides).
func TestIcebergKafkaKill9REST(t *testing.T) {
	t.Parallel() // mostly waits on its processes; its topics, tables and dirs are its own
	py := icebergPython(t)
	rest := os.Getenv("SLUICE_ICEBERG_REST")
	if rest == "" {
		t.Skip("SLUICE_ICEBERG_REST is not set: start an Iceberg REST catalog with scripts/iceberg-rest.sh (scripts/test.sh does)")
	}
	brokers := kafkaBrokers(t)
	count := icebergRecords(t, 50_000)
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topic := icebergTopic(t, cl)
	ckpt := filepath.Join(t.TempDir(), "checkpoints")
	// a namespace of its own: the server (and its warehouse) is shared
	ident := fmt.Sprintf("shop%d.orders", time.Now().UnixNano())
	env := []string{"KAFKA_BROKERS=" + brokers, "TOPIC=" + topic, "KAFKA_BOUNDED=unbounded",
		"ICEBERG_REST=" + rest, "ICEBERG_TABLE=" + ident, "CHECKPOINTS=" + ckpt,
		"CHECKPOINT_INTERVAL=1s", "CHECKPOINT_RETAIN=10000", "RESTART_ATTEMPTS=10", "RESTART_DELAY=100ms", "ICEBERG_FILE_SIZE=1048576"}
	wait := icebergProduce(t, cl, topic, count, 20*time.Second)
	icebergRunAll(t, env, pipelines+"kafka-to-iceberg-rest.yaml", ckpt, iceberg.RESTCatalog("default", rest, "", nil), ident, count)
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	tbl := icebergReadURI(t, py, rest, "", ident)
	icebergCheck(t, tbl, count)
	icebergAudit(t, tbl, ckpt, env, nil)
}
