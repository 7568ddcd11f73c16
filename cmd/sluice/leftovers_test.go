package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// scaleDownPipeline is a bounded datagen into exactly-once files, at a
// parallelism the test chooses per run.
const scaleDownPipeline = `name: scale-down
parallelism: ${P}
delivery: exactly-once
checkpoint:
  interval: 100ms
  dir: ${OUT}/checkpoints
source:
  type: datagen
  name: gen
  options:
    splits: 4
    count: ${COUNT}
    rate: 2000
sink:
  type: file
  name: files
  options:
    path: ${OUT}/output
`

// TestFileSinkScaleDownAfterKill9 runs a file sink at parallelism 4, kills
// the process with SIGKILL while every subtask has a part file in
// progress, and resumes it with --from at parallelism 2 to the end: the
// output holds every record once, and no in-progress file is left — also
// none of an old subtask whose writer state went to the other writer of
// the resumed run (issue 13: they stayed behind for good).
func TestFileSinkScaleDownAfterKill9(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	const count = 8000
	dir := t.TempDir()
	file := filepath.Join(dir, "scale-down.yaml")
	if err := os.WriteFile(file, []byte(scaleDownPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	output := filepath.Join(out, "output")
	env := func(p int) []string { return []string{"OUT=" + out, fmt.Sprint("P=", p), fmt.Sprint("COUNT=", count)} }

	proc := start(t, env(4), "run", "--progress", "off", file)
	// Wait (bounded) until a quarter is committed and every subtask of
	// the four has a file in progress, then kill -9.
	ready := func() bool {
		return len(readOutput(t, output, "id")) >= count/4 && len(inProgressSubtasks(t, output)) == 4
	}
	deadline := time.Now().Add(time.Minute) // a hang guard, not a timing assertion
	for n := 0; n < 1200 && time.Now().Before(deadline) && !ready(); n++ {
		select {
		case <-proc.done:
			t.Fatalf("sluice ended before it was killed\n%s", proc.stderr())
		case <-time.After(25 * time.Millisecond):
		}
	}
	if err := proc.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	proc.wait(t)
	if got := len(readOutput(t, output, "id")); got >= count {
		t.Fatalf("all %d records were committed before the kill: nothing to resume", got)
	}
	t.Logf("killed at parallelism 4; in progress: %v", hiddenNames(t, output))

	if r := run(t, env(2), "run", "--progress", "off", "--from", filepath.Join(out, "checkpoints"), file); r.code != 0 {
		t.Fatalf("resume at parallelism 2: exit %d\n%s", r.code, r.stderr)
	}
	ids := readOutput(t, output, "id")
	for id := range int64(count) {
		if n := ids[id]; n != 1 {
			t.Fatalf("record %d committed %d times, want once (%d distinct ids)", id, n, len(ids))
		}
	}
	if len(ids) != count {
		t.Fatalf("%d distinct ids, want %d", len(ids), count)
	}
	if left := hiddenNames(t, output); len(left) > 0 {
		t.Fatalf("in-progress files left behind after the resumed run finished: %v", left)
	}
}

// hiddenNames lists the hidden files directly under dir, sorted.
func hiddenNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out
}

// inProgressSubtasks returns the subtasks with an in-progress part file
// (.<prefix>-<job>-<subtask>-<n>.<suffix>.inprogress) directly under dir.
func inProgressSubtasks(t *testing.T, dir string) map[string]bool {
	t.Helper()
	subs := map[string]bool{}
	for _, name := range hiddenNames(t, dir) {
		if f := strings.Split(strings.TrimSuffix(name, ".inprogress"), "-"); strings.HasSuffix(name, ".inprogress") && len(f) >= 4 {
			subs[f[2]] = true
		}
	}
	return subs
}
