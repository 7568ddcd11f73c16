package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// secretForms are the byte strings a value may show as in a file: raw,
// escaped in a JSON string, escaped in a Go quoted string.
func secretForms(v string) []string {
	j, _ := json.Marshal(v)
	q := strconv.Quote(v)
	return []string{v, string(j[1 : len(j)-1]), q[1 : len(q)-1]}
}

// grepSecrets returns "file: VAR" for every file under each dir that holds
// a value of vals in any of its forms.
func grepSecrets(t *testing.T, vals map[string]string, dirs ...string) (found []string, files int) {
	t.Helper()
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			files++
			for name, v := range vals {
				for _, f := range secretForms(v) {
					if bytes.Contains(b, []byte(f)) {
						found = append(found, fmt.Sprintf("%s: %s", path, name))
						break
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return found, files
}

var completedRE = regexp.MustCompile(`^chk-(\d+)$`)

// completedCheckpoints counts the complete checkpoint directories in dir.
func completedCheckpoints(dir string) int {
	entries, _ := os.ReadDir(dir)
	n := 0
	for _, e := range entries {
		if completedRE.MatchString(e.Name()) {
			if _, err := os.Stat(filepath.Join(dir, e.Name(), "_metadata")); err == nil {
				n++
			}
		}
	}
	return n
}

// TestSecretsNeverInCheckpoints runs a file → file pipeline (with a
// dead-letter file sink) whose job name, source paths, sink paths and part
// prefix come from ${VAR}s. It kills `sluice run` with SIGKILL after some
// checkpoints, greps every file under the checkpoint directory for every
// value (raw, JSON- and Go-escaped), resumes with --from, stops with a
// savepoint, greps the checkpoints and the savepoint again, and reads both
// outputs independently: main output + dead letters = input, each once.
// Resuming from the savepoint with a variable it refers to unset fails
// with exit code 2, naming the variable.
func TestSecretsNeverInCheckpoints(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	work := t.TempDir()
	ckpt, spDir := filepath.Join(work, "checkpoints"), filepath.Join(work, "savepoints")
	vals := map[string]string{
		"SECRET_JOB":    "job-Zq7xUu",
		"SECRET_IN":     filepath.Join(work, "in-Kp3vLl"),
		"SECRET_OUT":    filepath.Join(work, "out-Wm8rTt"),
		"SECRET_DEAD":   filepath.Join(work, "dead-Hy2tQq"),
		"SECRET_PREFIX": "part-Jn5sXx",
	}
	var env []string
	for k, v := range vals {
		env = append(env, k+"="+v)
	}
	in, out, dead := vals["SECRET_IN"], vals["SECRET_OUT"], vals["SECRET_DEAD"]
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	const body = `checkpoint:
  interval: 50ms
  dir: %s
restart:
  strategy: none
parallelism: 2
source:
  type: file
  name: in
  options:
    paths: ["${SECRET_IN}"]
    discovery: 50ms
    on-malformed: dead-letter
transforms:
  - filter: amount > 100
    name: big
    on-error: dead-letter
sink:
  type: file
  name: out
  options: {path: "${SECRET_OUT}", prefix: %s}
dead-letter:
  type: file
  options: {path: "${SECRET_DEAD}", prefix: dead}
`
	file := writeNamedPipeline(t, work, "p.yaml", "name: ${SECRET_JOB}\n"+fmt.Sprintf(body, ckpt, `"${SECRET_PREFIX}"`))
	next := writeDeadLetterInput(t, in, 0, 20, 5000)

	p := start(t, env, "run", "--progress", "off", file)
	for i := 0; i < 2400 && (completedCheckpoints(ckpt) < 2 || len(readOutput(t, out, "id")) == 0); i++ {
		time.Sleep(25 * time.Millisecond)
	}
	killAndGrepSecrets(t, p, vals, ckpt)

	// `sluice checkpoints` names the job by its variable.
	if r := run(t, nil, "checkpoints", ckpt); r.code != 0 || !strings.Contains(r.stdout, "${SECRET_JOB}") {
		t.Fatalf("sluice checkpoints: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	total := writeDeadLetterInput(t, in, next, 5, 5000)
	p = start(t, env, "run", "--progress", "off", "--savepoint-dir", spDir, "--from", ckpt, file)
	wantMain, wantDead := 0, 0
	for id := range total {
		switch {
		case id%100 == 13 || id%100 == 57:
			wantDead++
		case id%1000 > 100:
			wantMain++
		}
	}
	// Wait (bounded: two minutes) by counting committed lines: decoding
	// every record on each poll, as the check below does once, made the
	// wait CPU-bound (95 s of this test at load 35).
	for i := 0; i < 4800; i++ {
		if countCommittedLines(t, out) >= wantMain && countCommittedLines(t, dead) >= wantDead {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("resumed run: exit %d\n%s", code, p.stderr())
	}
	m, d := readDeadLetterOutputs(t, out, dead)
	checkDeadLetterOutputs(t, m, d, total)
	checkTransformDeadLetterPositions(t, in, dead)
	sps, _ := filepath.Glob(filepath.Join(spDir, "savepoint-*"))
	if len(sps) != 1 {
		t.Fatalf("want one stop savepoint under %s, got %v\n%s", spDir, sps, p.stderr())
	}
	found, files := grepSecrets(t, vals, ckpt, spDir)
	if len(found) > 0 {
		t.Fatalf("values from the environment in the checkpoints or the savepoint (%d files):\n%s", files, strings.Join(found, "\n"))
	}
	t.Logf("after the stop: %d files under the checkpoint and savepoint directories, none holds a value", files)

	// The savepoint refers to SECRET_JOB (its job name); a pipeline that
	// no longer uses it still needs it to resume. (Its source is bounded,
	// so a run that wrongly starts ends.)
	p2 := strings.Replace(fmt.Sprintf(body, filepath.Join(work, "ck2"), `"${SECRET_PREFIX}"`), "discovery: 50ms", "discovery: 0s", 1)
	file2 := writeNamedPipeline(t, work, "p2.yaml", "name: other-job\n"+p2)
	var env2 []string
	for _, e := range env {
		if !strings.HasPrefix(e, "SECRET_JOB=") {
			env2 = append(env2, e)
		}
	}
	r := run(t, env2, "run", "--progress", "off", "--from", sps[0], file2)
	if r.code != 2 || !strings.Contains(r.stderr, "SECRET_JOB") || !strings.Contains(r.stderr, "not set") {
		t.Fatalf("resume without SECRET_JOB: exit %d, want 2 naming the variable\n%s", r.code, r.stderr)
	}
	if m2, d2 := readDeadLetterOutputs(t, out, dead); len(m2) != len(m) || len(d2) != len(d) {
		t.Fatal("the refused resume wrote output")
	}
}

var inputIDRE = regexp.MustCompile(`^\{"id": (\d+)`)

// checkTransformDeadLetterPositions checks that every dead letter of the
// transform "big" under deadDir names the input file under inDir and the
// byte offset of the line of the record it failed on, and returns how
// many it checked.
func checkTransformDeadLetterPositions(t *testing.T, inDir, deadDir string) int {
	t.Helper()
	type pos struct {
		file string
		off  int64
	}
	where := map[int64]pos{}
	entries, err := os.ReadDir(inDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		path := filepath.Join(inDir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var off int64
		for l := range strings.Lines(string(b)) {
			if m := inputIDRE.FindStringSubmatch(l); m != nil {
				id, _ := strconv.ParseInt(m[1], 10, 64)
				where[id] = pos{path, off}
			}
			off += int64(len(l))
		}
	}
	n := 0
	eachCommittedRecord(t, deadDir, func(name string, rec map[string]any) {
		if rec["operator"] != "big" {
			return
		}
		r, _ := rec["record"].(map[string]any)
		id, _ := r["id"].(float64)
		want, ok := where[int64(id)]
		off, _ := rec["offset"].(float64)
		split, _ := rec["split"].(string)
		if !ok || rec["file"] != want.file || int64(off) != want.off || !strings.Contains(split, filepath.Base(want.file)) {
			t.Fatalf("%s: dead letter %v: want file %s, offset %d and a split of that file", name, rec, want.file, want.off)
		}
		n++
	})
	return n
}

// TestTransformDeadLetterPosition: in a file → file pipeline, the dead
// letter of a record the filter fails on (it lacks the field) names the
// input file, its split and the byte offset of the record's line, as the
// source's own dead letters do; main output + dead letters = input.
func TestTransformDeadLetterPosition(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	work := t.TempDir()
	in, out, dead := filepath.Join(work, "in"), filepath.Join(work, "out"), filepath.Join(work, "dead")
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	total := writeDeadLetterInput(t, in, 0, 4, 2500)
	file := writeNamedPipeline(t, work, "p.yaml", fmt.Sprintf(`name: positions
parallelism: 2
source:
  type: file
  name: in
  options:
    paths: [%s]
    on-malformed: dead-letter
transforms:
  - rename: {amount: amt}
    name: ren
  - filter: amt > 100
    name: big
    on-error: dead-letter
  - rename: {amt: amount}
    name: back
sink:
  type: file
  name: out
  options: {path: %s}
dead-letter:
  type: file
  options: {path: %s, prefix: dead}
`, in, out, dead))
	r := run(t, nil, "run", "--progress", "off", file)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	m, d := readDeadLetterOutputs(t, out, dead)
	checkDeadLetterOutputs(t, m, d, total)
	if n := checkTransformDeadLetterPositions(t, in, dead); n != total/100 {
		t.Fatalf("%d transform dead letters, want %d", n, total/100)
	}
}

// TestSecretsNeverInCheckpointsKafka runs a Kafka → Kafka pipeline whose
// job name, source topic, sink topic, transactional-id prefix and brokers
// come from ${VAR}s (exactly-once: the sink's writer state and
// committables hold transactional ids). It kills `sluice run` with SIGKILL
// after some checkpoints, greps every checkpoint file for every value,
// resumes with --from and checks the output topic holds every record
// once. (Real broker: SLUICE_KAFKA_BROKERS.)
func TestSecretsNeverInCheckpointsKafka(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	brokers := kafkaBrokers(t)
	const count = 20000
	inTopic, outTopic := kafkaTopic(t, brokers, nil), kafkaTopic(t, brokers, nil)
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.DefaultProduceTopic(inTopic))
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]*kgo.Record, count)
	for i := range count {
		recs[i] = &kgo.Record{Value: fmt.Appendf(nil, `{"id": %d}`, i), Partition: int32(i % 2)}
	}
	err = cl.ProduceSync(t.Context(), recs...).FirstErr()
	cl.Close()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	ckpt := filepath.Join(work, "checkpoints")
	vals := map[string]string{
		"SECRET_JOB":     "kjob-Vb6nPp",
		"SECRET_IN":      inTopic,
		"SECRET_OUT":     outTopic,
		"SECRET_PREFIX":  fmt.Sprintf("txp-Rr4k-%d", time.Now().UnixNano()),
		"SECRET_BROKERS": brokers,
	}
	var env []string
	for k, v := range vals {
		env = append(env, k+"="+v)
	}
	file := writeNamedPipeline(t, work, "k.yaml", fmt.Sprintf(`name: ${SECRET_JOB}
parallelism: 2
delivery: exactly-once
checkpoint:
  interval: 100ms
  dir: %s
restart:
  strategy: none
source:
  type: kafka
  options:
    brokers: ["${SECRET_BROKERS}"]
    topics: ["${SECRET_IN}"]
    start: earliest
    bounded: true
sink:
  type: kafka
  options:
    brokers: ["${SECRET_BROKERS}"]
    topic: "${SECRET_OUT}"
    transactional-id-prefix: "${SECRET_PREFIX}"
`, ckpt))
	p := start(t, env, "run", "--progress", "off", file)
	for i := 0; i < 2400 && completedCheckpoints(ckpt) < 2; i++ {
		time.Sleep(25 * time.Millisecond)
	}
	killAndGrepSecrets(t, p, vals, ckpt)
	r := run(t, env, "run", "--progress", "off", "--from", ckpt, file)
	if r.code != 0 {
		t.Fatalf("resume: exit %d\n%s", r.code, r.stderr)
	}
	found, files := grepSecrets(t, vals, ckpt)
	if len(found) > 0 {
		t.Fatalf("values from the environment in the checkpoints after the resumed run (%d files):\n%s", files, strings.Join(found, "\n"))
	}
	checkIDsOnce(t, readTopic(t, brokers, outTopic, count), count)
}

// killAndGrepSecrets kills p with SIGKILL once it has checkpointed and
// fails the test if any file under ckpt holds one of vals.
func killAndGrepSecrets(t *testing.T, p *proc, vals map[string]string, ckpt string) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	if completedCheckpoints(ckpt) == 0 {
		t.Fatalf("no checkpoint before the kill\n%s", p.stderr())
	}
	found, files := grepSecrets(t, vals, ckpt)
	if len(found) > 0 {
		t.Fatalf("values from the environment in the checkpoints after kill -9 (%d files):\n%s", files, strings.Join(found, "\n"))
	}
	t.Logf("after kill -9: %d files under the checkpoint directory, none holds a value", files)
}
