package main

// The postgres sink through the binary, against the real server of
// scripts/postgres.sh (skipped without SLUICE_POSTGRES_URL) and, for Kafka
// sources, the real broker of scripts/kafka.sh: datagen → postgres exactly
// once across kill -9 and --from, Kafka → map → postgres upsert read
// twice, examples/pipelines/kafka-to-postgres.yaml, and the errors a user
// meets (wrong password, missing table or column, a row the table
// rejects). Tables are read back with pgx, independently of the sink.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"
)

func pgURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("SLUICE_POSTGRES_URL")
	if u == "" {
		t.Skip("SLUICE_POSTGRES_URL is not set: start a server with `eval \"$(scripts/postgres.sh start)\"; export SLUICE_POSTGRES_URL`")
	}
	return u
}

// pgQuery runs sql on a connection of its own and collects the rows (of
// one column).
func pgQuery[R any](t *testing.T, sql string, args ...any) []R {
	t.Helper()
	return pgCollect(t, pgx.RowTo[R], sql, args...)
}

// pgStructs is pgQuery for rows of several columns, into structs by
// position.
func pgStructs[R any](t *testing.T, sql string, args ...any) []R {
	t.Helper()
	return pgCollect(t, pgx.RowToStructByPos[R], sql, args...)
}

func pgCollect[R any](t *testing.T, fn pgx.RowToFunc[R], sql string, args ...any) []R {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	out, err := pgx.CollectRows(rows, fn)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return out
}

func pgExec(t *testing.T, sqls ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, s := range sqls {
		if _, err := conn.Exec(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

var pgSeq atomic.Int64 // parallel tests make tables

// pgTable creates a table of a new name with column definitions defs and
// drops it at the end of the test.
func pgTable(t *testing.T, prefix, defs string) string {
	t.Helper()
	name := fmt.Sprintf("cli_%s_%d_%d", prefix, time.Now().UnixNano()%1e9, pgSeq.Add(1))
	pgExec(t, fmt.Sprintf("CREATE TABLE %s (%s)", name, defs))
	t.Cleanup(func() { pgExec(t, "DROP TABLE IF EXISTS "+name) })
	return name
}

// pgCount returns the number of rows of table.
func pgCount(t *testing.T, table string) int64 {
	t.Helper()
	return pgQuery[int64](t, "SELECT count(*) FROM "+table)[0]
}

// noPrepared fails if a prepared transaction of the database is left.
func noPrepared(t *testing.T) {
	t.Helper()
	if gids := pgQuery[string](t, "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()"); len(gids) > 0 {
		t.Errorf("prepared transactions left: %q", gids)
	}
}

const genToPostgres = `name: ${NAME}
parallelism: 2
checkpoint:
  interval: 100ms
  dir: ${OUT}/checkpoints
restart:
  strategy: fixed-delay
  attempts: 3
  delay: 100ms
source:
  type: datagen
  options:
    count: ${COUNT}
    splits: 4
    rate: ${RATE}
sink:
  type: postgres
  options:
    url: ${PG_URL}
    table: ${TABLE}
    batch-size: 500
`

// TestPostgresKill9Resume runs datagen → postgres exactly once (the
// default delivery), kills the process with SIGKILL after rows were
// committed and resumes with --from: the table (no key: a row written
// twice would show) holds every record exactly once with its values, and
// no prepared transaction is left.
func TestPostgresKill9Resume(t *testing.T) {
	u := pgURL(t)
	const count = 20000
	table := pgTable(t, "kill9", `id bigint NOT NULL, amount bigint, "user" text`)
	file := writePipeline(t, t.TempDir(), genToPostgres)
	out := t.TempDir()
	env := []string{"NAME=pg-killed", "OUT=" + out, fmt.Sprint("COUNT=", count), "RATE=4000", "PG_URL=" + u, "TABLE=" + table}
	p := start(t, env, "run", "--progress", "off", file)
	for i := 0; pgCount(t, table) < 2000; i++ {
		if i == 1200 { // a hang guard (2 minutes), not a timing assertion
			t.Fatalf("the pipeline committed too little:\n%s", p.stderr())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	if n := pgCount(t, table); n >= count {
		t.Fatalf("the killed run wrote all %d rows already; kill earlier", n)
	}
	r := run(t, env, "run", "--progress", "off", "--from", filepath.Join(out, "checkpoints"), file)
	if r.code != 0 {
		t.Fatalf("resume: exit %d\n%s", r.code, r.stderr)
	}
	if m := lossRE.FindAllString(r.stderr, -1); len(m) > 0 {
		t.Errorf("the resumed run logged %q:\n%s", m, r.stderr)
	}
	checkDatagenTable(t, table, count)
	noPrepared(t)
}

// checkDatagenTable checks that table holds datagen's records 0..count-1
// once each, with their values.
func checkDatagenTable(t *testing.T, table string, count int64) {
	t.Helper()
	type row struct {
		ID     int64
		Amount int64
		User   string
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT id, amount, "user" FROM `+table+` ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[int64]int, count)
	bad := 0
	for _, r := range got {
		seen[r.ID]++
		if r.Amount != r.ID*37%1000 || r.User != fmt.Sprintf("user-%d", r.ID%10) {
			if bad++; bad <= 5 {
				t.Errorf("row %+v: wrong values", r)
			}
		}
	}
	missing, twice := 0, 0
	for i := range count {
		switch seen[i] {
		case 0:
			missing++
		case 1:
		default:
			twice++
		}
	}
	if missing > 0 || twice > 0 || int64(len(got)) != count {
		t.Errorf("table %s: %d rows for %d records: %d missing, %d more than once", table, len(got), count, missing, twice)
	}
}

// produceJSON writes records with the given keys and JSON values to topic.
func produceJSON(t *testing.T, brokers, topic string, keys []string, values []map[string]any) {
	t.Helper()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(keys[i]), Value: b}
	}
	produceRecs(t, brokers, topic, recs)
}

const kafkaToPostgresUpsert = `name: pg-upsert
parallelism: 2
delivery: at-least-once
checkpoint:
  interval: 100ms
source:
  type: kafka
  options:
    brokers: ["${BROKERS}"]
    topics: ["${TOPIC}"]
    scan.bounded.mode: latest-offset
transforms:
  - map: '{"k": k, "v": v * 2, "note": "seen " + string(v)}'
sink:
  type: postgres
  options:
    url: ${PG_URL}
    table: ${TABLE}
    mode: upsert
`

// TestPostgresUpsertReread reads a Kafka topic whose 1000 records update
// 100 keys, maps them and upserts them (at-least-once); then it runs the
// pipeline again without --from, reading every record again. Each time
// the table holds exactly one row per key with the key's last values.
func TestPostgresUpsertReread(t *testing.T) {
	u := pgURL(t)
	brokers := kafkaBrokers(t)
	topic := kafkaTopic(t, brokers, nil)
	const n, keys = 1000, 100
	ks := make([]string, n)
	vs := make([]map[string]any, n)
	for i := range n {
		ks[i] = fmt.Sprint(i % keys) // one key, one partition: its records in order
		vs[i] = map[string]any{"k": i % keys, "v": i, "ignored": "x"}
	}
	produceJSON(t, brokers, topic, ks, vs)
	table := pgTable(t, "upsert", "k bigint PRIMARY KEY, v bigint NOT NULL, note text")
	file := writePipeline(t, t.TempDir(), kafkaToPostgresUpsert)
	env := []string{"BROKERS=" + brokers, "TOPIC=" + topic, "PG_URL=" + u, "TABLE=" + table}
	for pass := 1; pass <= 2; pass++ {
		r := run(t, env, "run", "--progress", "off", file)
		if r.code != 0 {
			t.Fatalf("run %d: exit %d\n%s", pass, r.code, r.stderr)
		}
		type row struct {
			K    int64
			V    int64
			Note string
		}
		got := pgStructs[row](t, "SELECT k, v, note FROM "+table+" ORDER BY k")
		if len(got) != keys {
			t.Errorf("run %d: %d rows, want %d (one per key)", pass, len(got), keys)
		}
		for _, r := range got {
			last := int64(n-keys) + r.K
			if r.V != 2*last || r.Note != fmt.Sprint("seen ", last) {
				t.Errorf("run %d: row %+v; want v=%d note=%q (the key's last record)", pass, r, 2*last, fmt.Sprint("seen ", last))
			}
		}
	}
	noPrepared(t)
}

// TestPostgresExamplePipeline runs examples/pipelines/kafka-to-postgres.yaml
// as its comment says, bounded, over orders that update each other: the
// table holds each order's last state once.
func TestPostgresExamplePipeline(t *testing.T) {
	u := pgURL(t)
	brokers := kafkaBrokers(t)
	topic := kafkaTopic(t, brokers, nil)
	const n, orders = 600, 150
	ks := make([]string, n)
	vs := make([]map[string]any, n)
	for i := range n {
		id := i % orders
		ks[i] = fmt.Sprint(id)
		vs[i] = map[string]any{"id": id, "customer": fmt.Sprintf("c-%d", id%7), "amount": json.Number(fmt.Sprintf("%d.%02d", i, i%100)), "status": fmt.Sprint("step-", i/orders)}
	}
	produceJSON(t, brokers, topic, ks, vs)
	table := pgTable(t, "orders", "id bigint PRIMARY KEY, customer text NOT NULL, amount numeric(12,2) NOT NULL, status text, source text")
	// The password comes from a file; the URL has none.
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	pw, _ := pu.User.Password()
	pu.User = url.User(pu.User.Username())
	pwFile := filepath.Join(t.TempDir(), "pgpass")
	if err := os.WriteFile(pwFile, []byte(pw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"KAFKA_BROKERS=" + brokers, "IN=" + topic, "POSTGRES_URL=" + pu.String(), "POSTGRES_PASSWORD_FILE=" + pwFile,
		"TABLE=" + table, "CHECKPOINTS=" + filepath.Join(t.TempDir(), "checkpoints"), "BOUNDED=latest-offset", "CHECKPOINT_INTERVAL=200ms"}
	r := run(t, env, "run", "--progress", "off", pipelines+"kafka-to-postgres.yaml")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	if strings.Contains(r.stderr, pw) {
		t.Errorf("the password is shown:\n%s", r.stderr)
	}
	type row struct {
		ID       int64
		Customer string
		Amount   string
		Status   string
		Source   string
	}
	got := pgStructs[row](t, "SELECT id, customer, amount::text, status, source FROM "+table+" ORDER BY id")
	if len(got) != orders {
		t.Errorf("%d rows, want %d", len(got), orders)
	}
	for _, r := range got {
		last := n - orders + int(r.ID)
		want := row{r.ID, fmt.Sprintf("c-%d", r.ID%7), fmt.Sprintf("%d.%02d", last, last%100), fmt.Sprint("step-", last/orders), ""}
		if r.Customer != want.Customer || r.Amount != want.Amount || r.Status != want.Status || !strings.HasPrefix(r.Source, topic+"/") {
			t.Errorf("row %+v; want %+v with source %s/<partition>/<offset>", r, want, topic)
		}
	}
	noPrepared(t)
}

const pgErrPipeline = `name: pg-errors
parallelism: 1
checkpoint:
  interval: 100ms
restart:
  strategy: fixed-delay
  attempts: 1
  delay: 100ms
source:
  type: file
  options:
    paths: ["${IN}"]
sink:
  type: postgres
  options:
    url: ${PG_URL}
    password: ${PG_PASSWORD:-}
    table: ${TABLE}
    columns: ${COLUMNS:-}
    mode: ${MODE:-append}
    setup-timeout: 20s
`

// TestPostgresErrors runs pipelines that fail through the binary: each
// exits 1 at once (no restart: the same error would come back) with an
// error naming what is wrong and where, and never the password.
func TestPostgresErrors(t *testing.T) {
	u := pgURL(t)
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	good, _ := pu.User.Password()
	file := writePipeline(t, t.TempDir(), pgErrPipeline)
	in := filepath.Join(t.TempDir(), "in.jsonl")
	if err := os.WriteFile(in, []byte(`{"id": 1, "amount": 10}
{"id": 2, "amount": 20}
{"id": 3, "amount": -5}
{"id": 4, "amount": 40}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	table := pgTable(t, "err", "id bigint PRIMARY KEY, amount bigint CONSTRAINT positive_amount CHECK (amount > 0)")
	base := []string{"IN=" + in, "PG_URL=" + u, "TABLE=" + table}
	cases := []struct {
		name string
		env  []string
		want []string
	}{
		{"wrong password", []string{"PG_PASSWORD=not-the-Passw0rd"},
			[]string{pu.Host, "password authentication failed", `"` + pu.User.Username() + `"`}},
		{"missing table", []string{"TABLE=no_such_table"},
			[]string{`table "${TABLE}" does not exist`}}, // values from the environment are shown as their variable
		{"missing column", []string{"COLUMNS=id,amount,note"},
			[]string{`table public.${TABLE} has no column "note"`, "amount bigint"}},
		{"record field not a column", []string{"IN=" + writeLines(t, `{"id": 1, "amount": 10, "typo": true}`)},
			[]string{`field "typo" is not a column of table public.${TABLE}`, "file ${IN} line 1"}},
		{"rejected row", nil,
			[]string{"table public.${TABLE} rejected record 2 of subtask 0 (file ${IN} line 3 (offset 48))", `constraint "positive_amount"`, "id=3"}},
		{"rejected row upsert", []string{"MODE=upsert"},
			[]string{"table public.${TABLE} rejected record 2 of subtask 0 (file ${IN} line 3 (offset 48))", `constraint "positive_amount"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pgExec(t, "TRUNCATE "+table)
			r := run(t, append(append([]string{}, base...), c.env...), "run", "--progress", "off", file)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr does not name %q:\n%s", w, r.stderr)
				}
			}
			if strings.Contains(r.stderr, "restarting from") || !strings.Contains(r.stderr, "failed without restarting") {
				t.Errorf("the job restarted: a restart cannot fix this error\n%s", r.stderr)
			}
			for _, secret := range []string{good, "not-the-Passw0rd"} {
				if strings.Contains(r.stderr, secret) {
					t.Errorf("stderr shows a password:\n%s", r.stderr)
				}
			}
			noPrepared(t)
		})
	}
	// The rejected row stopped the job: nothing of its checkpoint interval
	// was committed (exactly-once), so no row is in the table.
	if n := pgCount(t, table); n != 0 {
		t.Errorf("%d rows after the failed runs", n)
	}
}

// writeLines writes lines to a new file and returns its path.
func writeLines(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "lines.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPostgresConfigErrors: options the sink refuses at load name the
// option's line and never show the url.
func TestPostgresConfigErrors(t *testing.T) {
	const pipe = `source:
  type: datagen
  options: {count: 10}
delivery: ${DELIVERY:-exactly-once}
sink:
  type: postgres
  options:
    url: ${PG_URL}
    table: t
    %s
`
	cases := []struct{ opts, env, want string }{
		{"key: [id]", "", "key: only with mode: upsert"},
		{"transaction-prefix: a/b", "", "transaction-prefix: character '/' not allowed"},
		{"transaction-prefix: abc", "DELIVERY=at-least-once", "transaction-prefix: only with delivery: exactly-once"},
		{"password: x\n    password-file: /nonexistent", "", "password-file: password is set too"},
		{"mode: merge", "", "mode: want one of append, upsert"},
		{"batch-size: 0", "", "batch-size: must be between 1 and"},
	}
	for _, c := range cases {
		file := writePipeline(t, t.TempDir(), fmt.Sprintf(pipe, c.opts))
		env := []string{"PG_URL=postgres://u:SecretPassw0rd@127.0.0.1:1/db"}
		if c.env != "" {
			env = append(env, c.env)
		}
		r := run(t, env, "validate", file)
		if r.code == 0 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("%s: exit %d, want an error naming %q:\n%s", c.opts, r.code, c.want, r.stderr)
		}
		if strings.Contains(r.stderr, "SecretPassw0rd") {
			t.Errorf("%s: the password is shown:\n%s", c.opts, r.stderr)
		}
	}
	file := writePipeline(t, t.TempDir(), fmt.Sprintf(pipe, ""))
	r := run(t, []string{"PG_URL=postgres://u:SecretPassw0rd@127.0.0.1:notaport/db"}, "validate", file)
	if r.code == 0 || !strings.Contains(r.stderr, "url: not a PostgreSQL URL") || strings.Contains(r.stderr, "SecretPassw0rd") {
		t.Errorf("a bad url: exit %d, want an error naming url without its value:\n%s", r.code, r.stderr)
	}
}

// TestPostgresTextValues writes JSON strings into timestamptz, timestamp,
// date, uuid and numeric columns in both modes: the table holds the same
// values either way. (Append writes with COPY in the binary format, into
// which pgx encodes no Go string for these types: before, every such
// record failed the job with "cannot find encode plan".) A string that is
// no such value fails the job naming the column and the record.
func TestPostgresTextValues(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	u := pgURL(t)
	in := writeLines(t,
		`{"id": 1, "tz": "2026-12-01T06:30:00Z", "ts": "2026-12-01T06:30:00.5Z", "d": "2026-12-01", "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "n": "12.50"}`,
		`{"id": 2, "tz": "2026-12-01 07:30:00+01", "ts": "2026-12-01 06:30:00", "d": "2026-12-02", "u": null, "n": 3.25}`,
		`{"id": 3, "tz": "2026-12-01T08:30:00.123456+02:00", "ts": null, "d": null, "u": null, "n": 1000}`)
	const pipe = `parallelism: 1
restart:
  strategy: none
source:
  type: file
  options:
    paths: ["${IN}"]
sink:
  type: postgres
  options:
    url: ${PG_URL}
    table: ${TABLE}
    mode: ${MODE}
`
	file := writePipeline(t, t.TempDir(), pipe)
	want := []string{
		"1|2026-12-01 06:30:00+00|2026-12-01 06:30:00.5|2026-12-01|a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11|12.50",
		"2|2026-12-01 06:30:00+00|2026-12-01 06:30:00|2026-12-02||3.25",
		"3|2026-12-01 06:30:00.123456+00||||1000",
	}
	for _, mode := range []string{"append", "upsert"} {
		table := pgTable(t, "text", "id bigint PRIMARY KEY, tz timestamptz, ts timestamp, d date, u uuid, n numeric")
		r := run(t, []string{"IN=" + in, "PG_URL=" + u, "TABLE=" + table, "MODE=" + mode}, "run", "--progress", "off", file)
		if r.code != 0 {
			t.Fatalf("%s: exit %d\n%s", mode, r.code, r.stderr)
		}
		got := pgQuery[string](t, `SELECT concat_ws('|', id, to_char(tz AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US'),
			coalesce(ts::text, ''), coalesce(d::text, ''), coalesce(u::text, ''), coalesce(n::text, ''))
			FROM `+table+` ORDER BY id`)
		for i := range got {
			// to_char gives 6 fraction digits: cut the zeros, add +00.
			f := strings.Split(got[i], "|")
			f[1] = strings.TrimSuffix(strings.TrimRight(f[1], "0"), ".") + "+00"
			got[i] = strings.Join(f, "|")
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("%s: table\n%s\nwant\n%s", mode, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
	table := pgTable(t, "badtext", "id bigint PRIMARY KEY, tz timestamptz")
	bad := writeLines(t, `{"id": 1, "tz": "2026-12-01T06:30:00Z"}`, `{"id": 2, "tz": "yesterday-ish"}`)
	r := run(t, []string{"IN=" + bad, "PG_URL=" + u, "TABLE=" + table, "MODE=append"}, "run", "--progress", "off", file)
	for _, w := range []string{`column "tz" (timestamp with time zone)`, "record 1 of subtask 0 (file ${IN} line 2", "table public.${TABLE}"} {
		if r.code != 1 || !strings.Contains(r.stderr, w) {
			t.Errorf("an unparsable timestamp: exit %d, want 1 and an error naming %q:\n%s", r.code, w, r.stderr)
		}
	}
}

// TestPostgresRejectedKafkaRecord: a Kafka record the table rejects fails
// the job naming its topic, partition and offset.
func TestPostgresRejectedKafkaRecord(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	u := pgURL(t)
	brokers := kafkaBrokers(t)
	topic := kafkaTopic(t, brokers, nil)
	ks := []string{"a", "a", "a"}
	vs := []map[string]any{{"k": 1, "v": 1}, {"k": 2, "v": 2}, {"k": 3, "v": nil}}
	produceJSON(t, brokers, topic, ks, vs)
	table := pgTable(t, "kreject", "k bigint PRIMARY KEY, v bigint NOT NULL, note text")
	file := writePipeline(t, t.TempDir(), strings.Replace(kafkaToPostgresUpsert, `  - map: '{"k": k, "v": v * 2, "note": "seen " + string(v)}'`, `  - map: '{"k": k, "v": v}'`, 1))
	r := run(t, []string{"BROKERS=" + brokers, "TOPIC=" + topic, "PG_URL=" + u, "TABLE=" + table}, "run", "--progress", "off", file)
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	for _, w := range []string{"table public.${TABLE} rejected record", `(topic "${TOPIC}" partition `, " offset 2)", `column "v"`, "SQLSTATE 23502"} {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr does not name %q:\n%s", w, r.stderr)
		}
	}
}
