package main

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
)

// propsPipeline reads Kafka with Java client properties set (small
// fetches, so the input is read in many of them) and writes files.
const propsPipeline = `name: props
parallelism: 2
checkpoint:
  interval: 100ms
  dir: ${CK}
source:
  type: kafka
  options:
    brokers: "${BROKERS}"
    topics: ["${IN}"]
    properties.client.id: sluice-props-test
    properties.fetch.max.bytes: 4096
    properties.max.partition.fetch.bytes: 2048
    properties.fetch.max.wait.ms: 100
    properties.max.poll.records: "50"
sink:
  type: file
  options:
    path: ${OUT}
`

// TestKafkaPropertiesExactlyOnce: a Kafka → file pipeline with
// properties.* passed to the consumer is killed with SIGKILL while
// reading, resumed with --from, given more input and stopped: the output
// holds every input record exactly once.
func TestKafkaPropertiesExactlyOnce(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	brokers := kafkaBrokers(t)
	in := kafkaTopic(t, brokers, nil)
	out, ck := t.TempDir(), t.TempDir()
	file := writePipeline(t, t.TempDir(), propsPipeline)
	env := []string{"BROKERS=" + brokers, "IN=" + in, "OUT=" + out, "CK=" + ck}

	produceIDs(t, brokers, in, 0, 2000, nil)
	p := start(t, env, "run", "--progress", "off", file)
	waitRecords(t, p, out, 400)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)

	produceIDs(t, brokers, in, 2000, 3000, nil)
	p = start(t, env, "run", "--progress", "off", "--from", ck, file)
	waitRecords(t, p, out, 3000)
	stopWithSIGTERM(t, p)
	checkOnce(t, readOutput(t, out, "id"), idRange(0, 3000))
}

// TestKafkaSinkPropertiesExactlyOnce: an exactly-once Kafka sink with
// producer properties set writes every record once.
func TestKafkaSinkPropertiesExactlyOnce(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	brokers := kafkaBrokers(t)
	const count = 3000
	topic := kafkaTopic(t, brokers, nil)
	file := writePipeline(t, t.TempDir(), strings.Replace(genToKafka, "    transactional-id-prefix: ${PREFIX:-}\n",
		`    properties.client.id: sluice-props-sink
    properties.batch.size: 16384
    properties.max.request.size: 1048576
    properties.request.timeout.ms: 30000
    properties.retries: 10
    properties.retry.backoff.ms: 50
`, 1))
	r := run(t, []string{"NAME=props-sink", "OUT=" + t.TempDir(), fmt.Sprint("COUNT=", count), "RATE=0", "BROKERS=" + brokers, "TOPIC=" + topic},
		"run", "--progress", "off", file)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	checkIDsOnce(t, readTopic(t, brokers, topic, count), count)
}

// TestKafkaPropertiesConfigErrors: an unknown property, one of the other
// side and a bad value are refused by run (exit 2) naming file, line and
// key; nothing is started (no broker is needed).
func TestKafkaPropertiesConfigErrors(t *testing.T) {
	file := writeConfigPipeline(t, t.TempDir(), "p.yaml", `source:
  type: kafka
  options:
    brokers: 127.0.0.1:1
    topics: [a]
    properties.client.id: x
    properties.nonsense: 1
    properties.fetch.max.bytes: ${FETCH}
sink:
  type: kafka
  options:
    brokers: 127.0.0.1:1
    topic: b
    properties.fetch.min.bytes: 1
`)
	r := run(t, []string{"FETCH=lots"}, "run", "--progress", "off", file)
	for _, want := range []string{
		file + ":7: source.options.properties.nonsense: unknown Kafka client property: sluice uses franz-go, not the Java client, and maps these consumer (kafka source) properties: client.id, client.rack,",
		file + ":8: source.options.properties.fetch.max.bytes: want an integer from 1 to 1073741824 (value from the environment not shown)",
		file + ":14: sink.options.properties.fetch.min.bytes: fetch.min.bytes is a consumer (kafka source) property; the kafka sink does not take it",
	} {
		if r.code != 2 || !strings.Contains(r.stderr, want) {
			t.Errorf("exit %d, want 2 with\n%s\ngot:\n%s", r.code, want, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "lots") {
		t.Errorf("a value from the environment is shown:\n%s", r.stderr)
	}
}

// TestConnectorsPrintsProperties: `sluice connectors kafka` prints the
// properties.* family of the source and of the sink with what each maps.
func TestConnectorsPrintsProperties(t *testing.T) {
	r := run(t, nil, "connectors", "kafka")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	var fams []string
	for line := range strings.Lines(r.stdout) {
		if strings.HasPrefix(strings.TrimSpace(line), "properties.* ") {
			fams = append(fams, line)
		}
	}
	if len(fams) != 2 || !strings.Contains(fams[0], "Kafka consumer (kafka source) settings") || !strings.Contains(fams[0], "fetch.max.bytes") ||
		!strings.Contains(fams[1], "Kafka producer (kafka sink) settings") || !strings.Contains(fams[1], "batch.size") {
		t.Errorf("want the source's and the sink's properties.*, got %q\n%s", fams, r.stdout)
	}
}
