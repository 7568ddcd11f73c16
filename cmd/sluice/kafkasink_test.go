package main

// The Kafka sink's options through the binary (issue 14): a missing topic
// fails at once or is created (topic-create), compression, acks,
// sink.delivery-guarantee and the configuration errors. Tests that write
// run against the real broker of scripts/kafka.sh (skipped without
// SLUICE_KAFKA_BROKERS); outputs are read by an independent consumer.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaSinkMissingTopic runs a pipeline (exactly-once and
// at-least-once) whose sink topic does not exist, with three restarts
// allowed: it exits 1 with an error naming the topic and the brokers and
// saying how to allow creation, and it did not restart (its summary says
// 0 restarts, its log has no "restarting from" line). Before, it failed after ~13 s and three restarts with
// UNKNOWN_TOPIC_OR_PARTITION from a flush.
func TestKafkaSinkMissingTopic(t *testing.T) {
	brokers := kafkaBrokers(t)
	for _, d := range []string{"exactly-once", "at-least-once"} {
		t.Run(d, func(t *testing.T) {
			t.Parallel() // each waits about 10 s for the topic's metadata
			// Topic and brokers written in the file: values from the
			// environment would be shown as ${VAR}.
			topic := fmt.Sprintf("cli-missing-%d", time.Now().UnixNano())
			yaml := strings.NewReplacer("${BROKERS}", brokers, "${TOPIC}", topic).Replace(genToKafka)
			file := writePipeline(t, t.TempDir(), yaml)
			r := run(t, []string{"NAME=absent", "DELIVERY=" + d, "OUT=" + t.TempDir(), "COUNT=1000", "RATE=100000"},
				"run", "--progress", "off", file)
			if r.code != 1 {
				t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
			}
			for _, want := range []string{`topic "` + topic + `" does not exist on brokers [` + brokers + `]`, "topic-create: true",
				"failed without restarting", ", 0 restarts,"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("stderr does not say %q:\n%s", want, r.stderr)
				}
			}
			if n := strings.Count(r.stderr, "restarting from"); n != 0 {
				t.Errorf("the job restarted %d times, want 0:\n%s", n, r.stderr)
			}
		})
	}
}

// TestKafkaSinkTopicCreateKill9Resume lets the sink create its topic
// (3 partitions, two configs), kills the pipeline with SIGKILL once output
// is committed and resumes it with --from: the topic has the partitions
// and configs asked for (read with kadm) and holds every record exactly
// once.
func TestKafkaSinkTopicCreateKill9Resume(t *testing.T) {
	t.Parallel() // paced by its datagen rate; its topics and dirs are its own
	brokers := kafkaBrokers(t)
	const count = 20000
	file := writePipeline(t, t.TempDir(), genToKafka+`    topic-create: true
    topic-create.partitions: 3
    topic-create.configs:
      - retention.ms=7200000
      - max.message.bytes=2000000
`)
	topic := fmt.Sprintf("cli-created-%d", time.Now().UnixNano())
	out := t.TempDir()
	env := []string{"NAME=created", "OUT=" + out, fmt.Sprint("COUNT=", count), "RATE=5000", "BROKERS=" + brokers, "TOPIC=" + topic}
	p := start(t, env, "run", "--progress", "off", file)
	if len(readTopic(t, brokers, topic, 2000)) < 2000 {
		t.Fatalf("the pipeline committed too little:\n%s", p.stderr())
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	r := run(t, env, "run", "--progress", "off", "--from", filepath.Join(out, "checkpoints"), file)
	if r.code != 0 {
		t.Fatalf("resume: exit %d\n%s", r.code, r.stderr)
	}
	checkIDsOnce(t, readTopic(t, brokers, topic, count), count)

	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	td, err := adm.ListTopics(ctx, topic)
	if err != nil || td[topic].Err != nil {
		t.Fatalf("list topic: %v %v", err, td[topic].Err)
	}
	if n := len(td[topic].Partitions); n != 3 {
		t.Errorf("topic has %d partitions, want 3", n)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range rc.Configs {
		if c.Value != nil {
			got[c.Key] = *c.Value
		}
	}
	if got["retention.ms"] != "7200000" || got["max.message.bytes"] != "2000000" {
		t.Errorf("configs retention.ms=%q max.message.bytes=%q, want 7200000 and 2000000", got["retention.ms"], got["max.message.bytes"])
	}
}

// TestKafkaSinkCompression writes with the default compression, with
// properties.compression.type: zstd and with none, at least once with
// properties.acks: 1 and the round-robin partitioner, and reads the
// records back with an independent consumer: every record's batch has the
// codec (lz4 by default) or, where the codec would not shrink it, none.
func TestKafkaSinkCompression(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	brokers := kafkaBrokers(t)
	const count = 3000
	for _, tc := range []struct {
		option string
		want   uint8 // kgo.RecordAttrs.CompressionType
	}{
		{"", 3}, {"zstd", 4}, {"none", 0},
	} {
		t.Run("compression="+tc.option, func(t *testing.T) {
			yaml := genToKafka + "    properties.acks: \"1\"\n    sink.partitioner: round-robin\n"
			if tc.option != "" {
				yaml += "    properties.compression.type: " + tc.option + "\n"
			}
			file := writePipeline(t, t.TempDir(), yaml)
			topic := kafkaTopic(t, brokers, nil)
			r := run(t, []string{"NAME=compressed", "DELIVERY=at-least-once", "OUT=" + t.TempDir(), fmt.Sprint("COUNT=", count),
				"RATE=100000", "BROKERS=" + brokers, "TOPIC=" + topic}, "run", "--progress", "off", file)
			if r.code != 0 {
				t.Fatalf("exit %d\n%s", r.code, r.stderr)
			}
			recs := readTopic(t, brokers, topic, count)
			checkIDsOnce(t, recs, count)
			// franz-go sends a batch uncompressed when compressing does
			// not shrink it (a batch of one small record), so a record is
			// in a batch of the codec or an uncompressed one, and some
			// are in the codec's.
			parts := map[int32]int{}
			inCodec := 0
			for _, rec := range recs {
				c := rec.Attrs.CompressionType()
				if c != tc.want && c != 0 {
					t.Fatalf("record %d@%d: compression type %d, want %d", rec.Partition, rec.Offset, c, tc.want)
				}
				if c == tc.want {
					inCodec++
				}
				parts[rec.Partition]++
			}
			if inCodec == 0 {
				t.Fatalf("no record in a batch of compression type %d", tc.want)
			}
			if len(parts) != 2 {
				t.Errorf("records in partitions %v, want both partitions (round-robin)", parts)
			}
		})
	}
}

// TestKafkaSinkOptionErrors: bad Kafka sink options exit 2 with the
// file, the line of the key and what is allowed, without a broker.
func TestKafkaSinkOptionErrors(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	dir := t.TempDir()
	head := "source:\n  type: datagen\nsink:\n  type: kafka\n  options:\n    brokers: [127.0.0.1:1]\n    topic: t\n"
	tests := []struct{ name, yaml, want string }{
		{"acks with exactly-once", head + "    properties.acks: \"1\"\n",
			`:8: sink.options.properties.acks: 1 is not allowed with exactly-once delivery, which needs all (transactions are idempotent): remove it, or set delivery: at-least-once`},
		{"acks 0 with sink.delivery-guarantee exactly-once", "delivery: at-least-once\n" + head + "    sink.delivery-guarantee: exactly-once\n    properties.acks: \"0\"\n",
			`:9: sink.options.sink.delivery-guarantee: exactly-once contradicts the pipeline's delivery: at-least-once (set one of them, or both alike)`},
		{"compression", head + "    properties.compression.type: brotli\n",
			`:8: sink.options.properties.compression.type: want one of none, gzip, snappy, lz4, zstd, got "brotli"`},
		{"partitions", head + "    topic-create: true\n    topic-create.partitions: 0\n",
			`:9: sink.options.topic-create.partitions: must be between 1 and 1048576, or -1 for the broker's default, got 0`},
		{"configs", head + "    topic-create.configs: [retention.ms]\n",
			`:8: sink.options.topic-create.configs: item 1: want key=value, got `},
		{"topic-create.partitions without topic-create", head + "    topic-create.partitions: 3\n",
			`:8: sink.options.topic-create.partitions: has no effect without topic-create: true`},
		{"slots", head + "    sink.transaction-slots: 1\n",
			`:8: sink.options.sink.transaction-slots: must be between 2 and 64, got 1`},
		{"transaction timeout", head + "    sink.transaction-timeout: 500ms\n",
			`:8: sink.options.sink.transaction-timeout: must be between 1s and 24h0m0s, got 500ms`},
		{"partitioner", head + "    sink.partitioner: fixed\n",
			`:8: sink.options.sink.partitioner: want one of default, hash-key, round-robin, sticky, got "fixed"`},
		{"linger", head + "    properties.linger.ms: -5\n",
			`:8: sink.options.properties.linger.ms: must be between 0 and 60000, got -5`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(dir, fmt.Sprintf("p%d.yaml", i))
			if err := os.WriteFile(file, []byte(tt.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			r := run(t, nil, "run", file)
			if r.code != 2 {
				t.Errorf("exit code: got %d, want 2\n%s", r.code, r.stderr)
			}
			if want := "sluice: " + file + tt.want; !strings.HasPrefix(r.stderr, want) {
				t.Errorf("stderr:\ngot  %q\nwant %q…", r.stderr, want)
			}
		})
	}
}

// TestKafkaSinkDeliveryGuarantee: sink.delivery-guarantee sets the
// pipeline's delivery when the pipeline sets none (then acks 1 is
// allowed), and agrees with it otherwise.
func TestKafkaSinkDeliveryGuarantee(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	dir := t.TempDir()
	head := "source:\n  type: datagen\nsink:\n  type: kafka\n  options:\n    brokers: [127.0.0.1:1]\n    topic: t\n"
	for i, tc := range []struct{ yaml, want string }{
		{head, "(exactly-once,"},
		{head + "    sink.delivery-guarantee: at-least-once\n    properties.acks: \"1\"\n", "(at-least-once,"},
		{"delivery: exactly-once\n" + head + "    sink.delivery-guarantee: exactly-once\n", "(exactly-once,"},
	} {
		file := filepath.Join(dir, fmt.Sprintf("d%d.yaml", i))
		if err := os.WriteFile(file, []byte(tc.yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		r := run(t, nil, "validate", file)
		if r.code != 0 || !strings.Contains(r.stdout, "sink kafka "+tc.want) {
			t.Errorf("case %d: exit %d, want 0 and %q in\n%s%s", i, r.code, tc.want, r.stdout, r.stderr)
		}
	}
}
