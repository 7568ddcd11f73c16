package main

// The schema-registry formats through the binary, against the real broker
// of scripts/kafka.sh and the real registry of scripts/schema-registry.sh
// (Apicurio Registry through its Confluent-compatible API); skipped when
// SLUICE_KAFKA_BROKERS or SLUICE_SCHEMA_REGISTRY is unset. The Avro round
// trip runs the example pipelines examples/pipelines/avro-registry.yaml
// (JSON lines → Avro in Kafka) and avro-to-file.yaml (Avro in Kafka →
// JSON lines) across a schema change, kill -9 and --from, and checks the
// topic with an independent reader (franz-go, the wire format parsed by
// hand, the registry asked with franz-go's sr).

import (
	"context"
	bin "encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/srtest"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
)

const (
	avroV1 = `{"type": "record", "name": "User", "namespace": "com.example", "fields": [
  {"name": "id", "type": "long"},
  {"name": "name", "type": "string"},
  {"name": "amount", "type": "double"},
  {"name": "seq", "type": "long"}
]}
`
	// avroV2 adds an optional field with a default: BACKWARD compatible
	// (the registry's level, set by scripts/schema-registry.sh).
	avroV2 = `{"type": "record", "name": "User", "namespace": "com.example", "fields": [
  {"name": "id", "type": "long"},
  {"name": "name", "type": "string"},
  {"name": "amount", "type": "double"},
  {"name": "seq", "type": "long"},
  {"name": "email", "type": ["null", "string"], "default": null}
]}
`
)

// userLine is input record i as a JSON line. Numbers are written as Go
// writes them back (amount the shortest float, seq beyond 2^53), so that
// "equal" can compare number literals exactly. With email (v2 input):
// i%3 == 0 has an address, 1 an explicit null, 2 no field.
func userLine(i int, email bool) string {
	amount := strconv.FormatFloat(float64(i)/8+0.1, 'f', -1, 64)
	s := fmt.Sprintf(`{"id":%d,"name":"user-%d","amount":%s,"seq":%d`, i, i, amount, int64(1)<<53+1+int64(i))
	if email {
		switch i % 3 {
		case 0:
			s += fmt.Sprintf(`,"email":"u%d@example.com"`, i)
		case 1:
			s += `,"email":null`
		}
	}
	return s + "}"
}

// decodeExact decodes a JSON object keeping number literals (json.Number).
func decodeExact(t *testing.T, line string) map[string]any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(line))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("%q: %v", line, err)
	}
	return m
}

func writeUserLines(t *testing.T, path string, from, to int, email bool) map[int]string {
	t.Helper()
	lines := map[int]string{}
	var b strings.Builder
	for i := from; i < to; i++ {
		lines[i] = userLine(i, email)
		b.WriteString(lines[i] + "\n")
	}
	// Written under another name and renamed, so that a discovering
	// source never sees half a file.
	tmp := filepath.Join(filepath.Dir(filepath.Dir(path)), filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	return lines
}

// schemaRegistry returns the registry's URL and a franz-go client of it,
// skipping the test without a broker or a registry.
func schemaRegistry(t *testing.T) (brokers, url string, cl *sr.Client) {
	t.Helper()
	brokers = kafkaBrokers(t)
	url = srtest.URL(t)
	// No idle connections are kept (goleak checks at the end).
	tr := &http.Transport{DisableKeepAlives: true}
	cl, err := sr.NewClient(sr.URLs(url), sr.HTTPClient(&http.Client{Transport: tr, Timeout: 30 * time.Second}))
	if err != nil {
		t.Fatal(err)
	}
	return brokers, url, cl
}

// wireRecord is a record of the topic as the independent reader sees it.
type wireRecord struct {
	schemaID int
	id       int64 // the Avro record's first field (a long: zig-zag varint)
}

// parseWire parses the Confluent wire format by hand: magic byte 0, the
// big-endian schema id, then (Avro) the payload, whose first field is the
// record's id.
func parseWire(t *testing.T, r *kgo.Record) wireRecord {
	t.Helper()
	v := r.Value
	if len(v) < 6 || v[0] != 0 {
		t.Fatalf("partition %d offset %d: not in the wire format: % x", r.Partition, r.Offset, v[:min(len(v), 8)])
	}
	id, n := bin.Varint(v[5:])
	if n <= 0 {
		t.Fatalf("partition %d offset %d: no Avro long after the header: % x", r.Partition, r.Offset, v)
	}
	return wireRecord{schemaID: int(bin.BigEndian.Uint32(v[1:5])), id: id}
}

// TestAvroRoundTripSchemaChangeKill9: JSON lines → Avro in Kafka (the
// avro-registry.yaml example, schema v1 auto-registered) → JSON lines (the
// avro-to-file.yaml example). The writer is killed with -9 while it writes
// the first half under v1 and resumed with --from and the schema file
// changed to v2 (a new optional field, default null) on input whose
// second half has the field in some records; the reader runs across both,
// is killed with -9 once and resumed with --from.
//
// "Equal": every input id appears in the output once and no other; each
// output record has exactly the input's fields with the same values
// (strings equal, numbers as literals equal: no float rounding, longs
// beyond 2^53 exact), plus, for the records written under v2, "email":
// the input's address, or null where the input had null or no field;
// records written under v1 have no "email" key. Which schema wrote each
// record is read from the topic by an independent reader (magic byte and
// schema id parsed by hand); both ids appear and are versions 1 and 2 of
// the subject <topic>-value, which has exactly those two versions.
func TestAvroRoundTripSchemaChangeKill9(t *testing.T) {
	t.Parallel() // mostly waits on its processes; its topics, tables and dirs are its own
	brokers, reg, srcl := schemaRegistry(t)
	topic := kafkaTopic(t, brokers, nil)
	work := t.TempDir()
	in, out := filepath.Join(work, "in"), filepath.Join(work, "out")
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	schemaFile := filepath.Join(work, "users.avsc")
	if err := os.WriteFile(schemaFile, []byte(avroV1), 0o644); err != nil {
		t.Fatal(err)
	}
	const first, total = 100000, 120000
	input := writeUserLines(t, filepath.Join(in, "part-1.jsonl"), 0, first, false)

	common := []string{"KAFKA_BROKERS=" + brokers, "TOPIC=" + topic, "SCHEMA_REGISTRY=" + reg, "CHECKPOINT_INTERVAL=100ms"}
	envA := append(slices.Clone(common), "IN="+in, "SCHEMA_FILE="+schemaFile, "DISCOVERY=200ms", "CHECKPOINTS="+filepath.Join(work, "ck-a"))
	envB := append(slices.Clone(common), "OUT="+out, "CHECKPOINTS="+filepath.Join(work, "ck-b"))
	writer, reader := pipelines+"avro-registry.yaml", pipelines+"avro-to-file.yaml"

	b := start(t, envB, "run", "--progress", "off", reader)
	a := start(t, envA, "run", "--progress", "off", writer)
	readTopic(t, brokers, topic, 1) // a checkpoint of A completed
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	a.wait(t)
	// Informational: records of one subtask's committed transactions can
	// sit behind the other's open one (read_committed stops at the last
	// stable offset) until the resumed writer aborts it.
	t.Logf("writer killed with %d of %d records readable under v1", len(readTopic(t, brokers, topic, -1)), first)

	waitRecords(t, b, out, 1) // a checkpoint of B completed
	if err := b.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	b.wait(t)
	b = start(t, envB, "run", "--progress", "off", "--from", filepath.Join(work, "ck-b"), reader)

	// The schema change: v2 in the same file, and input that uses it.
	if err := os.WriteFile(schemaFile, []byte(avroV2), 0o644); err != nil {
		t.Fatal(err)
	}
	maps.Copy(input, writeUserLines(t, filepath.Join(in, "part-2.jsonl"), first, total, true))
	a = start(t, envA, "run", "--progress", "off", "--from", filepath.Join(work, "ck-a"), writer)
	readTopic(t, brokers, topic, total) // bounded by two minutes
	stopWithSIGTERM(t, a)
	waitRecords(t, b, out, total)
	stopWithSIGTERM(t, b)
	for _, p := range []*proc{a, b} {
		if m := lossRE.FindAllString(p.stderr(), -1); len(m) > 0 {
			t.Errorf("a resumed run logged %q:\n%s", m, p.stderr())
		}
	}

	// The independent reader: each id once in the topic, under v1 or v2.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	subject := topic + "-value"
	versions, err := srcl.SubjectVersions(ctx, subject)
	if err != nil || !slices.Equal(versions, []int{1, 2}) {
		t.Fatalf("subject %s: versions %v (%v), want [1 2]", subject, versions, err)
	}
	var ids [2]int
	for i, v := range versions {
		ss, err := srcl.SchemaByVersion(ctx, subject, v)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = ss.ID
	}
	schemaOf := map[int64]int{} // id → version
	perVersion := map[int]int{}
	for _, r := range readTopic(t, brokers, topic, -1) {
		w := parseWire(t, r)
		v := slices.Index(ids[:], w.schemaID) + 1
		if v == 0 {
			t.Fatalf("record %d: schema id %d is neither v1 (%d) nor v2 (%d)", w.id, w.schemaID, ids[0], ids[1])
		}
		if _, dup := schemaOf[w.id]; dup {
			t.Fatalf("record %d is in the topic twice", w.id)
		}
		schemaOf[w.id] = v
		perVersion[v]++
	}
	if len(schemaOf) != total || perVersion[1] == 0 || perVersion[2] == 0 {
		t.Fatalf("topic: %d records (want %d), %d under v1, %d under v2 (want both)", len(schemaOf), total, perVersion[1], perVersion[2])
	}
	t.Logf("topic: %d records under v1 (id %d), %d under v2 (id %d)", perVersion[1], ids[0], perVersion[2], ids[1])
	for i := first; i < total; i++ {
		if schemaOf[int64(i)] != 2 {
			t.Fatalf("record %d of the v2 input was written under v%d", i, schemaOf[int64(i)])
		}
	}

	// The reader's output equals the input, field by field.
	seen := map[int64]bool{}
	eachCommittedLine(t, out, func(file, line string) {
		got := decodeExact(t, line)
		idn, _ := got["id"].(json.Number)
		id, err := idn.Int64()
		if err != nil || id < 0 || id >= total {
			t.Fatalf("%s: %q: no id of the input", file, line)
		}
		if seen[id] {
			t.Fatalf("%s: record %d twice", file, id)
		}
		seen[id] = true
		want := decodeExact(t, input[int(id)])
		if schemaOf[id] == 2 {
			if _, ok := want["email"]; !ok {
				want["email"] = nil
			}
		} else if _, ok := want["email"]; ok {
			t.Fatalf("record %d has an email but was written under v1", id)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: record %d (v%d):\n got %s\nwant %v (input %s)", file, id, schemaOf[id], line, want, input[int(id)])
		}
	})
	if len(seen) != total {
		t.Fatalf("output: %d of %d records", len(seen), total)
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// runWriter runs avro-registry.yaml once over the given input lines
// (bounded: no discovery) with extra environment variables.
func runWriter(t *testing.T, brokers, topic, reg string, lines []string, extra ...string) result {
	t.Helper()
	work := t.TempDir()
	in := filepath.Join(work, "in")
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(in, "users.jsonl"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	schemaFile := filepath.Join(work, "users.avsc")
	if err := os.WriteFile(schemaFile, []byte(avroV1), 0o644); err != nil {
		t.Fatal(err)
	}
	env := append([]string{"KAFKA_BROKERS=" + brokers, "TOPIC=" + topic, "SCHEMA_REGISTRY=" + reg, "CHECKPOINT_INTERVAL=100ms",
		"IN=" + in, "SCHEMA_FILE=" + schemaFile, "DISCOVERY=0s", "CHECKPOINTS=" + filepath.Join(work, "ck")}, extra...)
	return run(t, env, "run", "--progress", "off", pipelines+"avro-registry.yaml")
}

// TestAvroErrorsThroughTheBinary: a registry nothing listens on, a value
// the schema cannot hold (on-error fail and dead-letter), and bytes that
// are not in the wire format read with format: avro.
func TestAvroErrorsThroughTheBinary(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	brokers, reg, _ := schemaRegistry(t)

	t.Run("unreachable registry", func(t *testing.T) {
		topic := kafkaTopic(t, brokers, nil)
		addr := closedPort(t)
		r := runWriter(t, brokers, topic, "http://"+addr+"/apis/ccompat/v7", []string{userLine(1, false)})
		// The URL came from the environment: the CLI shows it as its
		// ${VAR} (never a value from the environment), and the address.
		for _, want := range []string{"schema registry ${SCHEMA_REGISTRY}", `"${SCHEMA_REGISTRY}/subjects/${TOPIC}-value/versions"`, addr, "connection refused"} {
			if r.code != 1 || !strings.Contains(r.stderr, want) {
				t.Fatalf("exit %d, want 1 and an error with %q:\n%s", r.code, want, r.stderr)
			}
		}
	})

	bad := `{"id":2,"name":"user-2","amount":1.5,"seq":"two"}`
	lines := []string{userLine(1, false), bad, userLine(3, false)}
	t.Run("value the schema cannot hold/fail", func(t *testing.T) {
		topic := kafkaTopic(t, brokers, nil)
		r := runWriter(t, brokers, topic, reg, lines)
		checkFailedFast(t, r, `sink "users-avro" option format`, "field seq", "users.jsonl", "offset "+strconv.Itoa(len(lines[0])+1))
		if n := len(readTopic(t, brokers, topic, -1)); n != 0 {
			t.Errorf("%d records committed by a failed run", n)
		}
	})

	t.Run("value the schema cannot hold/dead-letter", func(t *testing.T) {
		topic := kafkaTopic(t, brokers, nil)
		work := t.TempDir()
		in, dead := filepath.Join(work, "in.jsonl"), filepath.Join(work, "dead")
		if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		file := writeNamedPipeline(t, work, "p.yaml", fmt.Sprintf(`name: avro-dead-letters
delivery: exactly-once
checkpoint: {interval: 100ms, dir: %q}
on-error: dead-letter
source:
  type: file
  options: {paths: [%q]}
sink:
  type: kafka
  name: users-avro
  options:
    brokers: [%q]
    topic: %s
    format: avro
    schema-registry.url: [%q]
    schema-registry.schema: '%s'
    schema-registry.auto-register: true
dead-letter:
  type: file
  options: {path: %q}
`, filepath.Join(work, "ck"), in, brokers, topic, reg, strings.ReplaceAll(avroV1, "\n", " "), dead))
		r := run(t, nil, "run", "--progress", "off", file)
		if r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		var got []int64
		for _, rec := range readTopic(t, brokers, topic, -1) {
			got = append(got, parseWire(t, rec).id)
		}
		slices.Sort(got)
		if !slices.Equal(got, []int64{1, 3}) {
			t.Errorf("topic holds ids %v, want [1 3]", got)
		}
		all := readAll(t, dead)
		if strings.Count(all, "\n") != 1 || !strings.Contains(all, `"seq"`) || !strings.Contains(all, `two`) {
			t.Fatalf("dead letters: %s", all)
		}
		var dl map[string]any
		if err := json.Unmarshal([]byte(all), &dl); err != nil {
			t.Fatal(err)
		}
		if msg, _ := dl["error"].(string); !strings.Contains(msg, "field seq") || !strings.Contains(msg, "offset "+strconv.Itoa(len(lines[0])+1)) {
			t.Errorf("the dead letter's error %q does not name the field seq and the line's offset: %s", msg, all)
		}
		if rec, _ := dl["record"].(map[string]any); rec["seq"] != "two" || rec["id"] != 2.0 {
			t.Errorf("the dead letter's record is %v, want the input's: %s", dl["record"], all)
		}
	})

	t.Run("not Avro", func(t *testing.T) {
		topic := kafkaTopic(t, brokers, nil)
		cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.DefaultProduceTopic(topic),
			kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		err = cl.ProduceSync(t.Context(), &kgo.Record{Value: []byte(`{"id":1}`), Partition: 1}).FirstErr()
		cl.Close()
		if err != nil {
			t.Fatal(err)
		}
		work := t.TempDir()
		r := run(t, []string{"KAFKA_BROKERS=" + brokers, "TOPIC=" + topic, "SCHEMA_REGISTRY=" + reg,
			"OUT=" + filepath.Join(work, "out"), "CHECKPOINTS=" + filepath.Join(work, "ck")},
			"run", "--progress", "off", pipelines+"avro-to-file.yaml")
		checkFailedFast(t, r, `topic "${TOPIC}" partition 1 offset 0`, "first byte is 0x7b, not the magic byte 0")
	})
}

// roundTrip runs file → Kafka (format with the writer options) and Kafka
// → file (bounded at the latest offsets) and returns the output lines.
func roundTrip(t *testing.T, brokers, reg, format, writerOpts string, lines []string) []string {
	t.Helper()
	topic := kafkaTopic(t, brokers, nil)
	work := t.TempDir()
	in, out := filepath.Join(work, "in.jsonl"), filepath.Join(work, "out")
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	w := writeNamedPipeline(t, work, "w.yaml", fmt.Sprintf(`name: %[1]s-in
delivery: exactly-once
checkpoint: {interval: 100ms, dir: %[2]s}
source:
  type: file
  options: {paths: [%[3]q]}
sink:
  type: kafka
  options:
    brokers: [%[4]q]
    topic: %[5]s
    format: %[1]s
    schema-registry.url: [%[6]q]
    schema-registry.auto-register: true
%[7]s
`, format, filepath.Join(work, "ck-w"), in, brokers, topic, reg, writerOpts))
	if r := run(t, nil, "run", "--progress", "off", w); r.code != 0 {
		t.Fatalf("writer: exit %d\n%s", r.code, r.stderr)
	}
	rd := writeNamedPipeline(t, work, "r.yaml", fmt.Sprintf(`name: %[1]s-out
checkpoint: {interval: 100ms, dir: %[2]s}
source:
  type: kafka
  options:
    brokers: [%[3]q]
    topics: [%[4]s]
    scan.bounded.mode: latest-offset
    format: %[1]s
    schema-registry.url: [%[5]q]
sink:
  type: file
  options: {path: %[6]q}
`, format, filepath.Join(work, "ck-r"), brokers, topic, reg, out))
	if r := run(t, nil, "run", "--progress", "off", rd); r.code != 0 {
		t.Fatalf("reader: exit %d\n%s", r.code, r.stderr)
	}
	// The topic is in the wire format: magic byte, then a registered id.
	for _, rec := range readTopic(t, brokers, topic, -1) {
		if len(rec.Value) < 5 || rec.Value[0] != 0 {
			t.Fatalf("offset %d: not in the wire format: % x", rec.Offset, rec.Value[:min(5, len(rec.Value))])
		}
	}
	var got []string
	eachCommittedLine(t, out, func(_, line string) { got = append(got, line) })
	return got
}

// checkSameRecords compares output lines with input lines as records
// (json.Number literals), in any order, each once.
func checkSameRecords(t *testing.T, got, want []string) {
	t.Helper()
	norm := func(lines []string) []string {
		var s []string
		for _, l := range lines {
			b, err := json.Marshal(decodeExact(t, l)) // keys sorted, literals kept
			if err != nil {
				t.Fatal(err)
			}
			s = append(s, string(b))
		}
		slices.Sort(s)
		return s
	}
	g, w := norm(got), norm(want)
	if !slices.Equal(g, w) {
		t.Fatalf("output differs from input:\n got %q\nwant %q", g[:min(5, len(g))], w[:min(5, len(w))])
	}
}

// TestProtobufRoundTripThroughTheBinary: JSON lines → Protobuf in Kafka
// (the .proto auto-registered, protobuf.message choosing the second
// message of the file) → JSON lines equal to the input.
func TestProtobufRoundTripThroughTheBinary(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	brokers, reg, _ := schemaRegistry(t)
	proto := `syntax = "proto3"; package shop; message Other { string x = 1; } message Order { int64 id = 1; string name = 2; double amount = 3; bool paid = 4; }`
	var lines []string
	for i := range 200 {
		lines = append(lines, fmt.Sprintf(`{"id":%d,"name":"order-%d","amount":%s,"paid":%t}`, int64(1)<<53+1+int64(i), i,
			strconv.FormatFloat(float64(i)/4+0.3, 'f', -1, 64), i%2 == 0))
	}
	got := roundTrip(t, brokers, reg, "protobuf", fmt.Sprintf("    protobuf.message: shop.Order\n    schema-registry.schema: '%s'", proto), lines)
	checkSameRecords(t, got, lines)
}

// TestJSONSchemaRoundTripThroughTheBinary: JSON lines → JSON Schema in
// Kafka (the schema auto-registered from a file) → JSON lines equal to the
// input.
func TestJSONSchemaRoundTripThroughTheBinary(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	brokers, reg, _ := schemaRegistry(t)
	schema := filepath.Join(t.TempDir(), "order.json")
	if err := os.WriteFile(schema, []byte(`{"$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
 "properties": {"id": {"type": "integer"}, "name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}},
 "required": ["id", "name"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for i := range 200 {
		lines = append(lines, fmt.Sprintf(`{"id":%d,"name":"order-%d","tags":["a","b%d"],"price":%s}`, int64(1)<<53+1+int64(i), i, i,
			strconv.FormatFloat(float64(i)/4+0.3, 'f', -1, 64)))
	}
	got := roundTrip(t, brokers, reg, "json-schema", fmt.Sprintf("    schema-registry.schema-file: %q", schema), lines)
	checkSameRecords(t, got, lines)
}

// TestAvroExamplesValidate: the two Avro examples are valid pipelines
// (without a broker or a registry: validate connects to nothing, but
// reads the schema file, and refuses one that is missing at its option's line).
func TestAvroExamplesValidate(t *testing.T) {
	schema := filepath.Join(t.TempDir(), "users.avsc")
	if err := os.WriteFile(schema, []byte(avroV1), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"IN=in", "KAFKA_BROKERS=127.0.0.1:9092", "TOPIC=users", "SCHEMA_REGISTRY=http://127.0.0.1:8081",
		"SCHEMA_FILE=" + schema, "CHECKPOINTS=/tmp/x", "OUT=out"}
	for file, want := range map[string]string{
		"avro-registry.yaml": `ok: job "avro-registry": source file → sink kafka (exactly-once, parallelism 2)`,
		"avro-to-file.yaml":  `ok: job "avro-to-file": source kafka → sink file (exactly-once, parallelism 2)`,
	} {
		r := run(t, env, "validate", pipelines+file)
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Errorf("validate %s: exit %d\n%s%s", file, r.code, r.stdout, r.stderr)
		}
	}
	env[len(env)-3] = "SCHEMA_FILE=" + schema + ".missing"
	r := run(t, env, "validate", pipelines+"avro-registry.yaml")
	if r.code != 2 || !strings.Contains(r.stderr, "avro-registry.yaml:45: sink.options.schema-registry.schema-file: open ${SCHEMA_FILE}: no such file") {
		t.Errorf("validate with a missing schema file: exit %d\n%s", r.code, r.stderr)
	}
}

// TestAvroKeysThroughTheBinary: key.format avro on both sides. The sink's
// key expression returns an object, encoded in Avro with the keys' own
// schema (key.schema-registry.schema) under <topic>-key while the values
// go under <topic>-value with theirs; the source decodes meta.key with
// key.format avro. Checked in the topic (both subjects have one version,
// keys and values carry their own subject's id) and in the reader's
// output (meta.key equals the key the writer made).
func TestAvroKeysThroughTheBinary(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	brokers, reg, srcl := schemaRegistry(t)
	topic := kafkaTopic(t, brokers, nil)
	work := t.TempDir()
	in, out := filepath.Join(work, "in.jsonl"), filepath.Join(work, "out")
	const n = 300
	var lines []string
	for i := range n {
		lines = append(lines, userLine(i, false))
	}
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	keySchema := `{"type": "record", "name": "UserKey", "namespace": "com.example", "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}]}`
	w := writeNamedPipeline(t, work, "w.yaml", fmt.Sprintf(`name: avro-keys-in
delivery: exactly-once
checkpoint: {interval: 100ms, dir: %q}
source:
  type: file
  options: {paths: [%q]}
sink:
  type: kafka
  options:
    brokers: [%q]
    topic: %s
    format: avro
    key: '{"id": id, "name": name}'
    key.format: avro
    schema-registry.url: [%q]
    schema-registry.schema: '%s'
    key.schema-registry.schema: '%s'
    schema-registry.auto-register: true
`, filepath.Join(work, "ck-w"), in, brokers, topic, reg, strings.ReplaceAll(avroV1, "\n", " "), keySchema))
	if r := run(t, nil, "run", "--progress", "off", w); r.code != 0 {
		t.Fatalf("writer: exit %d\n%s", r.code, r.stderr)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ids := map[string]int{}
	for _, side := range []string{"key", "value"} {
		ss, err := srcl.SchemaByVersion(ctx, topic+"-"+side, -1)
		if err != nil || ss.Version != 1 {
			t.Fatalf("subject %s-%s: version %d (%v), want 1", topic, side, ss.Version, err)
		}
		ids[side] = ss.ID
	}
	if ids["key"] == ids["value"] {
		t.Fatalf("keys and values have the same schema id %d", ids["key"])
	}
	recs := readTopic(t, brokers, topic, -1)
	if len(recs) != n {
		t.Fatalf("topic: %d records, want %d", len(recs), n)
	}
	for _, r := range recs {
		if k, v := parseWire(t, &kgo.Record{Value: r.Key}), parseWire(t, r); k.schemaID != ids["key"] || v.schemaID != ids["value"] || k.id != v.id {
			t.Fatalf("offset %d: key %+v, value %+v; want ids %v and the same record id", r.Offset, k, v, ids)
		}
	}

	rd := writeNamedPipeline(t, work, "r.yaml", fmt.Sprintf(`name: avro-keys-out
checkpoint: {interval: 100ms, dir: %q}
source:
  type: kafka
  options:
    brokers: [%q]
    topics: [%s]
    scan.bounded.mode: latest-offset
    format: avro
    key.format: avro
    schema-registry.url: [%q]
transforms:
  - map: '{"id": id, "key": meta.key}'
sink:
  type: file
  options: {path: %q}
`, filepath.Join(work, "ck-r"), brokers, topic, reg, out))
	if r := run(t, nil, "run", "--progress", "off", rd); r.code != 0 {
		t.Fatalf("reader: exit %d\n%s", r.code, r.stderr)
	}
	seen := map[int64]bool{}
	eachCommittedLine(t, out, func(file, line string) {
		got := decodeExact(t, line)
		id, err := got["id"].(json.Number).Int64()
		if err != nil || seen[id] {
			t.Fatalf("%s: %q: bad or repeated id", file, line)
		}
		seen[id] = true
		want := map[string]any{"id": json.Number(strconv.FormatInt(id, 10)), "name": fmt.Sprintf("user-%d", id)}
		if !reflect.DeepEqual(got["key"], want) {
			t.Fatalf("%s: record %d: meta.key %v, want %v", file, id, got["key"], want)
		}
	})
	if len(seen) != n {
		t.Fatalf("output: %d of %d records", len(seen), n)
	}
}
