package main

// The Kafka source's options with Flink SQL's names through the binary,
// against the real broker of scripts/kafka.sh (skipped without
// SLUICE_KAFKA_BROKERS): a re-run under scan.startup.mode: group-offsets
// continues where the group committed, the timestamp and specific-offsets
// start and bounded modes select exactly the expected records,
// scan.bounded.mode: latest-offset ends the job, and conflicting options
// are configuration errors at their line. Outputs are the committed part
// files of a file sink, read independently.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceIDs writes {"id": i} for i in [from, to) to topic, to the
// partition i%2 with the timestamp tsOf(i) (nil: now).
func produceIDs(t *testing.T, brokers, topic string, from, to int, tsOf func(i int) time.Time) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := from; i < to; i++ {
		r := &kgo.Record{Value: fmt.Appendf(nil, `{"id":%d}`, i), Partition: int32(i % 2)}
		if tsOf != nil {
			r.Timestamp = tsOf(i)
		}
		recs = append(recs, r)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// waitRecords waits until the committed output under dir holds at least n
// records (bounded by two minutes and 1200 looks) and returns the counts.
func waitRecords(t *testing.T, p *proc, dir string, n int) map[int64]int {
	t.Helper()
	for range 1200 {
		got := readOutput(t, dir, "id")
		total := 0
		for _, c := range got {
			total += c
		}
		if total >= n {
			return got
		}
		select {
		case <-p.done:
			t.Fatalf("sluice ended with %d of %d records committed:\n%s", total, n, p.stderr())
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("fewer than %d records committed in two minutes:\n%s", n, p.stderr())
	return nil
}

// checkOnce asserts that counts hold exactly the ids in want, each once.
func checkOnce(t *testing.T, counts map[int64]int, want []int64) {
	t.Helper()
	var missing, extra, dup []int64
	for _, id := range want {
		if counts[id] == 0 {
			missing = append(missing, id)
		}
	}
	for id, n := range counts {
		if !slices.Contains(want, id) {
			extra = append(extra, id)
		} else if n > 1 {
			dup = append(dup, id)
		}
	}
	if len(missing)+len(extra)+len(dup) > 0 {
		slices.Sort(missing)
		slices.Sort(extra)
		slices.Sort(dup)
		t.Fatalf("want %d ids once: %d missing %v, %d unexpected %v, %d duplicated %v", len(want),
			len(missing), head(missing), len(extra), head(extra), len(dup), head(dup))
	}
}

func head(ids []int64) []int64 { return ids[:min(len(ids), 10)] }

func idRange(from, to int) []int64 {
	var ids []int64
	for i := from; i < to; i++ {
		ids = append(ids, int64(i))
	}
	return ids
}

func stopWithSIGTERM(t *testing.T, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("stopped with SIGTERM: exit %d\n%s", code, p.stderr())
	}
	if !stoppedRE.MatchString(p.stderr()) {
		t.Fatalf("no clean stop:\n%s", p.stderr())
	}
}

// groupOffsets returns the group's committed offsets of topic's two
// partitions.
func groupOffsets(t *testing.T, brokers, group, topic string) [2]int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	os, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	var out [2]int64
	for p := range 2 {
		out[p] = -1
		if o, ok := os.Lookup(topic, int32(p)); ok && o.Err == nil {
			out[p] = o.At
		}
	}
	return out
}

const groupPipeline = `name: group-rerun
parallelism: 2
checkpoint:
  interval: ${INTERVAL}
  dir: ${CK}
source:
  type: kafka
  options:
    brokers: "${BROKERS}"
    topics: ["${IN}"]
    scan.startup.mode: group-offsets
    properties.group.id: ${GROUP}
sink:
  type: file
  options:
    path: ${OUT}
`

// TestKafkaGroupOffsetsRerun runs a Kafka → file pipeline under a consumer
// group, lets it complete checkpoints, produces more and stops it with
// SIGTERM; the group then holds exactly the offsets of the run's final
// checkpoint (its output's end). More is produced and the SAME pipeline
// runs again without --from on a fresh checkpoint directory: the union of
// both runs' committed outputs is the input, every record exactly once.
// The checkpoint interval is long, so what was produced just before the
// stop is committed (output and group offsets) only by the final
// checkpoint.
func TestKafkaGroupOffsetsRerun(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	brokers := kafkaBrokers(t)
	in := kafkaTopic(t, brokers, nil)
	group := "g-" + in
	out := t.TempDir()
	file := writePipeline(t, t.TempDir(), groupPipeline)
	env := func(interval string) []string {
		return []string{"BROKERS=" + brokers, "IN=" + in, "GROUP=" + group, "OUT=" + out, "CK=" + t.TempDir(), "INTERVAL=" + interval}
	}

	produceIDs(t, brokers, in, 0, 1000, nil)
	p := start(t, env("200ms"), "run", "--progress", "off", file)
	waitRecords(t, p, out, 1000)
	stopWithSIGTERM(t, p)
	if got := groupOffsets(t, brokers, group, in); got != [2]int64{500, 500} {
		t.Fatalf("after the first stop the group has offsets %v, want [500 500]\n%s", got, p.stderr())
	}

	// A long interval: no checkpoint but the final one. Once the source
	// has read the new records (seen through /status), SIGTERM: only the
	// final checkpoint commits them, in the output and in the group.
	p = start(t, append(env("1h"), "SLUICE_TEST_TOKEN=t0ken"), "run", "--progress", "off",
		"--http", "127.0.0.1:0", "--http-token-env", "SLUICE_TEST_TOKEN", file)
	base := p.waitLine(t, httpRE)
	produceIDs(t, brokers, in, 1000, 2000, nil)
	waitRecordsIn(t, p, base, "kafka", 1000)
	stopWithSIGTERM(t, p)
	if got := groupOffsets(t, brokers, group, in); got != [2]int64{1000, 1000} {
		t.Fatalf("after the second stop the group has offsets %v, want [1000 1000] (the final checkpoint's)\n%s", got, p.stderr())
	}
	checkOnce(t, readOutput(t, out, "id"), idRange(0, 2000))

	produceIDs(t, brokers, in, 2000, 3000, nil)
	p = start(t, env("200ms"), "run", "--progress", "off", file)
	waitRecords(t, p, out, 3000)
	stopWithSIGTERM(t, p)
	checkOnce(t, readOutput(t, out, "id"), idRange(0, 3000))
}

// waitRecordsIn waits (bounded: 1200 looks, two minutes) until the
// subtasks of operator op have read at least n records, per /status.
func waitRecordsIn(t *testing.T, p *proc, base, op string, n int64) {
	t.Helper()
	var got int64
	for range 1200 {
		if body, ok := tryGetURL(t, base+"/status", "t0ken"); ok {
			var st struct {
				Subtasks []struct {
					Operator  string `json:"operator"`
					RecordsIn int64  `json:"records_in"`
				} `json:"subtasks"`
			}
			if err := json.Unmarshal([]byte(body), &st); err != nil {
				t.Fatal(err)
			}
			got = 0
			for _, s := range st.Subtasks {
				if s.Operator == op {
					got += s.RecordsIn
				}
			}
			if got >= n {
				return
			}
		}
		select {
		case <-p.done:
			t.Fatalf("sluice ended after %s read %d of %d records:\n%s", op, got, n, p.stderr())
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("%s read %d of %d records in two minutes:\n%s", op, got, n, p.stderr())
}

// runBounded runs a bounded Kafka → file pipeline with the source options
// extra (YAML lines, indented under options) to its end and returns the
// committed output.
func runBounded(t *testing.T, brokers, in, extra string) map[int64]int {
	t.Helper()
	out := t.TempDir()
	file := writePipeline(t, t.TempDir(), `name: bounded
parallelism: 2
checkpoint:
  interval: 100ms
source:
  type: kafka
  options:
    brokers: "${BROKERS}"
    topics: ["${IN}"]
`+extra+`sink:
  type: file
  options:
    path: ${OUT}
`)
	r := run(t, []string{"BROKERS=" + brokers, "IN=" + in, "OUT=" + out}, "run", "--progress", "off", file)
	if r.code != 0 {
		t.Fatalf("options\n%sexit %d\n%s", extra, r.code, r.stderr)
	}
	return readOutput(t, out, "id")
}

// TestKafkaStartAndBoundedModes: over 200 records, id i in partition i%2
// with the timestamp base + i s, each start and bounded mode reads exactly
// the records it names, and the bounded modes end the job (exit 0).
func TestKafkaStartAndBoundedModes(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	brokers := kafkaBrokers(t)
	in := kafkaTopic(t, brokers, nil)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	produceIDs(t, brokers, in, 0, 200, func(i int) time.Time { return base.Add(time.Duration(i) * time.Second) })
	ms := func(i int) int64 { return base.Add(time.Duration(i) * time.Second).UnixMilli() }
	// offset o of partition p holds id 2o+p.
	ids := func(keep func(id int) bool) []int64 {
		var out []int64
		for i := range 200 {
			if keep(i) {
				out = append(out, int64(i))
			}
		}
		return out
	}
	for _, c := range []struct {
		name, extra string
		want        []int64
	}{
		{"latest-offset bound", "    scan.bounded.mode: latest-offset\n", ids(func(int) bool { return true })},
		{"deprecated bounded", "    bounded: true\n", ids(func(int) bool { return true })},
		{"timestamp start", fmt.Sprintf("    scan.startup.mode: timestamp\n    scan.startup.timestamp-millis: %d\n    scan.bounded.mode: latest-offset\n", ms(150)),
			ids(func(i int) bool { return i >= 150 })},
		{"specific-offsets start", "    scan.startup.mode: specific-offsets\n    scan.startup.specific-offsets: \"partition:0,offset:90;partition:1,offset:10\"\n    scan.bounded.mode: latest-offset\n",
			ids(func(i int) bool { return (i%2 == 0 && i >= 180) || (i%2 == 1 && i >= 21) })},
		{"specific-offsets with topic, others reset latest", fmt.Sprintf("    scan.startup.mode: specific-offsets\n    scan.startup.specific-offsets: \"topic:%s,partition:1,offset:95\"\n    properties.auto.offset.reset: latest\n    scan.bounded.mode: latest-offset\n", in),
			ids(func(i int) bool { return i%2 == 1 && i >= 191 })},
		{"timestamp start after every record", fmt.Sprintf("    scan.startup.mode: timestamp\n    scan.startup.timestamp-millis: %d\n    scan.bounded.mode: latest-offset\n", ms(1000)), nil},
		{"timestamp bound before every record", fmt.Sprintf("    scan.bounded.mode: timestamp\n    scan.bounded.timestamp-millis: %d\n", ms(-10)), nil},
		{"timestamp bound", fmt.Sprintf("    scan.bounded.mode: timestamp\n    scan.bounded.timestamp-millis: %d\n", ms(50)),
			ids(func(i int) bool { return i < 50 })},
		{"specific-offsets bound", "    scan.startup.mode: latest-offset\n    scan.bounded.mode: specific-offsets\n    scan.bounded.specific-offsets: \"partition:0,offset:100\"\n",
			nil},
		{"specific-offsets start and bound", "    scan.startup.mode: specific-offsets\n    scan.startup.specific-offsets: \"partition:0,offset:10;partition:1,offset:20\"\n    scan.bounded.mode: specific-offsets\n    scan.bounded.specific-offsets: \"partition:0,offset:15;partition:1,offset:22\"\n",
			ids(func(i int) bool { return (i%2 == 0 && i >= 20 && i < 30) || (i%2 == 1 && i >= 41 && i < 45) })},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			checkOnce(t, runBounded(t, brokers, in, c.extra), c.want)
		})
	}
}

// TestKafkaAutoOffsetResetNone: group-offsets with
// properties.auto.offset.reset: none and a group without offsets fails the
// job at once, naming the group and the partitions, without restarting
// (a restart would meet the same missing offsets).
func TestKafkaAutoOffsetResetNone(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	brokers := kafkaBrokers(t)
	in := kafkaTopic(t, brokers, nil)
	file := writePipeline(t, t.TempDir(), `parallelism: 1
restart:
  strategy: fixed-delay
  attempts: 3
  delay: 100ms
source:
  type: kafka
  options:
    brokers: "${BROKERS}"
    topics: ["${IN}"]
    scan.startup.mode: group-offsets
    properties.group.id: nobody-${IN}
    properties.auto.offset.reset: none
sink:
  type: print
`)
	r := run(t, []string{"BROKERS=" + brokers, "IN=" + in}, "run", "--progress", "off", file)
	// The topic came from ${IN}: it is shown as ${IN}.
	for _, want := range []string{"no offset for partition (reset: none)", `no committed offset in group "nobody-${IN}"`,
		`topic "${IN}" partition 0, topic "${IN}" partition 1`, "0 restarts"} {
		if r.code != 1 || !strings.Contains(r.stderr, want) {
			t.Errorf("exit %d, want 1 with %q:\n%s", r.code, want, r.stderr)
		}
	}
}

// TestKafkaSourceConfigErrors: conflicting or malformed source options are
// configuration errors (exit 2) at the line of the key (a missing key: at
// the options).
func TestKafkaSourceConfigErrors(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own

	head := "source:\n  type: kafka\n  options:\n    brokers: 127.0.0.1:1\n" // the options start at line 4
	tail := "sink:\n  type: print\n"
	for _, c := range []struct{ opts, want string }{
		{"    topics: [a]\n    topic-pattern: a.*\n", ":6: source.options.topic-pattern: set either topics or topic-pattern, not both"},
		{"    scan.startup.mode: group-offsets\n", ":4: source.options.topics: missing: set topics (a list) or topic-pattern"},
		{"    topics: [a]\n    scan.startup.mode: timestamp\n", ":6: source.options.scan.startup.mode: timestamp needs scan.startup.timestamp-millis"},
		{"    topics: [a]\n    scan.startup.mode: specific-offsets\n    scan.startup.specific-offsets: \"partition:0,offset:x\"\n",
			":7: source.options.scan.startup.specific-offsets: entry 1: the offset is not a number from 0"},
		{"    topics: [a]\n    scan.startup.mode: group-offsets\n", ":6: source.options.scan.startup.mode: group-offsets needs properties.group.id"},
		{"    topics: [a]\n    start: latest\n    scan.startup.mode: latest-offset\n", ":6: source.options.start: start is the deprecated alias of scan.startup.mode"},
		{"    topics: [a]\n    scan.bounded.timestamp-millis: 5\n", ":6: source.options.scan.bounded.timestamp-millis: is used only with scan.bounded.mode: timestamp"},
		{"    topic-pattern: \"a(\"\n", ":5: source.options.topic-pattern: not a regular expression"},
		{"    topics: [a]\n    properties.isolation.level: serializable\n", ":6: source.options.properties.isolation.level:"},
	} {
		file := writeConfigPipeline(t, t.TempDir(), "p.yaml", head+c.opts+tail)
		r := run(t, nil, "validate", file)
		if r.code != 2 || !strings.Contains(r.stderr, file+c.want) {
			t.Errorf("options\n%sexit %d, want 2 with %q:\n%s", c.opts, r.code, file+c.want, r.stderr)
		}
	}
}

// TestKafkaTopicPattern: topic-pattern reads every topic whose whole name
// matches (two topics) and not one whose name only contains a match;
// read_uncommitted and a discovery interval of 0 are accepted alongside.
func TestKafkaTopicPattern(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	brokers := kafkaBrokers(t)
	stem := fmt.Sprintf("pat-%d", time.Now().UnixNano())
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for _, name := range []string{stem + "-a", stem + "-b", "pre-" + stem + "-a"} {
		if resp, err := kadm.NewClient(cl).CreateTopic(ctx, 2, 1, nil, name); err != nil || resp.Err != nil {
			t.Fatalf("create %s: %v %v", name, err, resp.Err)
		}
	}
	cl.Close()
	produceIDs(t, brokers, stem+"-a", 0, 100, nil)
	produceIDs(t, brokers, stem+"-b", 100, 200, nil)
	produceIDs(t, brokers, "pre-"+stem+"-a", 200, 300, nil)
	out := t.TempDir()
	file := writePipeline(t, t.TempDir(), `parallelism: 2
source:
  type: kafka
  options:
    brokers: "${BROKERS}"
    topic-pattern: "${STEM}-[ab]"
    scan.bounded.mode: latest-offset
    properties.isolation.level: read_uncommitted
    scan.topic-partition-discovery.interval: 0s
sink:
  type: file
  options:
    path: ${OUT}
`)
	r := run(t, []string{"BROKERS=" + brokers, "OUT=" + out, "STEM=" + stem}, "run", "--progress", "off", file)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	checkOnce(t, readOutput(t, out, "id"), idRange(0, 200))
}

// TestKafkaSourceOptionErrorsHideEnvValues: an invalid topic-pattern or
// specific-offsets value from ${VAR} is reported at its line without any
// part of the value.
func TestKafkaSourceOptionErrorsHideEnvValues(t *testing.T) {
	head := "source:\n  type: kafka\n  options:\n    brokers: 127.0.0.1:1\n"
	tail := "sink:\n  type: print\n"
	for _, c := range []struct{ opts, value, want string }{
		{"    topic-pattern: ${V}\n", "s3cr3t(", ":5: source.options.topic-pattern: not a regular expression: missing closing )"},
		{"    topics: [a]\n    scan.startup.mode: specific-offsets\n    scan.startup.specific-offsets: ${V}\n", "partition:0,offset:s3cr3t",
			":7: source.options.scan.startup.specific-offsets: entry 1: the offset is not a number from 0"},
		{"    topics: [a]\n    scan.startup.mode: specific-offsets\n    scan.startup.specific-offsets: ${V}\n", "s3cr3t:0,offset:1",
			":7: source.options.scan.startup.specific-offsets: entry 1: item 1 has an unknown key"},
		{"    topics: [a]\n    scan.startup.mode: specific-offsets\n    scan.startup.specific-offsets: ${V}\n", "topic:s3cr3t,partition:0,offset:1",
			":7: source.options.scan.startup.specific-offsets: names a topic that is not among topics"},
	} {
		file := writeConfigPipeline(t, t.TempDir(), "p.yaml", head+c.opts+tail)
		r := run(t, []string{"V=" + c.value}, "validate", file)
		if r.code != 2 || !strings.Contains(r.stderr, file+c.want) || strings.Contains(r.stderr, "s3cr3t") {
			t.Errorf("V=%s:\nexit %d, want 2 with %q and without the value:\n%s", c.value, r.code, file+c.want, r.stderr)
		}
	}
}
