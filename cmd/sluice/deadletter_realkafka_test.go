package main

// Dead letters through the binary against the real broker of
// scripts/kafka.sh (skipped without SLUICE_KAFKA_BROKERS): everything on
// Kafka (input, main output, dead letters), kill -9 and --from; and the
// fail policy failing at once without restarts.

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// idCounts counts {"id": N} values of recs.
func idCounts(t *testing.T, recs []*kgo.Record) map[int64]int {
	t.Helper()
	counts := map[int64]int{}
	for _, r := range recs {
		var v struct {
			ID *int64 `json:"id"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil || v.ID == nil {
			t.Fatalf("bad main record %q: %v", r.Value, err)
		}
		counts[*v.ID]++
	}
	return counts
}

// TestDeadLettersRealKafkaKill9Resume: a topic with 1% malformed values
// and 1% records the filter fails on; main output and dead letters both
// to Kafka topics (exactly-once); kill -9 once main output is committed,
// more input, --from, SIGTERM once all main output is there: main output
// + dead letters, read by an independent read_committed consumer, =
// input, each exactly once.
func TestDeadLettersRealKafkaKill9Resume(t *testing.T) {
	t.Parallel() // mostly waits on its processes; its topics, tables and dirs are its own
	brokers := kafkaBrokers(t)
	bl := strings.Split(brokers, ",")
	in, main, dead := kafkaTopic(t, brokers, nil), kafkaTopic(t, brokers, nil), kafkaTopic(t, brokers, nil)
	work := t.TempDir()
	ckpt := filepath.Join(work, "checkpoints")
	file := writeNamedPipeline(t, work, "p.yaml", fmt.Sprintf(`name: real-kafka-dead-letters
parallelism: 2
delivery: exactly-once
checkpoint:
  interval: 100ms
  dir: %s
restart:
  strategy: none
source:
  type: kafka
  name: in
  options:
    brokers: [%q]
    topics: [%s]
    on-malformed: dead-letter
transforms:
  - filter: amount > 100
    name: big
    on-error: dead-letter
sink:
  type: kafka
  name: out
  options: {brokers: [%q], topic: %s}
dead-letter:
  type: kafka
  options: {brokers: [%q], topic: %s}
`, ckpt, bl[0], in, bl[0], main, bl[0], dead))
	const first, total = 100000, 120000
	produceDeadLetterInputTo(t, bl, in, 0, first)

	p := start(t, nil, "run", "--progress", "off", file)
	readTopic(t, brokers, main, 1) // bounded: some main output is committed
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	killed := len(readTopic(t, brokers, main, -1))
	if killed == 0 {
		t.Fatalf("nothing committed before the kill\n%s", p.stderr())
	}
	t.Logf("killed with %d main records committed", killed)

	produceDeadLetterInputTo(t, bl, in, first, total)
	p = start(t, nil, "run", "--progress", "off", "--from", ckpt, file)
	wantMain := 0
	for id := range total {
		if id%100 != 13 && id%100 != 57 && id%1000 > 100 {
			wantMain++
		}
	}
	readTopic(t, brokers, main, wantMain) // bounded by two minutes
	// The dead letters of the last records may be committed by a later
	// checkpoint than the main records: wait for them too (bounded by two
	// minutes: a hang guard).
	wantDead := total / 50
	for deadline := time.Now().Add(2 * time.Minute); len(readDeadTopicOf(t, bl, dead, in)) < wantDead && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("resumed run: exit %d\n%s", code, p.stderr())
	}
	mainIDs := idCounts(t, readTopic(t, brokers, main, -1))
	deadIDs := readDeadTopicOf(t, bl, dead, in)
	t.Logf("%d main ids, %d dead letters for %d input records", len(mainIDs), len(deadIDs), total)
	checkDeadLetterOutputs(t, mainIDs, deadIDs, total)
}

// TestErrorPolicyFailFastRealKafka: under the default policy a malformed
// value in a Kafka topic, and a filter on a field a record lacks, each
// fail the job at once although its restart strategy allows restarts:
// exit 1, the failure names the operator and the position, no restart.
func TestErrorPolicyFailFastRealKafka(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	brokers := kafkaBrokers(t)
	cases := []struct {
		name, bad string
		want      []string
	}{
		{"malformed value", `{"id": 2, "amount`, []string{"kafka: malformed record", "partition", "offset"}},
		{"missing field", `{"id": 2}`, []string{`transform filter "big" (`, `record: {"id":2}`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := kafkaTopic(t, brokers, nil)
			cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.DefaultProduceTopic(in))
			if err != nil {
				t.Fatal(err)
			}
			err = cl.ProduceSync(t.Context(), kgo.StringRecord(`{"id": 1, "amount": 500}`), kgo.StringRecord(c.bad)).FirstErr()
			cl.Close()
			if err != nil {
				t.Fatal(err)
			}
			work := t.TempDir()
			file := writeNamedPipeline(t, work, "p.yaml", fmt.Sprintf(`restart: {strategy: fixed-delay, attempts: 3, delay: 100ms}
source:
  type: kafka
  options: {brokers: [%q], topics: [%s], bounded: true}
transforms:
  - filter: amount > 100
    name: big
sink:
  type: file
  options: {path: %s}
`, strings.Split(brokers, ",")[0], in, filepath.Join(work, "out")))
			checkFailedFast(t, run(t, nil, "run", "--progress", "off", file), c.want...)
		})
	}
}
