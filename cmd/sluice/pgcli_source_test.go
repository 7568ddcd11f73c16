package main

// The postgres source through the binary, against the real server of
// scripts/postgres.sh (skipped without SLUICE_POSTGRES_URL) and the real
// broker of scripts/kafka.sh: examples/pipelines/postgres-snapshot-to-file.yaml
// killed with SIGKILL and resumed with --from (every row in the files
// exactly once), examples/pipelines/postgres-cdc-to-kafka.yaml under a
// workload of inserts, updates and deletes, killed and resumed (a
// read_committed reader replays the changes into the table's final state,
// each change once), and the setup errors that end the job at once.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
)

// pgcliLines counts the lines of the committed files under dir.
func pgcliLines(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	eachCommittedLine(t, dir, func(string, string) { n++ })
	return n
}

// pgcliKillWhen kills p with SIGKILL once done reports true (polled every
// 50ms, up to two minutes: a hang guard).
func pgcliKillWhen(t *testing.T, p *proc, done func() bool) {
	t.Helper()
	for i := 0; !done(); i++ {
		if i == 2400 {
			t.Fatalf("no progress in 2 minutes:\n%s", p.stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
}

// TestPgcliSnapshotKill9Resume runs examples/pipelines/postgres-snapshot-to-file.yaml
// on a table of 50k rows keyed by (text, int) in 8 chunks, kills the
// process with SIGKILL once part of it is committed, resumes with --from:
// the committed files hold every row exactly once, with its values. (200k
// rows in chunks of 25000 took three minutes at load 25 and proved the
// same: the kill falls in the first chunks either way.)
func TestPgcliSnapshotKill9Resume(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	u := pgURL(t)
	const n = 50_000
	table := pgTable(t, "pgsnap", "region text NOT NULL, id bigint NOT NULL, amount numeric(12,2), note text, PRIMARY KEY (region, id)")
	pgExec(t, fmt.Sprintf(`INSERT INTO %s SELECT 'r' || (g %% 7), g, g / 100.0, repeat('x', 40) FROM generate_series(1, %d) g`, table, n))
	out := t.TempDir()
	env := []string{"POSTGRES_URL=" + u, "TABLE=" + table, "OUT=" + out, "CHUNK_SIZE=6250", "FETCH_SIZE=500", "CHECKPOINT_INTERVAL=200ms"}
	p := start(t, env, "run", "--progress", "off", pipelines+"postgres-snapshot-to-file.yaml")
	pgcliKillWhen(t, p, func() bool { return pgcliLines(t, filepath.Join(out, "output")) >= 5000 })
	killed := pgcliLines(t, filepath.Join(out, "output"))
	if killed >= n {
		t.Fatalf("the killed run wrote all %d rows already; kill earlier", killed)
	}
	r := run(t, env, "run", "--progress", "off", "--from", filepath.Join(out, "checkpoints"), pipelines+"postgres-snapshot-to-file.yaml")
	if r.code != 0 {
		t.Fatalf("resume: exit %d\n%s", r.code, r.stderr)
	}
	seen := make(map[int64]int, n)
	eachCommittedRecord(t, filepath.Join(out, "output"), func(file string, rec map[string]any) {
		after, _ := rec["after"].(map[string]any)
		id, ok := after["id"].(float64)
		key, _ := rec["key"].([]any)
		if !ok || rec["op"] != "r" || len(key) != 2 || key[1] != id || after["region"] != fmt.Sprintf("r%d", int64(id)%7) {
			t.Fatalf("%s: unexpected record %v", file, rec)
		}
		seen[int64(id)]++
	})
	bad := 0
	for id := int64(1); id <= n; id++ {
		if seen[id] != 1 {
			if bad++; bad <= 5 {
				t.Errorf("row %d: %d times", id, seen[id])
			}
		}
	}
	if bad > 0 || len(seen) != n {
		t.Fatalf("%d rows wrong of %d (%d distinct in the output; %d lines before the kill)", bad, n, len(seen), killed)
	}
	t.Logf("%d rows, %d committed before the kill", n, killed)
}

// pgcliOp is one change of the workload on one key: op and the row's
// version after it (before it, for a delete).
type pgcliOp struct {
	op string
	v  int64
}

// pgcliWorkload inserts, updates and deletes rows of table (id bigint, v
// bigint: the row's version) in transactions of 1 to 4 changes until
// changes are committed, and logs each key's committed changes; prefilled
// rows (1 … prefill) start with their insert. Keys are not reused.
func pgcliWorkload(ctx context.Context, url, table string, prefill, changes int, seed uint64) (map[int64][]pgcliOp, map[pgcliKeyOp]pgcliTxn, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close(context.Background())
	log := map[int64][]pgcliOp{}
	txnOf := map[pgcliKeyOp]pgcliTxn{}
	seq := 0
	ver := map[int64]int64{}
	var live []int64
	for id := int64(1); id <= int64(prefill); id++ {
		log[id] = []pgcliOp{{"c", 0}}
		live = append(live, id)
	}
	next := int64(prefill) + 1
	rng := rand.New(rand.NewPCG(seed, 3))
	for done := 0; done < changes; {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return nil, nil, err
		}
		var xid int64
		if err := tx.QueryRow(ctx, "SELECT txid_current()").Scan(&xid); err != nil {
			return nil, nil, err
		}
		seq++
		txn := pgcliTxn{seq: seq, xid: uint32(xid)}
		touched := map[int64]bool{}
		var pending []func()
		for range 1 + rng.IntN(4) {
			r := rng.IntN(4)
			if r == 0 || len(live) < 50 {
				id := next
				next++
				if _, err := tx.Exec(ctx, "INSERT INTO "+table+" (id, v) VALUES ($1, 0)", id); err != nil {
					return nil, nil, err
				}
				touched[id] = true
				pending = append(pending, func() {
					log[id] = append(log[id], pgcliOp{"c", 0})
					txnOf[pgcliKeyOp{id, pgcliOp{"c", 0}}] = txn
					live = append(live, id)
				})
				continue
			}
			id := live[rng.IntN(len(live))]
			if touched[id] {
				continue
			}
			touched[id] = true
			if r == 1 {
				if _, err := tx.Exec(ctx, "DELETE FROM "+table+" WHERE id = $1", id); err != nil {
					return nil, nil, err
				}
				pending = append(pending, func() {
					log[id] = append(log[id], pgcliOp{"d", ver[id]})
					txnOf[pgcliKeyOp{id, pgcliOp{"d", ver[id]}}] = txn
					i := slices.Index(live, id)
					live = slices.Delete(live, i, i+1)
				})
			} else {
				if _, err := tx.Exec(ctx, "UPDATE "+table+" SET v = v + 1 WHERE id = $1", id); err != nil {
					return nil, nil, err
				}
				pending = append(pending, func() {
					ver[id]++
					log[id] = append(log[id], pgcliOp{"u", ver[id]})
					txnOf[pgcliKeyOp{id, pgcliOp{"u", ver[id]}}] = txn
				})
			}
		}
		if err := tx.Commit(ctx); err != nil {
			return nil, nil, err
		}
		for _, f := range pending {
			f()
		}
		done += len(pending)
		time.Sleep(time.Millisecond)
	}
	return log, txnOf, nil
}

// pgcliKeyOp is one change of the workload: a key and its op.
type pgcliKeyOp struct {
	key int64
	op  pgcliOp
}

// pgcliTxn is a workload transaction: its place in commit order (from 1)
// and its id.
type pgcliTxn struct {
	seq int
	xid uint32
}

// pgcliChange is a change record as the topic holds it.
type pgcliChange struct {
	Op     string           `json:"op"`
	Key    int64            `json:"key"`
	Before map[string]int64 `json:"before"`
	After  map[string]int64 `json:"after"`
	LSN    int64            `json:"lsn"`
	Xid    uint32           `json:"xid"`
}

// pgcliReplay checks the change records of the topic against the
// workload's log, per key: the snapshot's row (or none) and then exactly
// the changes the log has after the state the snapshot saw, each once, in
// order; and replaying them gives the table.
//
// On a mismatch it says which workload transactions the missing changes
// belong to (a range cut out of the stream, or scattered) and what the
// topic holds around them, and logs diag (the runs' logs).
func pgcliReplay(t *testing.T, recs []*kgo.Record, log map[int64][]pgcliOp, txnOf map[pgcliKeyOp]pgcliTxn, table map[int64]int64, diag func() string) {
	t.Helper()
	var missing, extra []pgcliKeyOp
	per := map[int64][]pgcliChange{}
	for _, r := range recs {
		var c pgcliChange
		if err := json.Unmarshal(r.Value, &c); err != nil {
			t.Fatalf("record %s: %v", r.Value, err)
		}
		if string(r.Key) != fmt.Sprint(c.Key) {
			t.Fatalf("record key %q, value's key %d", r.Key, c.Key)
		}
		per[c.Key] = append(per[c.Key], c)
	}
	state := map[int64]int64{}
	bad := 0
	for id, l := range log {
		got := per[id]
		delete(per, id)
		// Snapshot rows (LSN 0) first, then by LSN: chunk readers and the
		// stream reader write to the topic side by side.
		slices.SortStableFunc(got, func(a, b pgcliChange) int { return cmp.Compare(a.LSN, b.LSN) })
		cut := 0
		if len(got) > 0 && got[0].Op == "r" {
			cut = int(got[0].After["v"]) + 1
		} else if len(got) == 0 || got[0].Op != "c" {
			cut = len(l)
		}
		var ops []pgcliOp
		for i, c := range got {
			switch c.Op {
			case "d":
				delete(state, id)
			default:
				state[id] = c.After["v"]
			}
			if i == 0 && c.Op == "r" {
				continue
			}
			img := c.After
			if c.Op == "d" {
				img = c.Before
			}
			ops = append(ops, pgcliOp{c.Op, img["v"]})
		}
		if cut > len(l) || !slices.Equal(ops, l[cut:]) {
			want := map[pgcliOp]int{}
			if cut <= len(l) {
				for _, o := range l[cut:] {
					want[o]++
				}
			}
			for _, o := range ops {
				if want[o]--; want[o] < 0 {
					extra = append(extra, pgcliKeyOp{id, o})
				}
			}
			for o, n := range want {
				for range n {
					missing = append(missing, pgcliKeyOp{id, o})
				}
			}
			if bad++; bad <= 5 {
				t.Errorf("key %d: the log is %v; the topic has %v after the snapshot's %d changes", id, l, ops, cut)
			}
		}
	}
	for id, cs := range per {
		if bad++; bad <= 5 {
			t.Errorf("key %d is not in the workload but in the topic: %v", id, cs)
		}
	}
	if bad > 0 {
		pgcliDiagnose(t, recs, txnOf, missing, extra)
		t.Logf("the runs' logs:\n%s", diag())
		t.Fatalf("%d keys wrong", bad)
	}
	if len(state) != len(table) {
		t.Fatalf("the replayed changes give %d rows, the table has %d", len(state), len(table))
	}
	for id, v := range table {
		if state[id] != v {
			t.Fatalf("row %d: replayed v %d, table v %d", id, state[id], v)
		}
	}
}

// pgcliDiagnose logs which workload transactions the missing and extra
// changes belong to, and the LSNs the topic holds for the transactions
// around the first missing one.
func pgcliDiagnose(t *testing.T, recs []*kgo.Record, txnOf map[pgcliKeyOp]pgcliTxn, missing, extra []pgcliKeyOp) {
	t.Helper()
	seqs := func(kos []pgcliKeyOp) []int {
		var out []int
		for _, ko := range kos {
			out = append(out, txnOf[ko].seq)
		}
		slices.Sort(out)
		return out
	}
	ms, es := seqs(missing), seqs(extra)
	t.Logf("%d changes missing, %d extra; %d workload changes", len(ms), len(es), len(txnOf))
	if len(ms) > 0 {
		t.Logf("missing changes' transactions (commit order): first %d, last %d; %v", ms[0], ms[len(ms)-1], ms[:min(len(ms), 40)])
	}
	if len(es) > 0 {
		t.Logf("extra changes' transactions: %v", es[:min(len(es), 40)])
	}
	// The topic's records per workload transaction, by seq.
	bySeq := map[uint32]int{}
	for _, tx := range txnOf {
		bySeq[tx.xid] = tx.seq
	}
	present := map[int]int{}
	lsnOf := map[int]int64{}
	for _, r := range recs {
		var c pgcliChange
		if json.Unmarshal(r.Value, &c) != nil || c.Xid == 0 {
			continue
		}
		if s, ok := bySeq[c.Xid]; ok {
			present[s]++
			lsnOf[s] = c.LSN
		}
	}
	if len(ms) > 0 {
		for s := ms[0] - 5; s <= ms[0]+5; s++ {
			t.Logf("transaction %d: %d records in the topic, LSN %d (%s)", s, present[s], lsnOf[s], pgLSNText(lsnOf[s]))
		}
		// Runs of transactions with no record at all.
		run0, inRun := 0, false
		maxSeq := 0
		for _, tx := range txnOf {
			maxSeq = max(maxSeq, tx.seq)
		}
		for s := 1; s <= maxSeq+1; s++ {
			if present[s] == 0 && s <= maxSeq {
				if !inRun {
					run0, inRun = s, true
				}
				continue
			}
			if inRun && s-run0 >= 3 {
				t.Logf("transactions %d-%d: no record in the topic (LSNs %s .. %s around)", run0, s-1, pgLSNText(lsnOf[run0-1]), pgLSNText(lsnOf[s]))
			}
			inRun = false
		}
	}
}

func pgLSNText(l int64) string { return pglogrepl.LSN(l).String() }

// TestPgcliCDCToKafkaKill9Resume runs examples/pipelines/postgres-cdc-to-kafka.yaml
// (exactly-once Kafka sink) while a workload inserts, updates and deletes
// rows, kills the process with SIGKILL mid-workload, resumes with --from,
// and reads the topic read_committed: replaying the changes gives the
// table's final state and every change is there once.
func TestPgcliCDCToKafkaKill9Resume(t *testing.T) {
	t.Parallel() // mostly waits on its processes; its topics, tables and dirs are its own
	u := pgURL(t)
	brokers := kafkaBrokers(t)
	const prefill, changes = 20_000, 12_000
	table := pgTable(t, "pgcdc", "id bigint PRIMARY KEY, v bigint NOT NULL")
	slot := table
	pgExec(t, "ALTER TABLE "+table+" REPLICA IDENTITY FULL",
		fmt.Sprintf("INSERT INTO %s SELECT g, 0 FROM generate_series(1, %d) g", table, prefill))
	t.Cleanup(func() {
		for i := 0; i < 100; i++ { // the walsender of a killed job may still hold the slot
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			conn, err := pgx.Connect(ctx, u)
			if err == nil {
				_, err = conn.Exec(ctx, "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", slot)
				_, _ = conn.Exec(ctx, "DROP PUBLICATION IF EXISTS "+slot)
				conn.Close(ctx)
			}
			cancel()
			if err == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	topic := kafkaTopic(t, brokers, nil)
	ckpt := t.TempDir()
	env := []string{"POSTGRES_URL=" + u, "TABLE=" + table, "SLOT=" + slot, "PUBLICATION=" + slot, "CREATE_SLOT=true", "CREATE_PUBLICATION=true",
		"KAFKA_BROKERS=" + brokers, "OUT_TOPIC=" + topic, "CHECKPOINTS=" + ckpt, "CHECKPOINT_INTERVAL=200ms", "CHUNK_SIZE=4000", "TOPIC_CREATE=false"}
	file := pipelines + "postgres-cdc-to-kafka.yaml"
	p := start(t, env, "run", "--progress", "off", "--log-level", "debug", file)

	// A hang guard, not a timing assertion: at load 40-49 the workload
	// (12k changes) ran past 4 minutes, twice.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	type wres struct {
		log   map[int64][]pgcliOp
		txnOf map[pgcliKeyOp]pgcliTxn
		err   error
	}
	wch := make(chan wres, 1)
	go func() {
		l, txnOf, err := pgcliWorkload(ctx, u, table, prefill, changes, 5)
		wch <- wres{l, txnOf, err}
	}()
	// Kill once a checkpoint's output is committed (the snapshot's rows
	// reached the topic) and the workload is under way.
	pgcliKillWhen(t, p, func() bool { return len(readTopic(t, brokers, topic, 1000)) >= 1000 })
	select {
	case w := <-wch:
		t.Fatalf("the workload ended (%v) before the kill; kill earlier", w.err)
	default:
	}
	p2 := start(t, env, "run", "--progress", "off", "--log-level", "debug", "--from", ckpt, file)
	w := <-wch
	if w.err != nil {
		t.Fatalf("workload: %v", w.err)
	}
	final := map[int64]int64{}
	for _, r := range pgStructs[struct{ ID, V int64 }](t, "SELECT id, v FROM "+table) {
		final[r.ID] = r.V
	}
	// The topic holds every change once the resumed job caught up: the
	// count of records the log expects is not known (the snapshot saw an
	// unknown state), so read until two seconds pass without a record.
	// One consumer that stays subscribed and keeps polling, as an
	// independent reader would (a fresh client per attempt read nothing
	// at all in one CI run while the topic held every change).
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// A hang guard, not a timing assertion: the wait lasts while the
	// resumed job makes progress (a record arrives, or its slot confirms
	// a newer LSN) and ends after 4 minutes without any, or after 20 in
	// all. In one CI run the resumed stream, which decodes every table's
	// WAL since the slot's start (the other packages' PostgreSQL tests
	// write gigabytes), was still emitting when a fixed 3-minute wait
	// ran out, and the replay below then reported the changes still to
	// come as missing.
	var recs []*kgo.Record
	caught := false
	confirms := func() int { return strings.Count(p2.stderr(), "CDC source: confirmed") }
	began, progress, lastN, lastC := time.Now(), time.Now(), 0, confirms()
	for !caught && time.Since(progress) < 4*time.Minute && time.Since(began) < 20*time.Minute {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) && !errors.Is(e.Err, context.Canceled) {
				t.Fatalf("consume %s: %v", topic, e.Err)
			}
		}
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
		caught = pgcliCaughtUp(recs, final)
		if c := confirms(); len(recs) > lastN || c > lastC {
			progress, lastN, lastC = time.Now(), len(recs), c
		}
	}
	if !caught {
		// The count tells a reader that read nothing (a slow first fetch)
		// from a job that stopped short; the replay below says which
		// changes are missing.
		t.Errorf("the topic did not catch up with the table (%d records read, %d rows in the table) in %v, the last progress %v ago",
			len(recs), len(final), time.Since(began).Round(time.Second), time.Since(progress).Round(time.Second))
	} else {
		t.Logf("caught up %v after the workload", time.Since(began).Round(time.Second))
	}
	if err := p2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p2.wait(t)
	for _, l := range strings.Split(p2.stderr(), "\n") {
		if strings.Contains(l, "level=WARN") || strings.Contains(l, "level=ERROR") || strings.Contains(l, "restart") {
			t.Logf("resumed run: %.300s", l)
		}
	}
	// The killed run's checkpoint holds its chunks (its output was
	// committed): the resumed run computes none.
	if e := p2.stderr(); strings.Contains(e, "postgres source: snapshot chunks") || !strings.Contains(e, "restored; the snapshot chunks are those of the checkpoint") {
		t.Errorf("the resumed run computed the chunks again:\n%s", e)
	}
	pgcliReplay(t, recs, w.log, w.txnOf, final, func() string {
		// The resumed run's routine lines (a checkpoint and a
		// confirmation each 200 ms) are cut to their first 40.
		var b strings.Builder
		n := 0
		for _, l := range strings.Split(p2.stderr(), "\n") {
			if strings.Contains(l, "checkpoint complete") || strings.Contains(l, "CDC source: confirmed") {
				if n++; n > 40 {
					continue
				}
			}
			b.WriteString(l + "\n")
		}
		return "killed run:\n" + p.stderr() + "\nresumed run:\n" + b.String()
	})
	t.Logf("%d change records for %d workload changes on %d prefilled rows", len(recs), changes, prefill)
}

// pgcliCaughtUp reports whether replaying recs in LSN order gives final.
func pgcliCaughtUp(recs []*kgo.Record, final map[int64]int64) bool {
	var cs []pgcliChange
	for _, r := range recs {
		var c pgcliChange
		if json.Unmarshal(r.Value, &c) != nil {
			return false
		}
		cs = append(cs, c)
	}
	slices.SortStableFunc(cs, func(a, b pgcliChange) int { return cmp.Compare(a.LSN, b.LSN) })
	state := map[int64]int64{}
	for _, c := range cs {
		if c.Op == "d" {
			delete(state, c.Key)
		} else {
			state[c.Key] = c.After["v"]
		}
	}
	if len(state) != len(final) {
		return false
	}
	for id, v := range final {
		if s, ok := state[id]; !ok || s != v {
			return false
		}
	}
	return true
}

// TestPgcliSetupErrors: a wrong password, a missing table, a table
// without a key, and a missing slot end the job at once (exit non-zero,
// no restart loop) with an error naming the cause.
func TestPgcliSetupErrors(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	u := pgURL(t)
	nokey := pgTable(t, "pgnokey", "a int, b text")
	ok := pgTable(t, "pgok", "id int PRIMARY KEY")
	wrong := strings.Replace(u, "//sluice:", "//sluice:wrong", 1)
	const pipeline = `name: pg-errors
checkpoint:
  interval: 200ms
restart:
  strategy: fixed-delay
  attempts: 50
  delay: 1s
source:
  type: postgres
  options:
    url: ${PG_URL}
    table: ${TABLE}
    mode: ${MODE}
    create-publication: ${CREATE_PUB:-false}
sink:
  type: print
`
	file := writePipeline(t, t.TempDir(), pipeline)
	for _, tc := range []struct {
		name string
		env  []string
		want []*regexp.Regexp
	}{
		{"wrong password", []string{"PG_URL=" + wrong, "TABLE=" + ok, "MODE=snapshot"},
			[]*regexp.Regexp{regexp.MustCompile(`password authentication failed`), regexp.MustCompile(`127\.0\.0\.1`)}},
		{"missing table", []string{"PG_URL=" + u, "TABLE=no_such_table_pgcli", "MODE=snapshot"},
			[]*regexp.Regexp{regexp.MustCompile(`table "\$\{TABLE\}" does not exist`)}}, // values from the environment are not shown
		{"no key", []string{"PG_URL=" + u, "TABLE=" + nokey, "MODE=cdc"},
			[]*regexp.Regexp{regexp.MustCompile(`table public\.\$\{TABLE\} has no primary key`)}},
		{"missing slot", []string{"PG_URL=" + u, "TABLE=" + ok, "MODE=cdc", "CREATE_PUB=true"},
			[]*regexp.Regexp{regexp.MustCompile(`replication slot "sluice_\$\{TABLE\}" does not exist`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			began := time.Now()
			r := run(t, tc.env, "run", "--progress", "off", file)
			if r.code == 0 {
				t.Fatalf("exit 0:\n%s", r.stderr)
			}
			for _, re := range tc.want {
				if !re.MatchString(r.stderr) {
					t.Errorf("stderr does not match %v:\n%s", re, r.stderr)
				}
			}
			if !strings.Contains(r.stderr, "failed without restarting") || !strings.Contains(r.stderr, " 0 restarts,") {
				t.Errorf("the job did not end at once:\n%s", r.stderr)
			}
			t.Logf("exit %d after %v", r.code, time.Since(began).Round(time.Millisecond))
		})
	}
	pgExec(t, "DROP PUBLICATION IF EXISTS sluice_"+ok)

	t.Run("wal_level", func(t *testing.T) {
		if testing.Short() {
			t.Skip("starts a server of its own: skipped with -short")
		}
		own := pgcliOwnServer(t, "SLUICE_POSTGRES_WAL_LEVEL=replica")
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, own)
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.Exec(ctx, "CREATE TABLE w (id bigint PRIMARY KEY)")
		conn.Close(ctx)
		if err != nil {
			t.Fatal(err)
		}
		r := run(t, []string{"PG_URL=" + own, "TABLE=w", "MODE=cdc", "CREATE_PUB=true"}, "run", "--progress", "off", file)
		if r.code == 0 || !strings.Contains(r.stderr, `wal_level is "replica"`) || !strings.Contains(r.stderr, "wal_level = logical") ||
			!strings.Contains(r.stderr, "failed without restarting") {
			t.Fatalf("exit %d; want an error naming wal_level at once:\n%s", r.code, r.stderr)
		}
	})
}

// pgcliOwnServer starts a server of the test's own with scripts/postgres.sh
// and the extra environment, stops it at the end, and returns its URL.
func pgcliOwnServer(t *testing.T, env ...string) string {
	t.Helper()
	script, err := filepath.Abs("../../scripts/postgres.sh")
	if err != nil {
		t.Fatal(err)
	}
	// Not under t.TempDir(): as root the script runs the server as another
	// user, who must reach the run dir (the script stops and removes it).
	runDir, err := os.MkdirTemp("", "sluice-pgcli-test.")
	if err != nil {
		t.Fatal(err)
	}
	cmd := func(ctx context.Context, arg string) *exec.Cmd {
		c := exec.CommandContext(ctx, script, arg)
		c.Env = append(append(os.Environ(), "SLUICE_POSTGRES_RUN="+runDir), env...)
		return c
	}
	t.Cleanup(func() {
		if out, err := cmd(context.Background(), "stop").CombinedOutput(); err != nil {
			t.Logf("stop the test's server: %v: %s", err, out)
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := cmd(ctx, "start").Output()
	if err != nil {
		t.Fatalf("scripts/postgres.sh start: %v: %s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(l, "SLUICE_POSTGRES_URL="); ok {
			return v
		}
	}
	t.Fatalf("scripts/postgres.sh start printed no SLUICE_POSTGRES_URL: %s", out)
	return ""
}

// TestPgcliDebeziumEnvelope reads a table keyed by uuid with envelope:
// debezium into a file: every row once, in Debezium's envelope, keyed by
// its key.
func TestPgcliDebeziumEnvelope(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	u := pgURL(t)
	table := pgTable(t, "pgdbz", "u uuid PRIMARY KEY, n int NOT NULL")
	pgExec(t, "INSERT INTO "+table+" SELECT md5(g::text)::uuid, g FROM generate_series(1, 3000) g")
	const pipeline = `name: pg-debezium
parallelism: 2
checkpoint:
  interval: 200ms
  dir: ${OUT}/checkpoints
source:
  type: postgres
  options:
    url: ${PG_URL}
    table: ${TABLE}
    envelope: debezium
    server-name: shop
    chunk-size: 700
sink:
  type: file
  options:
    path: ${OUT}/output
`
	out := t.TempDir()
	r := run(t, []string{"PG_URL=" + u, "TABLE=" + table, "OUT=" + out}, "run", "--progress", "off", writePipeline(t, t.TempDir(), pipeline))
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s", r.code, r.stderr)
	}
	seen := map[float64]int{}
	eachCommittedRecord(t, filepath.Join(out, "output"), func(file string, rec map[string]any) {
		src, _ := rec["source"].(map[string]any)
		after, _ := rec["after"].(map[string]any)
		if rec["op"] != "r" || rec["before"] != nil || src["connector"] != "postgresql" || src["name"] != "shop" ||
			src["table"] != table || src["snapshot"] != "true" || after == nil {
			t.Fatalf("%s: not a Debezium snapshot record: %v", file, rec)
		}
		seen[after["n"].(float64)]++
	})
	for n := 1; n <= 3000; n++ {
		if seen[float64(n)] != 1 {
			t.Fatalf("row %d: %d times (%d distinct)", n, seen[float64(n)], len(seen))
		}
	}
}
