package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// order is the input record i of the Parquet tests, as the JSON value
// produced and as the row expected back.
type order struct {
	id       int64
	customer string
	country  string // "" = missing from the JSON
	cents    int64  // total, as the decimal(10,2)'s unscaled value
	placed   time.Time
}

var orderBase = time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)

func makeOrder(i int) order {
	o := order{id: int64(i), customer: fmt.Sprintf("c-%d", i%97), cents: int64(i*731) % 1000000,
		placed: orderBase.Add(time.Duration(i) * 37 * time.Second)}
	if i%5 != 0 {
		o.country = []string{"FR", "DE", "JP", "US"}[i%4]
	}
	return o
}

func (o order) json() []byte {
	country := ""
	if o.country != "" {
		country = fmt.Sprintf(`, "country": %q`, o.country)
	}
	return fmt.Appendf(nil, `{"id": %d, "customer": %q%s, "total": %d.%02d, "placed": %q}`,
		o.id, o.customer, country, o.cents/100, o.cents%100, o.placed.Format(time.RFC3339))
}

// parquetRow is a row as read back from a committed Parquet file, with
// the partition directory it is in.
type parquetRow struct {
	dir, file string
	id        int64
	customer  string
	country   *string
	cents     int64
	placedMs  int64
}

// readParquetDir reads every committed (not hidden) Parquet file under
// dir with parquet-go itself, not with sluice's reader.
func readParquetDir(t *testing.T, dir string) []parquetRow {
	t.Helper()
	var rows []parquetRow
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if strings.HasPrefix(d.Name(), ".") && p != dir {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil // a hidden in-progress part file
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), ".parquet") {
			return nil
		}
		rel, _ := filepath.Rel(dir, filepath.Dir(p))
		rs, err := readParquetFile(p)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		for i := range rs {
			rs[i].dir, rs[i].file = filepath.ToSlash(rel), p
		}
		rows = append(rows, rs...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func readParquetFile(name string) ([]parquetRow, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		return nil, err
	}
	col := map[string]int{}
	for _, c := range []string{"id", "customer", "country", "total", "placed"} {
		leaf, ok := pf.Schema().Lookup(c)
		if !ok {
			return nil, fmt.Errorf("no column %s in %s", c, pf.Schema())
		}
		col[c] = leaf.ColumnIndex
	}
	var out []parquetRow
	buf := make([]parquet.Row, 64)
	for _, rg := range pf.RowGroups() {
		rows := rg.Rows()
		for {
			n, err := rows.ReadRows(buf)
			for _, r := range buf[:n] {
				var pr parquetRow
				for _, v := range r {
					switch v.Column() {
					case col["id"]:
						pr.id = v.Int64()
					case col["customer"]:
						pr.customer = string(v.ByteArray())
					case col["country"]:
						if !v.IsNull() {
							s := string(v.ByteArray())
							pr.country = &s
						}
					case col["total"]:
						pr.cents = v.Int64()
					case col["placed"]:
						pr.placedMs = v.Int64()
					}
				}
				out = append(out, pr)
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				rows.Close()
				return nil, err
			}
		}
		rows.Close()
	}
	return out, nil
}

// waitParquetRows waits until the committed Parquet files under dir hold
// at least want rows (bounded by two minutes and by the process's end).
func waitParquetRows(t *testing.T, p *proc, dir string, want int) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for n := 0; ; {
		if n = len(readParquetDir(t, dir)); n >= want {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("sluice ended with %d of %d rows committed:\n%s", n, want, p.stderr())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d rows committed after two minutes:\n%s", n, want, p.stderr())
		}
	}
}

// TestKafkaToParquetExampleKill9Resume runs examples/pipelines/kafka-to-parquet.yaml
// against the real broker: JSON orders in, Parquet files out under
// dt=<placed's day>/country=<country>/, killed with -9 after some
// checkpoints and resumed with --from. Every committed file, read with
// parquet-go directly, holds complete rows; every input order is there
// exactly once, with its values, in the directory its partition values
// name (a missing country under __HIVE_DEFAULT_PARTITION__).
func TestKafkaToParquetExampleKill9Resume(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	brokers := kafkaBrokers(t)
	const half = 3000
	topic := kafkaTopic(t, brokers, nil)
	orders := make([]order, 2*half)
	recs := make([]*kgo.Record, 2*half)
	for i := range orders {
		orders[i] = makeOrder(i)
		recs[i] = &kgo.Record{Topic: topic, Value: orders[i].json()}
	}
	produceRecs(t, brokers, topic, recs[:half])
	dir := t.TempDir()
	out, ckpt := filepath.Join(dir, "orders"), filepath.Join(dir, "checkpoints")
	schema, err := filepath.Abs(pipelines + "orders.avsc")
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"NAME=orders-parquet", "KAFKA_BROKERS=" + brokers, "IN=" + topic, "OUT=" + out,
		"CHECKPOINTS=" + ckpt, "CHECKPOINT_INTERVAL=200ms", "SCHEMA_FILE=" + schema}
	file := pipelines + "kafka-to-parquet.yaml"

	p := start(t, env, "run", "--progress", "off", file)
	waitParquetRows(t, p, out, half/4)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	produceRecs(t, brokers, topic, recs[half:])
	p = start(t, env, "run", "--progress", "off", "--from", ckpt, file)
	waitParquetRows(t, p, out, 2*half)
	stopWithSIGTERM(t, p)

	rows := readParquetDir(t, out)
	seen := make([]int, len(orders))
	files := map[string]bool{}
	for _, r := range rows {
		if r.id < 0 || r.id >= int64(len(orders)) {
			t.Fatalf("%s: row with id %d, not an input order", r.file, r.id)
		}
		seen[r.id]++
		files[r.file] = true
		o := orders[r.id]
		country := ""
		if r.country != nil {
			country = *r.country
		}
		if r.customer != o.customer || country != o.country || r.cents != o.cents || r.placedMs != o.placed.UnixMilli() {
			t.Fatalf("%s: row %+v, want %+v", r.file, r, o)
		}
		dirCountry := o.country
		if dirCountry == "" {
			dirCountry = "__HIVE_DEFAULT_PARTITION__"
		}
		if want := "dt=" + o.placed.UTC().Format("2006-01-02") + "/country=" + dirCountry; r.dir != want {
			t.Fatalf("%s: order %d is in %s, want %s", r.file, r.id, r.dir, want)
		}
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("order %d is %d times in the output, want once (%d rows in %d files)", id, n, len(rows), len(files))
		}
	}
	t.Logf("%d rows in %d Parquet files", len(rows), len(files))
}

// roundTripLines are JSON lines as the json format writes them (keys
// sorted, no spaces), with every field of roundTripSchema.
func roundTripLines(n int) []string {
	lines := make([]string, n)
	for i := range lines {
		note := "null"
		if i%3 != 0 {
			note = fmt.Sprintf("%q", fmt.Sprintf("note %d ünïcode", i))
		}
		lines[i] = fmt.Sprintf(`{"address":{"city":"city-%d","zip":"%05d"},"id":%d,"note":%s,"ok":%t,"score":%d.25,"tags":["a%d","b"]}`,
			i%13, i, i, note, i%2 == 0, i%1000, i)
	}
	return lines
}

const roundTripSchema = `{"type": "record", "name": "Event", "fields": [
  {"name": "id", "type": "long"},
  {"name": "ok", "type": "boolean"},
  {"name": "score", "type": "double"},
  {"name": "note", "type": ["null", "string"], "default": null},
  {"name": "tags", "type": {"type": "array", "items": "string"}},
  {"name": "address", "type": {"type": "record", "name": "Address", "fields": [
    {"name": "city", "type": "string"}, {"name": "zip", "type": "string"}]}}]}`

// TestFileAvroParquetRoundTrip: JSON lines → file sink format avro (and
// parquet) → file source of the same format → JSON lines: the output
// lines equal the input lines (each once).
func TestFileAvroParquetRoundTrip(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	lines := roundTripLines(3000)
	for _, c := range []struct{ name, format, extra string }{
		{"avro", "avro", "avro.codec: deflate"},
		{"parquet", "parquet", "parquet.compression: zstd"},
		// One checkpoint (the final one): the subtasks' small files merged
		// into one, record by record.
		{"avro compacted", "avro", "compact-below: 10000000"},
		{"parquet compacted", "parquet", "compact-below: 10000000"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			in, mid, out := filepath.Join(dir, "in"), filepath.Join(dir, "mid"), filepath.Join(dir, "out")
			if err := os.MkdirAll(in, 0o755); err != nil {
				t.Fatal(err)
			}
			for k := range 3 {
				part := lines[k*1000 : (k+1)*1000]
				if err := os.WriteFile(filepath.Join(in, fmt.Sprintf("in-%d.jsonl", k)), []byte(strings.Join(part, "\n")+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(dir, "event.avsc"), []byte(roundTripSchema), 0o600); err != nil {
				t.Fatal(err)
			}
			interval := "50ms"
			if strings.Contains(c.extra, "compact") {
				interval = "1h"
			}
			toBulk := writePipeline(t, t.TempDir(), fmt.Sprintf(`name: to-%[1]s
parallelism: 2
checkpoint:
  interval: %[3]s
source:
  type: file
  options:
    paths: ["${IN}"]
sink:
  type: file
  options:
    path: ${MID}
    format: %[1]s
    schema-file: ${SCHEMA}
    %[2]s
`, c.format, c.extra, interval))
			env := []string{"IN=" + in, "MID=" + mid, "OUT=" + out, "SCHEMA=" + filepath.Join(dir, "event.avsc")}
			if r := run(t, env, "run", "--progress", "off", toBulk); r.code != 0 {
				t.Fatalf("to %s: exit %d\n%s", c.format, r.code, r.stderr)
			}
			entries, err := os.ReadDir(mid)
			if err != nil {
				t.Fatal(err)
			}
			nfiles, compacted := 0, 0
			for _, e := range entries {
				if !strings.HasPrefix(e.Name(), ".") {
					if !strings.HasSuffix(e.Name(), "."+c.format) {
						t.Fatalf("part file %s: want the suffix .%s", e.Name(), c.format)
					}
					nfiles++
					if strings.Contains(e.Name(), "-compacted-") {
						compacted++
					}
				}
			}
			// Both subtasks' files of the one checkpoint are merged (a
			// subtask that got no input file writes none: then one
			// file is left as it is).
			if strings.Contains(c.extra, "compact") && nfiles != 1 {
				t.Fatalf("%d files (%d compacted), want one", nfiles, compacted)
			}
			fromBulk := writePipeline(t, t.TempDir(), fmt.Sprintf(`name: from-%s
parallelism: 2
checkpoint:
  interval: 50ms
source:
  type: file
  options:
    paths: ["${MID}"]
    format: %[1]s
sink:
  type: file
  options:
    path: ${OUT}
`, c.format))
			if r := run(t, env, "run", "--progress", "off", fromBulk); r.code != 0 {
				t.Fatalf("from %s: exit %d\n%s", c.format, r.code, r.stderr)
			}
			got := committedLines(t, out)
			want := slices.Sorted(slices.Values(lines))
			if !slices.Equal(got, want) {
				for i := range min(len(got), len(want)) {
					if got[i] != want[i] {
						t.Fatalf("%d lines out, %d in; first difference:\n got %s\nwant %s", len(got), len(want), got[i], want[i])
					}
				}
				t.Fatalf("%d lines out, %d in", len(got), len(want))
			}
			t.Logf("%d records through %d %s files (%d compacted)", len(got), nfiles, c.name, compacted)
		})
	}
}

// TestFileFormatErrors: configuration errors name the option's line;
// a record that does not fit the schema fails the job (exit 1) naming
// the field and the record's file and offset, or goes to the dead
// letters under on-error: dead-letter; a corrupt Avro or Parquet input
// file fails the job naming the file and the offset.
func TestFileFormatErrors(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	const sinkPipeline = `name: errors
restart: {strategy: none}
checkpoint:
  interval: 100ms
source:
  type: file
  options:
    paths: ["${IN}"]
%ssink:
  type: file
  options:
    path: ${OUT}
%s`
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	input := "{\"id\": 1, \"name\": \"a\"}\n{\"id\": 2, \"name\": \"b\"}\n{\"id\": \"three\", \"name\": \"c\"}\n{\"id\": 4, \"name\": \"d\"}\n"
	if err := os.WriteFile(filepath.Join(in, "a.jsonl"), []byte(input), 0o600); err != nil {
		t.Fatal(err)
	}
	schema := `'{"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}]}'`
	for _, c := range []struct {
		name, top, sink string
		want            []string
	}{
		{"missing schema", "", "    format: parquet\n", []string{"pipeline.yaml:13: sink.options.format: parquet needs schema or schema-file"}},
		{"invalid schema", "", "    format: avro\n    schema: '{\"type\": \"record\", \"name\": \"R\", \"fields\": [{\"name\": \"id\", \"type\": \"nope\"}]}'\n",
			[]string{"pipeline.yaml:14: sink.options.schema: ", "invalid configuration", "nope"}},
		{"not a record", "", "    format: parquet\n    schema: '\"string\"'\n", []string{"pipeline.yaml:14: sink.options.schema: ", "want a record"}},
		{"missing schema file", "", "    format: avro\n    schema-file: ${OUT}/none.avsc\n", []string{"pipeline.yaml:14: sink.options.schema-file: cannot read the file (path from the environment not shown)"}},
		{"codec", "", "    format: avro\n    schema: " + schema + "\n    avro.codec: lzma\n", []string{"pipeline.yaml:15: sink.options.avro.codec: "}},
		{"codec of the other format", "", "    format: parquet\n    schema: " + schema + "\n    avro.codec: deflate\n", []string{"pipeline.yaml:15: sink.options.avro.codec: applies to format avro only"}},
		{"schema for json", "", "    schema: " + schema + "\n", []string{"pipeline.yaml:13: sink.options.schema: applies to format avro or parquet"}},
		{"partition-by", "", "    partition-by: [\"dt=2006-01-02\"]\n", []string{"pipeline.yaml:13: sink.options.partition-by: ", "the @ is missing"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := writePipeline(t, t.TempDir(), fmt.Sprintf(sinkPipeline, c.top, c.sink))
			r := run(t, []string{"IN=" + in, "OUT=" + t.TempDir()}, "validate", file)
			if r.code != 2 {
				t.Fatalf("exit %d, want 2\n%s", r.code, r.stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(r.stderr, w) {
					t.Fatalf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
		})
	}

	for _, f := range []string{"avro", "parquet"} {
		t.Run("value does not fit "+f, func(t *testing.T) {
			out := t.TempDir()
			file := writePipeline(t, t.TempDir(), fmt.Sprintf(sinkPipeline, "", "    format: "+f+"\n    schema: "+schema+"\n"))
			r := run(t, []string{"IN=" + in, "OUT=" + out}, "run", "--progress", "off", file)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
			}
			for _, w := range []string{fmt.Sprintf("option schema at file ${IN}/a.jsonl offset %d", strings.Index(input, `{"id": "three"`)), `field id: string "three" for long`, "without restarting"} {
				if !strings.Contains(r.stderr, w) {
					t.Fatalf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
		})
		t.Run("value does not fit "+f+" dead letter", func(t *testing.T) {
			out := t.TempDir()
			file := writePipeline(t, t.TempDir(), fmt.Sprintf(sinkPipeline, "on-error: dead-letter\n", "    format: "+f+"\n    schema: "+schema+`
dead-letter:
  type: file
  options:
    path: ${OUT}/dead
`))
			r := run(t, []string{"IN=" + in, "OUT=" + out}, "run", "--progress", "off", file)
			if r.code != 0 {
				t.Fatalf("exit %d\n%s", r.code, r.stderr)
			}
			dead := committedLines(t, filepath.Join(out, "dead"))
			if len(dead) != 1 || !strings.Contains(dead[0], `three`) || !strings.Contains(dead[0], `field id`) {
				t.Fatalf("dead letters %q, want the record with id three", dead)
			}
			// The other three records, read back with the file source.
			back := writePipeline(t, t.TempDir(), `name: back
source:
  type: file
  options:
    paths: ["${OUT}/*.`+f+`"]
    format: `+f+`
sink:
  type: file
  options:
    path: ${OUT}/back
`)
			if r := run(t, []string{"OUT=" + out}, "run", "--progress", "off", back); r.code != 0 {
				t.Fatalf("read back: exit %d\n%s", r.code, r.stderr)
			}
			got := committedLines(t, filepath.Join(out, "back"))
			want := []string{`{"id":1,"name":"a"}`, `{"id":2,"name":"b"}`, `{"id":4,"name":"d"}`}
			if !slices.Equal(got, want) {
				t.Fatalf("output %q, want %q", got, want)
			}
		})
	}

	// Corrupt inputs: a good Avro file made by the sink, then damaged.
	good := t.TempDir()
	ok := writePipeline(t, t.TempDir(), fmt.Sprintf(sinkPipeline, "", "    format: avro\n    schema: "+schema+"\n    avro.codec: \"null\"\n"))
	okIn := filepath.Join(dir, "ok")
	if err := os.MkdirAll(okIn, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(okIn, "a.jsonl"), []byte("{\"id\": 1, \"name\": \"a\"}\n{\"id\": 2, \"name\": \"b\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := run(t, []string{"IN=" + okIn, "OUT=" + good}, "run", "--progress", "off", ok); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	avroFiles, _ := filepath.Glob(filepath.Join(good, "part-*.avro"))
	if len(avroFiles) != 1 {
		t.Fatalf("Avro part files %q, want one", avroFiles)
	}
	valid, err := os.ReadFile(avroFiles[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, file string
		data       []byte
		want       []string
	}{
		// The last 16 bytes are the block's sync marker.
		{"avro sync marker", "bad.avro", append(slices.Clone(valid[:len(valid)-16]), make([]byte, 16)...), []string{"bad.avro", "corrupt block at offset", "wrong sync marker"}},
		{"avro header", "bad.avro", []byte("Obj\x01\x02garbage"), []string{`bad.avro at offset 0`}},
		{"parquet", "bad.parquet", []byte("PAR1 this is not a Parquet file PAR1"), []string{"bad.parquet at offset 0"}},
	} {
		t.Run("corrupt "+c.name, func(t *testing.T) {
			d := t.TempDir()
			if err := os.WriteFile(filepath.Join(d, c.file), c.data, 0o600); err != nil {
				t.Fatal(err)
			}
			f := strings.TrimPrefix(filepath.Ext(c.file), ".")
			file := writePipeline(t, t.TempDir(), `name: corrupt
restart: {strategy: none}
source:
  type: file
  options:
    paths: ["${IN}"]
    format: `+f+`
sink:
  type: file
  options:
    path: ${OUT}
`)
			r := run(t, []string{"IN=" + d, "OUT=" + t.TempDir()}, "run", "--progress", "off", file)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(r.stderr, w) {
					t.Fatalf("stderr lacks %q:\n%s", w, r.stderr)
				}
			}
		})
	}
}

// TestFileAvroReaderSchema: the avro file source's schema option is a
// reader schema: fields it lacks are dropped, fields the files lack take
// its default; an invalid one is refused at its line.
func TestFileAvroReaderSchema(t *testing.T) {
	dir := t.TempDir()
	in, mid, out := filepath.Join(dir, "in"), filepath.Join(dir, "mid"), filepath.Join(dir, "out")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	lines := roundTripLines(100)
	if err := os.WriteFile(filepath.Join(in, "a.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "event.avsc"), []byte(roundTripSchema), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"IN=" + in, "MID=" + mid, "OUT=" + out, "SCHEMA=" + filepath.Join(dir, "event.avsc")}
	toAvro := writePipeline(t, t.TempDir(), `name: to-avro
source: {type: file, options: {paths: ["${IN}"]}}
sink: {type: file, options: {path: "${MID}", format: avro, schema-file: "${SCHEMA}"}}
`)
	if r := run(t, env, "run", "--progress", "off", toAvro); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	const reader = `'{"type": "record", "name": "Event", "fields": [{"name": "id", "type": "long"}, {"name": "region", "type": "string", "default": "eu"}]}'`
	fromAvro := writePipeline(t, t.TempDir(), `name: from-avro
source:
  type: file
  options:
    paths: ["${MID}"]
    format: avro
    schema: `+reader+`
sink: {type: file, options: {path: "${OUT}"}}
`)
	if r := run(t, env, "run", "--progress", "off", fromAvro); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	got := committedLines(t, out)
	var want []string
	for i := range lines {
		want = append(want, fmt.Sprintf(`{"id":%d,"region":"eu"}`, i))
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("got %d lines (first %q), want %d (first %q)", len(got), got[:min(1, len(got))], len(want), want[0])
	}
	bad := writePipeline(t, t.TempDir(), `name: bad
source:
  type: file
  options:
    paths: ["${MID}"]
    format: avro
    schema: '{"type": "record", "name": "E", "fields": [{"name": "id", "type": "lng"}]}'
sink: {type: file, options: {path: "${OUT}"}}
`)
	if r := run(t, env, "validate", bad); r.code != 2 || !strings.Contains(r.stderr, "pipeline.yaml:7: source.options.schema: ") {
		t.Fatalf("exit %d, want 2 naming source.options.schema at line 7\n%s", r.code, r.stderr)
	}
}

// TestKafkaToParquetExampleValidates: the example is a valid pipeline
// (without a broker: validate reaches none), with its schema file found
// from the repository's root as its comment says.
func TestKafkaToParquetExampleValidates(t *testing.T) {
	dir := t.TempDir()
	cmd := []string{"validate", "examples/pipelines/kafka-to-parquet.yaml"}
	r := runIn(t, "../..", []string{"KAFKA_BROKERS=127.0.0.1:1", "IN=orders", "OUT=" + filepath.Join(dir, "out"), "CHECKPOINTS=" + filepath.Join(dir, "ckpt")}, cmd...)
	if r.code != 0 || !strings.Contains(r.stdout+r.stderr, "ok:") {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// runIn is run in another working directory.
func runIn(t *testing.T, wd string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), binary, args...)
	cmd.Dir = wd
	cmd.Env = append(os.Environ(), env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, out.String(), errb.String()}
}

// TestFilePartitionByJSONLines: partition-by works with the line formats
// too: JSON lines go under country=…/ (a missing country under
// __HIVE_DEFAULT_PARTITION__) with their input bytes unchanged.
func TestFilePartitionByJSONLines(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in"), filepath.Join(dir, "out")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{}
	var b strings.Builder
	for i := range 200 {
		o := makeOrder(i)
		line := string(o.json())
		b.WriteString(line + "\n")
		country := o.country
		if country == "" {
			country = "__HIVE_DEFAULT_PARTITION__"
		}
		want["country="+country] = append(want["country="+country], line)
	}
	if err := os.WriteFile(filepath.Join(in, "a.jsonl"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	file := writePipeline(t, t.TempDir(), `name: partitioned
parallelism: 2
source: {type: file, options: {paths: ["${IN}"]}}
sink: {type: file, options: {path: "${OUT}", partition-by: [country]}}
`)
	if r := run(t, []string{"IN=" + in, "OUT=" + out}, "run", "--progress", "off", file); r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	entries, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			dirs = append(dirs, e.Name())
		}
	}
	if len(dirs) != len(want) {
		t.Fatalf("directories %q, want %d", dirs, len(want))
	}
	for d, lines := range want {
		got := committedLines(t, filepath.Join(out, d))
		if !slices.Equal(got, slices.Sorted(slices.Values(lines))) {
			t.Fatalf("%s: %d lines %q…, want %d", d, len(got), got[:min(2, len(got))], len(lines))
		}
	}
}
