package main

// Records with metadata through the binary, on the real broker of
// scripts/kafka.sh (skipped without SLUICE_KAFKA_BROKERS): Kafka → Kafka
// keeps keys, headers and timestamps exactly once across kill -9 and
// --from; the Kafka sink's key, headers, partition and timestamp
// expressions; a filter on meta.key and meta.headers; format: raw passes
// any bytes through. Outputs are read by an independent read_committed
// consumer.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// metaRecord is the input record i of the metadata tests: key k-<i>, one
// or two headers, a timestamp hours ago, a JSON value with spacing that a
// re-encoding would change.
func metaRecord(i int, base time.Time) *kgo.Record {
	r := &kgo.Record{Key: fmt.Appendf(nil, "k-%d", i), Value: fmt.Appendf(nil, `{"id": %d, "pad": "%s"}`, i, strings.Repeat("x", i%7)),
		Timestamp: base.Add(time.Duration(i) * time.Millisecond),
		Headers:   []kgo.RecordHeader{{Key: "h1", Value: fmt.Appendf(nil, "v-%d", i)}}}
	if i%2 == 0 {
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: "h2", Value: []byte{0xff, byte(i), 0}})
	}
	return r
}

// produceRecs produces recs to topic and waits for every ack.
func produceRecs(t *testing.T, brokers, topic string, recs []*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// recordSig is what the metadata tests compare: key, headers, timestamp
// and value.
func recordSig(r *kgo.Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "key=%q ts=%d value=%q", r.Key, r.Timestamp.UnixMilli(), r.Value)
	for _, h := range r.Headers {
		fmt.Fprintf(&b, " %s=%q", h.Key, h.Value)
	}
	return b.String()
}

// kafkaToKafka is a Kafka → Kafka pipeline with extra source options,
// transforms and sink options (YAML, indented as they go).
func kafkaToKafka(srcOpts, transforms, sinkOpts string) string {
	return strings.NewReplacer("SRCOPTS\n", srcOpts, "TRANSFORMS\n", transforms, "SINKOPTS\n", sinkOpts).Replace(kafkaToKafkaYAML)
}

const kafkaToKafkaYAML = `name: ${NAME}
parallelism: 2
checkpoint:
  interval: 100ms
  dir: ${CKPT}
restart:
  strategy: fixed-delay
  attempts: 3
  delay: 100ms
source:
  type: kafka
  options:
    brokers:
      - ${BROKERS}
    topics:
      - ${IN}
SRCOPTS
TRANSFORMS
sink:
  type: kafka
  options:
    brokers:
      - ${BROKERS}
    topic: ${OUT}
SINKOPTS
`

// TestKafkaToKafkaKeepsMetadataKill9Resume: a Kafka → Kafka pipeline with
// default options writes every input record's key, headers, timestamp
// (hours old) and value bytes exactly once, across a kill -9 and a
// --from resume. Before, keys and headers were dropped and values
// re-encoded.
func TestKafkaToKafkaKeepsMetadataKill9Resume(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	brokers := kafkaBrokers(t)
	const half = 6000
	in, out := kafkaTopic(t, brokers, nil), kafkaTopic(t, brokers, nil)
	base := time.Now().Add(-5 * time.Hour)
	var recs []*kgo.Record
	want := map[string]int{}
	for i := range 2 * half {
		r := metaRecord(i, base)
		recs = append(recs, r)
		want[recordSig(r)]++
	}
	produceRecs(t, brokers, in, recs[:half])
	dir := t.TempDir()
	file := writePipeline(t, dir, kafkaToKafka("", "", ""))
	ckpt := filepath.Join(dir, "checkpoints")
	env := []string{"NAME=meta", "CKPT=" + ckpt, "BROKERS=" + brokers, "IN=" + in, "OUT=" + out}
	p := start(t, env, "run", "--progress", "off", file)
	if n := len(readTopic(t, brokers, out, half/4)); n < half/4 {
		t.Fatalf("the pipeline committed %d records:\n%s", n, p.stderr())
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	produceRecs(t, brokers, in, recs[half:])
	p = start(t, env, "run", "--progress", "off", "--from", ckpt, file)
	if n := len(readTopic(t, brokers, out, 2*half)); n < 2*half {
		t.Fatalf("after the resume the output holds %d records, want %d:\n%s", n, 2*half, p.stderr())
	}
	stopWithSIGTERM(t, p)
	got := readTopic(t, brokers, out, -1)
	seen := map[string]int{}
	for _, r := range got {
		s := recordSig(r)
		if want[s] == 0 {
			t.Fatalf("output record not in the input: %s", s)
		}
		seen[s]++
	}
	for s := range want {
		if seen[s] != 1 {
			t.Fatalf("record %s: %d times in the output, want once (%d records read)", s, seen[s], len(got))
		}
	}
}

// TestKafkaSinkMetaExpressions: the Kafka sink's key, headers, partition
// and timestamp expressions set them on every record written.
func TestKafkaSinkMetaExpressions(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	brokers := kafkaBrokers(t)
	const count = 400
	out := kafkaTopic(t, brokers, nil)
	file := writePipeline(t, t.TempDir(), `name: exprs
parallelism: 2
checkpoint:
  interval: 100ms
source:
  type: datagen
  options:
    count: ${COUNT}
    splits: 2
sink:
  type: kafka
  options:
    brokers:
      - ${BROKERS}
    topic: ${OUT}
    key: user + "/" + string(id)
    headers: '{"src": "gen", "amount": string(amount)}'
    partition: id % 2
    timestamp: 1600000000000 + id
`)
	r := run(t, []string{fmt.Sprint("COUNT=", count), "BROKERS=" + brokers, "OUT=" + out}, "run", "--progress", "off", file)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	got := readTopic(t, brokers, out, count)
	checkIDsOnce(t, got, count)
	for _, rec := range got {
		var id int64
		if _, err := fmt.Sscanf(string(rec.Value), `{"amount":%d,"id":%d`, new(int64), &id); err != nil {
			t.Fatalf("value %q: %v", rec.Value, err)
		}
		wantHeaders := map[string]string{"src": "gen", "amount": fmt.Sprint(id * 37 % 1000)}
		gotHeaders := map[string]string{}
		for _, h := range rec.Headers {
			gotHeaders[h.Key] = string(h.Value)
		}
		switch {
		case string(rec.Key) != fmt.Sprintf("user-%d/%d", id%10, id):
			t.Fatalf("record %d: key %q", id, rec.Key)
		case rec.Partition != int32(id%2):
			t.Fatalf("record %d: partition %d, want %d", id, rec.Partition, id%2)
		case rec.Timestamp.UnixMilli() != 1600000000000+id:
			t.Fatalf("record %d: timestamp %d", id, rec.Timestamp.UnixMilli())
		case fmt.Sprint(gotHeaders) != fmt.Sprint(wantHeaders):
			t.Fatalf("record %d: headers %v, want %v", id, gotHeaders, wantHeaders)
		}
	}
}

// TestKafkaFilterOnMeta: a filter reading meta.key and meta.headers keeps
// exactly the records it selects, unchanged.
func TestKafkaFilterOnMeta(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	brokers := kafkaBrokers(t)
	const count = 900
	in, out := kafkaTopic(t, brokers, nil), kafkaTopic(t, brokers, nil)
	var recs []*kgo.Record
	var wantIDs []int
	for i := range count {
		r := metaRecord(i, time.Now().Add(-time.Hour))
		tag := "drop"
		if i%3 == 0 {
			tag = "keep"
		}
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: "h", Value: []byte(tag)})
		if tag == "keep" && i != 6 {
			wantIDs = append(wantIDs, i)
		}
		recs = append(recs, r)
	}
	produceRecs(t, brokers, in, recs)
	file := writePipeline(t, t.TempDir(), kafkaToKafka("    bounded: true\n", "transforms:\n  - filter: meta.headers[\"h\"] == \"keep\" && meta.key != \"k-6\"\n", ""))
	r := run(t, []string{"NAME=filter", "CKPT=" + t.TempDir(), "BROKERS=" + brokers, "IN=" + in, "OUT=" + out}, "run", "--progress", "off", file)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	got := readTopic(t, brokers, out, -1)
	var ids []int
	for _, rec := range got {
		var id int
		if _, err := fmt.Sscanf(string(rec.Key), "k-%d", &id); err != nil {
			t.Fatalf("key %q", rec.Key)
		}
		if recordSig(rec) != recordSig(recs[id]) {
			t.Fatalf("record %d changed: %s, want %s", id, recordSig(rec), recordSig(recs[id]))
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, wantIDs) {
		t.Fatalf("kept %d records %v…, want %d %v…", len(ids), ids[:min(len(ids), 10)], len(wantIDs), wantIDs[:10])
	}
}

// TestKafkaRawPassThrough: with format: raw, arbitrary bytes (not JSON,
// not UTF-8, empty) pass Kafka → Kafka unchanged, each exactly once.
func TestKafkaRawPassThrough(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	brokers := kafkaBrokers(t)
	const count = 1000
	in, out := kafkaTopic(t, brokers, nil), kafkaTopic(t, brokers, nil)
	var recs []*kgo.Record
	want := map[string]int{}
	for i := range count {
		v := fmt.Appendf(nil, "\xff\x00%d\n{not json", i)
		if i == 0 {
			v = []byte{}
		}
		recs = append(recs, &kgo.Record{Value: v})
		want[string(v)]++
	}
	produceRecs(t, brokers, in, recs)
	file := writePipeline(t, t.TempDir(), kafkaToKafka("    bounded: true\n    format: raw\n", "", "    format: raw\n"))
	r := run(t, []string{"NAME=raw", "CKPT=" + t.TempDir(), "BROKERS=" + brokers, "IN=" + in, "OUT=" + out}, "run", "--progress", "off", file)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	got := readTopic(t, brokers, out, -1)
	seen := map[string]int{}
	for _, rec := range got {
		seen[string(rec.Value)]++
	}
	for v := range want {
		if seen[v] != 1 {
			t.Fatalf("value %q: %d times in the output, want once", v, seen[v])
		}
	}
	if len(got) != count {
		t.Fatalf("%d records in the output, want %d", len(got), count)
	}
}

// TestFileMetaAndLineFormats: file records carry meta.path and
// meta.offset (the line's byte offset); format: string lines pass to a
// format: raw sink unchanged (not JSON), and a json sink writes the
// input lines byte for byte when no transform changes them.
func TestFileMetaAndLineFormats(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	in := t.TempDir()
	a := "{\"id\": 1}\n{\"id\":  2}\n"
	b := "{\"id\": 3}\n"
	writeFile := func(name, s string) {
		if err := os.WriteFile(filepath.Join(in, name), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeFile("a.jsonl", a)
	writeFile("b.jsonl", b)
	for _, c := range []struct {
		name, extra string
		want        []string
	}{
		{"meta", `transforms:
  - filter: meta.path endsWith "a.jsonl"
  - map: '{"id": id, "off": meta.offset}'
`, []string{`{"id":1,"off":0}`, `{"id":2,"off":10}`}},
		{"pass-through", "", []string{`{"id":  2}`, `{"id": 1}`, `{"id": 3}`}},
		{"string to raw", "", []string{`{"id":  2}`, `{"id": 1}`, `{"id": 3}`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srcFormat, sinkFormat := "json", "json"
			if c.name == "string to raw" {
				srcFormat, sinkFormat = "string", "raw"
			}
			out := t.TempDir()
			file := writePipeline(t, t.TempDir(), fmt.Sprintf(`name: files
checkpoint:
  interval: 100ms
source:
  type: file
  options:
    paths:
      - ${IN}
    format: %s
%ssink:
  type: file
  options:
    path: ${OUT}
    format: %s
`, srcFormat, c.extra, sinkFormat))
			r := run(t, []string{"IN=" + in, "OUT=" + out}, "run", "--progress", "off", file)
			if r.code != 0 {
				t.Fatalf("exit %d\n%s", r.code, r.stderr)
			}
			got := committedLines(t, out)
			want := slices.Sorted(slices.Values(c.want))
			if !slices.Equal(got, want) {
				t.Fatalf("output %q, want %q", got, want)
			}
		})
	}
}

// TestKafkaSinkExpressionFailures: a sink expression that fails on a
// record follows the pipeline's on-error: fail fails the job at once
// naming the sink, the option, the record's position and the error;
// dead-letter sends the record to the dead-letter sink and writes every
// other one, each exactly once.
func TestKafkaSinkExpressionFailures(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	brokers := kafkaBrokers(t)
	const count = 200
	in := kafkaTopic(t, brokers, nil)
	var recs []*kgo.Record
	for i := range count {
		recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, `{"id": %d}`, i)})
	}
	produceRecs(t, brokers, in, recs)
	sinkOpts := "    partition: 'id % 10 == 3 ? \"x\" : 0'\n"

	out := kafkaTopic(t, brokers, nil)
	file := writePipeline(t, t.TempDir(), kafkaToKafka("    bounded: true\n", "", sinkOpts))
	r := run(t, []string{"NAME=exprfail", "CKPT=" + t.TempDir(), "BROKERS=" + brokers, "IN=" + in, "OUT=" + out}, "run", "--progress", "off", file)
	checkFailedFast(t, r, `sink "kafka-sink" option partition at topic "${IN}" partition`, "returned x (string), want an integer from 0")

	out = kafkaTopic(t, brokers, nil)
	dir := t.TempDir()
	dead := filepath.Join(dir, "dead")
	file = writePipeline(t, dir, kafkaToKafka("    bounded: true\n", "", sinkOpts)+`on-error: dead-letter
dead-letter:
  type: file
  options:
    path: ${DEAD}
`)
	r = run(t, []string{"NAME=exprdead", "CKPT=" + t.TempDir(), "BROKERS=" + brokers, "IN=" + in, "OUT=" + out, "DEAD=" + dead}, "run", "--progress", "off", file)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	seen := map[int64]int{}
	for _, rec := range readTopic(t, brokers, out, -1) {
		var id int64
		if _, err := fmt.Sscanf(string(rec.Value), `{"id": %d}`, &id); err != nil || id%10 == 3 || rec.Partition != 0 {
			t.Fatalf("output record %q in partition %d", rec.Value, rec.Partition)
		}
		seen[id]++
	}
	eachCommittedRecord(t, dead, func(name string, rec map[string]any) {
		r, _ := rec["record"].(map[string]any)
		id, _ := r["id"].(float64)
		if int64(id)%10 != 3 || !strings.Contains(fmt.Sprint(rec["error"]), "option partition") || !strings.HasPrefix(fmt.Sprint(rec["split"]), in+"-") {
			t.Fatalf("%s: dead letter %v", name, rec)
		}
		seen[int64(id)]++
	})
	for i := range int64(count) {
		if seen[i] != 1 {
			t.Fatalf("record %d: %d times in output and dead letters, want once", i, seen[i])
		}
	}
}

// TestKafkaRekeyExampleValidates: the example of metadata expressions is
// a valid pipeline.
func TestKafkaRekeyExampleValidates(t *testing.T) {
	r := run(t, []string{"BROKERS=127.0.0.1:9092", "IN=in", "OUT=out", "CHECKPOINTS=/tmp/x"}, "validate", pipelines+"kafka-rekey.yaml")
	if r.code != 0 || !strings.Contains(r.stdout, `ok: job "kafka-rekey": source kafka → filter → sink kafka (exactly-once, parallelism 2)`) {
		t.Errorf("validate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}
