package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceDeadLetterInput writes values {"id": N, "amount": A} for ids
// from..to-1 to topic "in", with the faults of writeDeadLetterInput (1%
// malformed, 1% without "amount").
func produceDeadLetterInput(t *testing.T, brokers []string, from, to int) {
	t.Helper()
	produceDeadLetterInputTo(t, brokers, "in", from, to)
}

// produceDeadLetterInputTo is produceDeadLetterInput to topic.
func produceDeadLetterInputTo(t *testing.T, brokers []string, topic string, from, to int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for id := from; id < to; id++ {
		v := fmt.Sprintf(`{"id": %d, "amount": %d}`, id, id%1000)
		switch id % 100 {
		case 13:
			v = fmt.Sprintf(`{"id": %d, "amount`, id)
		case 57:
			v = fmt.Sprintf(`{"id": %d}`, id)
		}
		recs = append(recs, &kgo.Record{Value: []byte(v)})
	}
	if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// readDeadTopic reads the committed dead letters of topic "dead"
// (read_committed) into counts per id.
func readDeadTopic(t *testing.T, brokers []string) map[int64]int {
	t.Helper()
	return readDeadTopicOf(t, brokers, "dead", "in")
}

// readDeadTopicOf is readDeadTopic of topic dead, whose source dead
// letters come from topic in.
func readDeadTopicOf(t *testing.T, brokers []string, dead, in string) map[int64]int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(dead),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// Read until three polls in a row found nothing, once something was
	// read; before that, a new client's first fetch can take seconds on a
	// loaded machine (three empty 300 ms polls once read nothing at all
	// at load 25 while the topic held every dead letter): up to 30 polls,
	// unless the topic holds no record at all.
	counts := map[int64]int{}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	idle, read := 0, 0
	for idle < 3 || (read == 0 && idle < 30 && !topicEmpty(t, cl, dead)) {
		pctx, pcancel := context.WithTimeout(ctx, 300*time.Millisecond)
		fs := cl.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			t.Fatal("reading the dead-letter topic timed out")
		}
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			n++
			var rec map[string]any
			if err := json.Unmarshal(r.Value, &rec); err != nil {
				t.Fatalf("dead letter %q: %v", r.Value, err)
			}
			switch rec["operator"] {
			case "in":
				m := deadRawID.FindStringSubmatch(fmt.Sprint(rec["raw"]))
				if m == nil || !strings.HasPrefix(fmt.Sprint(rec["split"]), in+"-") || rec["offset"] == nil {
					t.Fatalf("bad source dead letter %v", rec)
				}
				id, _ := strconv.ParseInt(m[1], 10, 64)
				counts[id]++
			case "big":
				r, _ := rec["record"].(map[string]any)
				id, ok := r["id"].(float64)
				if !ok {
					t.Fatalf("bad transform dead letter %v", rec)
				}
				counts[int64(id)]++
			default:
				t.Fatalf("dead letter %v", rec)
			}
		})
		read += n
		if n == 0 {
			idle++
		} else {
			idle = 0
		}
	}
	return counts
}

// TestDeadLettersKafkaKill9Resume is the Kafka variant: a Kafka topic (an
// in-process kfake cluster on loopback) with 1% malformed values and 1%
// records the filter fails on, main output to files, dead letters to a
// Kafka topic (exactly-once, transactions); kill -9 once output is
// committed, more input, --from, SIGTERM once everything is accounted
// for: main output + dead letters (read_committed) = input, each once.
func TestDeadLettersKafkaKill9Resume(t *testing.T) {
	t.Parallel() // mostly waits on its processes; its topics, tables and dirs are its own
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "in", "dead"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	work := t.TempDir()
	out, ckpt := filepath.Join(work, "out"), filepath.Join(work, "checkpoints")
	file := writeNamedPipeline(t, work, "p.yaml", fmt.Sprintf(`name: kafka-dead-letters
parallelism: 2
checkpoint:
  interval: 50ms
  dir: %s
restart:
  strategy: none
source:
  type: kafka
  name: in
  options:
    brokers: [%s]
    topics: [in]
    on-malformed: dead-letter
transforms:
  - filter: amount > 100
    name: big
    on-error: dead-letter
sink:
  type: file
  name: out
  options: {path: %s}
dead-letter:
  type: kafka
  options: {brokers: [%s], topic: dead}
`, ckpt, brokers[0], out, brokers[0]))
	const first, total = 60000, 80000
	produceDeadLetterInput(t, brokers, 0, first)

	p := start(t, nil, "run", "--progress", "off", file)
	for i := 0; i < 2400 && countCommittedLines(t, out) == 0; i++ {
		time.Sleep(25 * time.Millisecond)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	if len(readOutput(t, out, "id")) == 0 {
		t.Fatalf("nothing committed before the kill\n%s", p.stderr())
	}
	t.Logf("killed with %d main records committed of %d", len(readOutput(t, out, "id")), first)

	produceDeadLetterInput(t, brokers, first, total)
	p = start(t, nil, "run", "--progress", "off", "--from", ckpt, file)
	wantMain := 0
	for id := range total {
		if id%100 != 13 && id%100 != 57 && id%1000 > 100 {
			wantMain++
		}
	}
	for i := 0; i < 4800 && countCommittedLines(t, out) < wantMain; i++ { // the check below decodes and counts each id
		time.Sleep(25 * time.Millisecond)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("resumed run: exit %d\n%s", code, p.stderr())
	}
	checkDeadLetterOutputs(t, readOutput(t, out, "id"), readDeadTopic(t, brokers), total)
}
