package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// keyByPipeline is a bounded datagen at parallelism 3 through the steps
// of ${STEPS} into exactly-once files; dead letters (if any step sends
// them) go to files of their own.
const keyByPipeline = `name: keyed
parallelism: 3
checkpoint:
  interval: 100ms
  dir: ${OUT}/checkpoints
source:
  type: datagen
  name: gen
  options:
    count: ${COUNT}
    splits: 3
    rate: 4000
transforms:
${STEPS}
sink:
  type: file
  name: files
  options:
    path: ${OUT}/output
${DEAD}`

// partSubtask finds the subtask in a part file's name:
// part-<job id>-<subtask>-<counter>.jsonl.
var partSubtask = regexp.MustCompile(`^part-[0-9a-f]+-(\d+)-\d+\.jsonl$`)

// TestKeyByKill9Resume runs pipelines with a key_by or rebalance step
// through the binary at parallelism 3, kills the run with SIGKILL after
// two checkpoints, resumes it with --from to its end, and reads the
// committed part files: every id of the input is in the output (or, for
// the records whose key is nil, among the dead letters) exactly once; with
// key_by every user's records are in the files of one sink subtask (the
// subtask is in the part file's name), and the records are spread over
// more than one subtask.
func TestKeyByKill9Resume(t *testing.T) {
	const count = 12000
	cases := []struct {
		name  string
		steps string
		dead  string
		keyed bool
		// nilKey reports the ids whose key is nil (dead letters).
		nilKey func(id int64) bool
	}{
		{name: "key_by", keyed: true, steps: `  - filter: amount >= 0
  - key_by: user
  - map: '{"id": id, "user": user, "cents": amount * 100}'`},
		{name: "key_by-dead-letter", keyed: true,
			// amount = id*37 mod 1000: about a tenth of the records have no key.
			steps: `  - key_by: 'amount < 100 ? nil : user'
    on-error: dead-letter
  - map: '{"id": id, "user": user}'`,
			dead:   "dead-letter:\n  type: file\n  options:\n    path: ${OUT}/dead\n",
			nilKey: func(id int64) bool { return id*37%1000 < 100 }},
		{name: "rebalance", steps: `  - rebalance: true
  - map: '{"id": id, "user": user}'`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			yaml := strings.NewReplacer("${STEPS}", tc.steps, "${DEAD}", tc.dead).Replace(keyByPipeline)
			file := filepath.Join(dir, "keyed.yaml")
			if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "out")
			env := []string{"OUT=" + out, fmt.Sprint("COUNT=", count)}

			p := start(t, env, "run", "--progress", "off", file)
			waitCompleted(t, p, filepath.Join(out, "checkpoints"), 2)
			select {
			case <-p.done:
				t.Fatalf("the run ended before the kill (raise count or lower rate)\n%s", p.stderr())
			default:
			}
			if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			p.wait(t)
			before := countCommittedLines(t, filepath.Join(out, "output"))
			if before >= count {
				t.Fatalf("all %d records committed before the kill: the resume is not tested", before)
			}

			r := run(t, env, "run", "--progress", "off", "--from", filepath.Join(out, "checkpoints"), file)
			if r.code != 0 {
				t.Fatalf("resume: exit %d\n%s", r.code, r.stderr)
			}

			seen := make(map[int64]int, count)
			subtaskOf := map[string]string{} // user → sink subtask
			subtasks := map[string]int{}
			eachCommittedRecord(t, filepath.Join(out, "output"), func(f string, rec map[string]any) {
				id, ok := rec["id"].(float64)
				if !ok {
					t.Fatalf("%s: %v has no numeric id", f, rec)
				}
				if tc.nilKey != nil && tc.nilKey(int64(id)) {
					t.Errorf("%s: id %v has a nil key but is in the output", f, id)
				}
				seen[int64(id)]++
				m := partSubtask.FindStringSubmatch(f)
				if m == nil {
					t.Fatalf("part file %q: no subtask in its name", f)
				}
				subtasks[m[1]]++
				user, _ := rec["user"].(string)
				if prev, ok := subtaskOf[user]; tc.keyed && ok && prev != m[1] {
					t.Errorf("key %q went to sink subtasks %s and %s", user, prev, m[1])
				}
				subtaskOf[user] = m[1]
			})
			dead := 0
			eachCommittedRecord(t, filepath.Join(out, "dead"), func(f string, rec map[string]any) {
				in, _ := rec["record"].(map[string]any)
				id, ok := in["id"].(float64)
				if !ok || tc.nilKey == nil || !strings.Contains(fmt.Sprint(rec["error"]), "key is nil") {
					t.Fatalf("%s: dead letter %v: want the input record and a nil-key error", f, rec)
				}
				if !tc.nilKey(int64(id)) {
					t.Errorf("%s: id %v has a key but is a dead letter", f, id)
				}
				seen[int64(id)]++
				dead++
			})
			for id := range int64(count) {
				if seen[id] != 1 {
					t.Fatalf("id %d is there %d times, want once", id, seen[id])
				}
			}
			if len(seen) != count {
				t.Fatalf("%d distinct ids, want %d (ids outside the input)", len(seen), count)
			}
			if len(subtasks) < 2 {
				t.Errorf("records went to sink subtasks %v: want them spread over more than one", subtasks)
			}
			t.Logf("%d of %d records committed before the kill; after the resume: per sink subtask %v, %d dead letters", before, count, subtasks, dead)
		})
	}
}
