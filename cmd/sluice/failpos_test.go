package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// failPosInput is a JSON lines file whose third line (at byte offset 50)
// lacks "amount", so that a filter on it fails there.
const failPosInput = "{\"id\": 1, \"amount\": 500}\n{\"id\": 2, \"amount\": 600}\n{\"id\": 3}\n{\"id\": 4, \"amount\": 700}\n"

// TestFailNamesPositionThroughTheBinary: under the default policy (fail) a
// filter that fails on a record fails `sluice run` at once (exit 1, no
// restart although restarts are allowed) with a line naming the
// transform, the file, line and byte offset the record was read at, and
// an excerpt of the record. With the input directory and a value the
// record gets from ${VAR}s, the line names them as ${IN} and ${APIKEY}
// and no output of the run holds their values.
func TestFailNamesPositionThroughTheBinary(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	for _, secret := range []bool{false, true} {
		t.Run(fmt.Sprintf("secret=%v", secret), func(t *testing.T) {
			work := t.TempDir()
			in := filepath.Join(work, "in-sekrit-dir-77")
			if err := os.Mkdir(in, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(in, "a.jsonl"), []byte(failPosInput), 0o644); err != nil {
				t.Fatal(err)
			}
			const apiKey = "key-0123456789"
			paths, key, env := in, apiKey, []string(nil)
			if secret {
				paths, key, env = "${IN}", "${APIKEY}", []string{"IN=" + in, "APIKEY=" + apiKey}
			}
			file := writeNamedPipeline(t, work, "p.yaml", fmt.Sprintf(`restart: {strategy: fixed-delay, attempts: 3, delay: 100ms}
source:
  type: file
  options: {paths: ["%s"]}
transforms:
  - map: '{"id": id, "amount": amount, "key": "%s"}'
  - filter: amount > 100
    name: big
sink:
  type: file
  options: {path: %s}
`, paths, key, filepath.Join(work, "out")))
			r := run(t, env, "run", "--progress", "off", file)
			shown := in
			if secret {
				shown = "${IN}"
			}
			checkFailedFast(t, r, `transform filter "big" (`+file+`:7) at file `+shown+`/a.jsonl line 3 (offset 50): invalid operation: <nil> > int`,
				`record: {"amount":null,"id":3,"key":"`+key+`"}`)
			if secret {
				if found := secretsIn(r.stdout+r.stderr, map[string]string{"IN": in, "APIKEY": apiKey}); len(found) > 0 {
					t.Errorf("the values of %v appear:\n%s%s", found, r.stdout, r.stderr)
				}
			}
			if strings.Contains(r.stderr, "\x00") {
				t.Errorf("the position's hidden key shows:\n%q", r.stderr)
			}
		})
	}
}

// TestFailNamesKafkaPositionThroughTheBinary: the same from a Kafka topic
// (an in-process kfake cluster on loopback) whose name comes from
// ${TOPIC}: the failure line names topic (as ${TOPIC}), partition and
// offset, and no output holds the topic's name.
func TestFailNamesKafkaPositionThroughTheBinary(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	const topic = "orders-sekrit-topic"
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, topic))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for l := range strings.Lines(failPosInput) {
		// All in partition 1: the bad third record is at offset 2.
		recs = append(recs, &kgo.Record{Value: []byte(strings.TrimSpace(l)), Partition: 1})
	}
	err = cl.ProduceSync(t.Context(), recs...).FirstErr()
	cl.Close()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	file := writeNamedPipeline(t, work, "p.yaml", fmt.Sprintf(`restart: {strategy: fixed-delay, attempts: 3, delay: 100ms}
source:
  type: kafka
  options: {brokers: ["%s"], topics: ["${TOPIC}"], bounded: true}
transforms:
  - filter: amount > 100
    name: big
sink:
  type: file
  options: {path: %s}
`, c.ListenAddrs()[0], filepath.Join(work, "out")))
	r := run(t, []string{"TOPIC=" + topic}, "run", "--progress", "off", file)
	checkFailedFast(t, r, `transform filter "big" (`+file+`:6) at topic "${TOPIC}" partition 1 offset 2: invalid operation: <nil> > int`,
		`record: {"id":3}`)
	if found := secretsIn(r.stdout+r.stderr, map[string]string{"TOPIC": topic}); len(found) > 0 {
		t.Errorf("the values of %v appear:\n%s%s", found, r.stdout, r.stderr)
	}
}

// TestFailPosCost measures what attaching positions costs `sluice run`
// on a Kafka topic (kfake on loopback, in this process, so its CPU is not
// counted): a bounded Kafka → filter (on-error fail, never failing) →
// file pipeline over SLUICE_FAILPOS_RECORDS (default 200000) records, run
// 7 times, logging the median CPU-seconds (user+sys) of the sluice
// process per million records. With SLUICE_FAILPOS_OLD naming another
// sluice binary (such as one built before positions), both run
// alternately. It only runs with SLUICE_FAILPOS_MEASURE=1.
func TestFailPosCost(t *testing.T) {
	if os.Getenv("SLUICE_FAILPOS_MEASURE") != "1" {
		t.Skip("set SLUICE_FAILPOS_MEASURE=1 (and optionally SLUICE_FAILPOS_OLD, SLUICE_FAILPOS_RECORDS) to measure")
	}
	n := 200000
	if v := os.Getenv("SLUICE_FAILPOS_RECORDS"); v != "" {
		if _, err := fmt.Sscan(v, &n); err != nil || n < 1 {
			t.Fatalf("SLUICE_FAILPOS_RECORDS=%q", v)
		}
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("in"), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	for from := 0; from < n; from += 10000 {
		var recs []*kgo.Record
		for i := from; i < min(from+10000, n); i++ {
			recs = append(recs, &kgo.Record{Value: fmt.Appendf(nil, `{"id": %d, "amount": %d, "user": "user-%d"}`, i, i*37%1000, i%10)})
		}
		if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	bins := map[string]string{"new": binary}
	if old := os.Getenv("SLUICE_FAILPOS_OLD"); old != "" {
		bins["old"] = old
	}
	cpu := map[string][]float64{}
	for i := range 7 {
		for name, bin := range bins {
			work := t.TempDir()
			file := writeNamedPipeline(t, work, "p.yaml", fmt.Sprintf(`checkpoint: {interval: 1s}
source:
  type: kafka
  options: {brokers: ["%s"], topics: [in], bounded: true}
transforms:
  - filter: amount >= 0
    name: all
sink:
  type: file
  options: {path: %s}
`, c.ListenAddrs()[0], filepath.Join(work, "out")))
			cmd := exec.CommandContext(t.Context(), bin, "run", "--progress", "off", file)
			var errb strings.Builder
			cmd.Stderr = &errb
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s run %d: %v\n%s", name, i, err, errb.String())
			}
			if !strings.Contains(errb.String(), fmt.Sprintf("%s out", cliCount(n))) {
				t.Fatalf("%s run %d: not every record out:\n%s", name, i, errb.String())
			}
			s := cmd.ProcessState
			cpu[name] = append(cpu[name], (s.UserTime()+s.SystemTime()).Seconds()*1e6/float64(n))
		}
	}
	for name, v := range cpu {
		slices.Sort(v)
		t.Logf("%s: median %.2f CPU-s per million records (all: %.2f)", name, v[len(v)/2], v)
	}
}

// cliCount formats n as the run summary does (1,234,567).
func cliCount(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
