package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// writeDeadLetterInput writes files of JSON lines {"id": N, "amount": A}
// for ids first.. (lines per file): every id%100 == 13 is malformed (cut
// short) and every id%100 == 57 lacks the field "amount" (the filter fails
// on it). It returns the next id.
func writeDeadLetterInput(t *testing.T, dir string, from, files, lines int) int {
	t.Helper()
	id := from
	for range files {
		var b strings.Builder
		for range lines {
			switch id % 100 {
			case 13:
				fmt.Fprintf(&b, "{\"id\": %d, \"amount\n", id)
			case 57:
				fmt.Fprintf(&b, "{\"id\": %d}\n", id)
			default:
				fmt.Fprintf(&b, "{\"id\": %d, \"amount\": %d}\n", id, id%1000)
			}
			id++
		}
		// Written under a hidden name and renamed, so discovery never
		// sees half a file.
		tmp := filepath.Join(dir, fmt.Sprintf(".in-%07d.tmp", id))
		if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, fmt.Sprintf("in-%07d.jsonl", id))); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

var deadRawID = regexp.MustCompile(`^\{"id": (\d+), "amount$`)

// readDeadLetterOutputs reads the committed main output (records with an
// "id") and dead letters (the "record" of a failed transform, or the
// "raw" line the source could not decode) into counts per id, and checks
// what each dead letter says.
func readDeadLetterOutputs(t *testing.T, mainDir, deadDir string) (main, dead map[int64]int) {
	t.Helper()
	main, dead = map[int64]int{}, map[int64]int{}
	eachCommittedRecord(t, mainDir, func(name string, rec map[string]any) {
		id, ok := rec["id"].(float64)
		if !ok {
			t.Fatalf("%s: main record %v has no id", name, rec)
		}
		main[int64(id)]++
	})
	eachCommittedRecord(t, deadDir, func(name string, rec map[string]any) {
		errMsg, _ := rec["error"].(string)
		switch rec["operator"] {
		case "in": // the source: a malformed line
			m := deadRawID.FindStringSubmatch(fmt.Sprint(rec["raw"]))
			_, hasOffset := rec["offset"].(float64)
			if m == nil || !strings.Contains(errMsg, "malformed") || !hasOffset || rec["split"] == nil || rec["file"] == nil {
				t.Fatalf("%s: bad source dead letter %v", name, rec)
			}
			id, _ := strconv.ParseInt(m[1], 10, 64)
			dead[id]++
		case "big": // the filter, on a record without amount
			r, _ := rec["record"].(map[string]any)
			id, ok := r["id"].(float64)
			if !ok || !strings.Contains(errMsg, "<nil>") {
				t.Fatalf("%s: bad transform dead letter %v", name, rec)
			}
			dead[int64(id)]++
		default:
			t.Fatalf("%s: dead letter from operator %v: %v", name, rec["operator"], rec)
		}
	})
	return main, dead
}

// checkDeadLetterOutputs checks main output + dead letters = input
// (ids 0..total-1), each once: dead letters exactly the bad records, the
// main output exactly the good ones the filter keeps.
func checkDeadLetterOutputs(t *testing.T, main, dead map[int64]int, total int) {
	t.Helper()
	var missing, twice []int64
	for id := range int64(total) {
		bad := id%100 == 13 || id%100 == 57
		kept := !bad && id%1000 > 100
		m, d := main[id], dead[id]
		switch {
		case bad && (d != 1 || m != 0), !bad && kept && (m != 1 || d != 0), !bad && !kept && (m != 0 || d != 0):
			if m+d > 1 {
				twice = append(twice, id)
			} else {
				missing = append(missing, id)
			}
		}
	}
	for id := range main {
		if id < 0 || id >= int64(total) {
			t.Errorf("unknown id %d in the main output", id)
		}
	}
	if len(missing) > 0 || len(twice) > 0 {
		t.Fatalf("%d ids missing or misplaced (first: %v), %d twice (first: %v)", len(missing), firstID(missing), len(twice), firstID(twice))
	}
}

func firstID(ids []int64) any {
	if len(ids) == 0 {
		return "none"
	}
	return ids[0]
}

// TestDeadLettersKill9Resume runs a file → file pipeline whose file
// source sends malformed lines (1%) and whose filter sends records that
// lack its field (1%) to a dead-letter file sink. It kills `sluice run`
// with SIGKILL once output is committed, adds more input, resumes with
// --from, stops it with SIGTERM once every record is accounted for, and
// reads both outputs independently: main output + dead letters = input,
// each record exactly once.
func TestDeadLettersKill9Resume(t *testing.T) {
	t.Parallel() // mostly waits on its processes; its topics, tables and dirs are its own
	work := t.TempDir()
	in, out, dead, ckpt := filepath.Join(work, "in"), filepath.Join(work, "out"), filepath.Join(work, "dead"), filepath.Join(work, "checkpoints")
	if err := os.Mkdir(in, 0o755); err != nil {
		t.Fatal(err)
	}
	file := writeNamedPipeline(t, work, "p.yaml", fmt.Sprintf(`name: dead-letters
parallelism: 2
checkpoint:
  interval: 50ms
  dir: %s
restart:
  strategy: none
source:
  type: file
  name: in
  options:
    paths: [%s]
    discovery: 50ms
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
  type: file
  options: {path: %s, prefix: dead}
`, ckpt, in, out, dead))
	if r := run(t, nil, "validate", file); r.code != 0 || !strings.Contains(r.stdout, "dead letters → sink file") {
		t.Fatalf("validate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	next := writeDeadLetterInput(t, in, 0, 40, 5000)

	p := start(t, nil, "run", "--progress", "off", file)
	// Wait (bounded) until some output of both sinks is committed.
	for i := 0; i < 2400; i++ {
		if countCommittedLines(t, out) > 0 && countCommittedLines(t, dead) > 0 {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	m, d := readDeadLetterOutputs(t, out, dead)
	if len(m) == 0 || len(d) == 0 {
		t.Fatalf("nothing committed before the kill\n%s", p.stderr())
	}
	t.Logf("killed with %d main records and %d dead letters committed of %d input records", len(m), len(d), next)

	total := writeDeadLetterInput(t, in, next, 10, 5000)
	p = start(t, nil, "run", "--progress", "off", "--from", ckpt, file)
	wantMain, wantDead := 0, 0
	for id := range total {
		switch {
		case id%100 == 13 || id%100 == 57:
			wantDead++
		case id%1000 > 100:
			wantMain++
		}
	}
	// Wait (bounded: 4800 polls) until the output has as many lines as
	// the input should give; the check below decodes and counts each id.
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
	m, d = readDeadLetterOutputs(t, out, dead)
	checkDeadLetterOutputs(t, m, d, total)
	if h := append(hiddenIn(t, out), hiddenIn(t, dead)...); len(h) > 0 {
		t.Errorf("in-progress files left: %v", h)
	}
	t.Logf("%d main records and %d dead letters for %d input records", len(m), len(d), total)
}

// TestErrorPolicyFailFast: under the default policy (fail) a malformed
// line and a filter on a missing field each fail the job at once, although
// its restart strategy allows restarts (they would fail again): exit code
// 1, an error naming the operator, the position where known and an
// excerpt of the record, and no restart.
func TestErrorPolicyFailFast(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	cases := []struct {
		name, input string
		want        []string
	}{
		{"malformed line", "{\"id\": 1, \"amount\": 500}\n{\"id\": 2, \"amount\n", []string{
			"a.jsonl line 2 (offset 25): file: malformed record", `record: "{\"id\": 2, \"amount"`}},
		{"missing field", "{\"id\": 1, \"amount\": 500}\n{\"id\": 2}\n", []string{
			`transform filter "big" (`, `invalid operation: <nil> > int`, "a field the record lacks is nil", `record: {"id":2}`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			work := t.TempDir()
			in := filepath.Join(work, "in")
			if err := os.Mkdir(in, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(in, "a.jsonl"), []byte(c.input), 0o644); err != nil {
				t.Fatal(err)
			}
			file := writeNamedPipeline(t, work, "p.yaml", fmt.Sprintf(`restart: {strategy: fixed-delay, attempts: 3, delay: 100ms}
source:
  type: file
  options: {paths: [%s]}
transforms:
  - filter: amount > 100
    name: big
sink:
  type: file
  options: {path: %s}
`, in, filepath.Join(work, "out")))
			checkFailedFast(t, run(t, nil, "run", "--progress", "off", file), c.want...)
		})
	}
}

// TestDeadLetterExample runs examples/pipelines/file-dead-letters.yaml
// over input with malformed lines and records without the filtered field:
// both outputs together hold every record once, and the summary counts
// the dead letters.
func TestDeadLetterExample(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	in, out := t.TempDir(), t.TempDir()
	total := writeDeadLetterInput(t, in, 0, 3, 1000)
	r := run(t, []string{"IN=" + in, "OUT=" + out}, "run", "--progress", "off", pipelines+"file-dead-letters.yaml")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	// The example names its operators differently from the kill test.
	for _, f := range []string{"events", "large"} {
		if !strings.Contains(readAll(t, filepath.Join(out, "dead-letters")), `"operator":"`+f+`"`) {
			t.Errorf("no dead letter from %s", f)
		}
	}
	main := readOutput(t, filepath.Join(out, "output"), "id")
	deadIDs := map[int64]int{}
	for l := range strings.Lines(readAll(t, filepath.Join(out, "dead-letters"))) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		if r, ok := rec["record"].(map[string]any); ok {
			deadIDs[int64(r["id"].(float64))]++
		} else if m := deadRawID.FindStringSubmatch(fmt.Sprint(rec["raw"])); m != nil {
			id, _ := strconv.ParseInt(m[1], 10, 64)
			deadIDs[id]++
		} else {
			t.Fatalf("dead letter %v", rec)
		}
	}
	checkDeadLetterOutputs(t, main, deadIDs, total)
	if want := fmt.Sprintf("records with errors: 0 skipped, %d dead-lettered", len(deadIDs)); !strings.Contains(r.stderr, want) {
		t.Errorf("the summary does not say %q:\n%s", want, r.stderr)
	}
}

// readAll concatenates the committed files under dir.
func readAll(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
	}
	return b.String()
}

// checkFailedFast checks that a run failed with exit code 1 at once: its
// "failed: " line contains every want and says it did not restart, and the
// job never restarted.
func checkFailedFast(t *testing.T, r result, want ...string) {
	t.Helper()
	if r.code != 1 {
		t.Fatalf("exit %d, want 1\n%s", r.code, r.stderr)
	}
	failed := ""
	for l := range strings.Lines(r.stderr) {
		if strings.HasPrefix(l, "failed: ") {
			failed = l
		}
	}
	for _, w := range append(want, "failed without restarting") {
		if !strings.Contains(failed, w) {
			t.Errorf("the failure line %q does not contain %q\n%s", failed, w, r.stderr)
		}
	}
	if !strings.Contains(r.stderr, " 0 restarts") || strings.Contains(r.stderr, "restarting from the latest") {
		t.Errorf("the job restarted:\n%s", r.stderr)
	}
}
