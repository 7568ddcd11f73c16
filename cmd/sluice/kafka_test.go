package main

// Kafka through the binary, against the real broker of scripts/kafka.sh
// (skipped without SLUICE_KAFKA_BROKERS): default transactional id
// prefixes of two concurrent pipelines, a second pipeline on an explicit
// prefix already in use, kill -9 and --from, and input with old and
// future timestamps. Outputs are read by an independent read_committed
// consumer.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func kafkaBrokers(t *testing.T) string {
	t.Helper()
	b := os.Getenv("SLUICE_KAFKA_BROKERS")
	if b == "" {
		t.Skip("SLUICE_KAFKA_BROKERS is not set: start a broker with `eval \"$(scripts/kafka.sh start)\"; export SLUICE_KAFKA_BROKERS`")
	}
	return b
}

// kafkaSeq numbers the topics of the node tests; topicSeq those of
// kafkaTopic and secBroker.topic, which parallel tests call.
var (
	kafkaSeq int
	topicSeq atomic.Int64
)

func kafkaTopic(t *testing.T, brokers string, cfg map[string]*string) string {
	t.Helper()
	name := fmt.Sprintf("cli-%d-%d", time.Now().UnixNano(), topicSeq.Add(1))
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, 2, 1, cfg, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	// A produce right after the creation was once answered
	// UNKNOWN_TOPIC_OR_PARTITION at load 25: wait (bounded by ctx) until
	// the metadata lists both partitions with a leader.
	for !topicReady(ctx, adm, name, 2) {
		select {
		case <-ctx.Done():
			t.Fatalf("topic %s: no leader for its partitions within 30s", name)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return name
}

// topicReady reports whether the metadata lists the topic's partitions,
// each with a leader.
func topicReady(ctx context.Context, adm *kadm.Client, topic string, partitions int) bool {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return false
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil || len(td.Partitions) != partitions {
		return false
	}
	for _, p := range td.Partitions {
		if p.Err != nil || p.Leader < 0 {
			return false
		}
	}
	return true
}

// readTopic reads topic read_committed until want records arrived (want
// >= 0; bounded by two minutes) or nothing arrived for two seconds (want
// < 0).
func readTopic(t *testing.T, brokers, topic string, want int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	return pollTopic(t, cl, topic, want)
}

// pollTopic polls cl, a consumer of topic, as readTopic says.
func pollTopic(t *testing.T, cl *kgo.Client, topic string, want int) []*kgo.Record {
	t.Helper()
	var out []*kgo.Record
	deadline := time.Now().Add(2 * time.Minute)
	empty := 0 // polls in a row that returned nothing
	for (want < 0 || len(out) < want) && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r); n++ })
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) && !errors.Is(e.Err, context.Canceled) {
				t.Fatalf("consume %s: %v", topic, e.Err)
			}
		}
		// want < 0 reads what is there: stop after a poll that found
		// nothing, once something was read. Before that, a new client's
		// first fetch can take several polls on a loaded machine (three
		// empty polls once read nothing at load 36 while the topic held
		// 120000 records): stop after three empty polls only if the topic
		// holds no record at all (its high watermarks), else after 15.
		if n == 0 {
			empty++
		} else {
			empty = 0
		}
		if want < 0 && empty > 0 && (len(out) > 0 || empty >= 15 || empty >= 3 && topicEmpty(t, cl, topic)) {
			break
		}
	}
	return out
}

// topicEmpty reports whether every partition of topic has high watermark
// 0 (no record written, committed or not); false when the offsets cannot
// be listed.
func topicEmpty(t *testing.T, cl *kgo.Client, topic string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	offs, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil || offs.Error() != nil {
		return false
	}
	empty := true
	offs.Each(func(o kadm.ListedOffset) { empty = empty && o.Offset == 0 })
	return empty
}

// checkIDsOnce asserts that recs hold {"id": i} for every i in [0, count)
// exactly once.
func checkIDsOnce(t *testing.T, recs []*kgo.Record, count int) {
	t.Helper()
	seen := make([]int, count)
	for _, r := range recs {
		var v struct {
			ID *int64 `json:"id"`
		}
		if err := json.Unmarshal(r.Value, &v); err != nil || v.ID == nil || *v.ID < 0 || *v.ID >= int64(count) {
			t.Fatalf("bad record %q: %v", r.Value, err)
		}
		seen[*v.ID]++
	}
	missing, dup := 0, 0
	for _, n := range seen {
		switch {
		case n == 0:
			missing++
		case n > 1:
			dup++
		}
	}
	if missing > 0 || dup > 0 {
		t.Fatalf("%d records read: %d of %d ids missing, %d duplicated", len(recs), missing, count, dup)
	}
}

const genToKafka = `name: ${NAME}
parallelism: 2
delivery: ${DELIVERY:-exactly-once}
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
  type: kafka
  options:
    brokers:
      - ${BROKERS}
    topic: ${TOPIC}
    transactional-id-prefix: ${PREFIX:-}
`

// TestKafkaDefaultPrefixTwoPipelines runs one pipeline file twice at once
// (two jobs, each its own topic and checkpoint dir) with the Kafka sink
// unnamed and no prefix: both exit 0 and each topic holds every record
// exactly once. Before, both used transactional ids sluice-kafka-<s>-<k>
// and fenced each other; one exited 0 with records missing for good.
func TestKafkaDefaultPrefixTwoPipelines(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	brokers := kafkaBrokers(t)
	const count = 20000
	file := writePipeline(t, t.TempDir(), genToKafka)
	var wg sync.WaitGroup
	topics := make([]string, 2)
	results := make([]result, 2)
	for i := range 2 {
		topics[i] = kafkaTopic(t, brokers, nil)
		env := []string{"NAME=twins", "OUT=" + t.TempDir(), fmt.Sprint("COUNT=", count), "RATE=10000", "BROKERS=" + brokers, "TOPIC=" + topics[i]}
		wg.Go(func() { results[i] = run(t, env, "run", "--progress", "off", file) })
	}
	wg.Wait()
	for i := range 2 {
		if results[i].code != 0 {
			t.Fatalf("pipeline %d: exit %d\n%s", i, results[i].code, results[i].stderr)
		}
		checkIDsOnce(t, readTopic(t, brokers, topics[i], count), count)
	}
}

// TestKafkaSamePrefixSecondRunRefused starts a pipeline with an explicit
// prefix and, while it runs, a second one with the same prefix: the
// second exits non-zero at once naming the first (its job name and pid)
// and itself, without writing anything; the first exits 0 with every
// record exactly once.
func TestKafkaSamePrefixSecondRunRefused(t *testing.T) {
	t.Parallel() // paced by its datagen rate; its topics and dirs are its own
	brokers := kafkaBrokers(t)
	const count = 20000
	file := writePipeline(t, t.TempDir(), genToKafka)
	prefix := fmt.Sprintf("cli-shared-%d", time.Now().UnixNano())
	topicA, topicB := kafkaTopic(t, brokers, nil), kafkaTopic(t, brokers, nil)
	common := []string{fmt.Sprint("COUNT=", count), "RATE=4000", "BROKERS=" + brokers, "PREFIX=" + prefix}
	a := start(t, append([]string{"NAME=first-job", "OUT=" + t.TempDir(), "TOPIC=" + topicA}, common...), "run", "--progress", "off", file)
	if len(readTopic(t, brokers, topicA, 1)) == 0 {
		t.Fatalf("the first pipeline committed nothing:\n%s", a.stderr())
	}
	b := run(t, append([]string{"NAME=second-job", "OUT=" + t.TempDir(), "TOPIC=" + topicB}, common...), "run", "--progress", "off", file)
	if b.code == 0 {
		t.Fatalf("second pipeline on prefix %s exited 0:\n%s", prefix, b.stderr)
	}
	// This run's own name came from ${NAME}: it is shown as ${NAME}.
	for _, want := range []string{"transactional id prefix in use", `"first-job"`, `"${NAME}"`, "pid " + strconv.Itoa(a.cmd.Process.Pid)} {
		if !strings.Contains(b.stderr, want) {
			t.Errorf("second pipeline's error does not name %q:\n%s", want, b.stderr)
		}
	}
	if code := a.wait(t); code != 0 {
		t.Fatalf("first pipeline: exit %d\n%s", code, a.stderr())
	}
	checkIDsOnce(t, readTopic(t, brokers, topicA, count), count)
	if n := len(readTopic(t, brokers, topicB, -1)); n != 0 {
		t.Errorf("the refused pipeline committed %d records", n)
	}
}

var lossRE = regexp.MustCompile(`(?i)level=(ERROR|WARN).*|data is lost`)

// TestKafkaKill9Resume kills a Kafka pipeline with SIGKILL after its
// output started to commit and resumes it with --from: the resumed run
// exits 0, logs no warning or error (no "its data is lost" about the
// transactions the killed process committed), and the topic holds every
// record exactly once.
func TestKafkaKill9Resume(t *testing.T) {
	t.Parallel() // paced by its datagen rate; its topics and dirs are its own
	brokers := kafkaBrokers(t)
	const count = 20000
	file := writePipeline(t, t.TempDir(), genToKafka)
	topic := kafkaTopic(t, brokers, nil)
	out := t.TempDir()
	env := []string{"NAME=killed", "OUT=" + out, fmt.Sprint("COUNT=", count), "RATE=5000", "BROKERS=" + brokers, "TOPIC=" + topic}
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
	if m := lossRE.FindAllString(r.stderr, -1); len(m) > 0 {
		t.Errorf("the resumed run logged %q:\n%s", m, r.stderr)
	}
	checkIDsOnce(t, readTopic(t, brokers, topic, count), count)
}

// TestKafkaOldAndFutureTimestamps runs a Kafka → Kafka pipeline over input
// timestamped three days in the past and three days in the future: it
// exits 0 and the output holds every record once with its input
// timestamp. Before, it failed within milliseconds ("records have timed
// out before they were able to be produced").
func TestKafkaOldAndFutureTimestamps(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	brokers := kafkaBrokers(t)
	const count = 2000
	week := "604800000" // the broker refuses timestamps over an hour ahead by default
	cfg := map[string]*string{"message.timestamp.after.max.ms": &week}
	in, out := kafkaTopic(t, brokers, cfg), kafkaTopic(t, brokers, cfg)
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.DefaultProduceTopic(in))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	want := map[int64]int64{}
	var recs []*kgo.Record
	for i := range int64(count) {
		ts := now.Add(-72 * time.Hour)
		if i%2 == 1 {
			ts = now.Add(72 * time.Hour)
		}
		ts = ts.Add(time.Duration(i) * time.Millisecond)
		want[i] = ts.UnixMilli()
		recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, `{"id":%d}`, i), Timestamp: ts})
	}
	if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	file := writePipeline(t, t.TempDir(), `name: copy
parallelism: 2
checkpoint:
  interval: 100ms
source:
  type: kafka
  options:
    brokers:
      - ${BROKERS}
    topics:
      - ${IN}
    bounded: true
sink:
  type: kafka
  options:
    brokers:
      - ${BROKERS}
    topic: ${OUT}
`)
	r := run(t, []string{"BROKERS=" + brokers, "IN=" + in, "OUT=" + out}, "run", "--progress", "off", file)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	got := readTopic(t, brokers, out, count)
	checkIDsOnce(t, got, count)
	for _, rec := range got {
		var v struct{ ID int64 }
		_ = json.Unmarshal(rec.Value, &v)
		if rec.Timestamp.UnixMilli() != want[v.ID] {
			t.Fatalf("record %d: timestamp %v, want the input's %v", v.ID, rec.Timestamp.UTC(), time.UnixMilli(want[v.ID]).UTC())
		}
	}
}
