package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

// splitsPipeline is an unbounded datagen with more splits than
// parallelism, into exactly-once files.
const splitsPipeline = `name: datagen-splits
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
    rate: 400
sink:
  type: file
  name: files
  options:
    path: ${OUT}/output
`

// TestDatagenMoreSplitsThanParallelism runs an unbounded datagen with 4
// splits at parallelism 2 through the binary until every split has
// committed records (issue 11: splits 2 and 3 were never assigned), stops
// it with SIGTERM, resumes it at parallelism 1 until every split has
// committed more, and checks that each split's committed ids are its
// sequence from the start (id k belongs to split k%4), each id once.
func TestDatagenMoreSplitsThanParallelism(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	const splits = 4
	dir := t.TempDir()
	file := filepath.Join(dir, "splits.yaml")
	if err := os.WriteFile(file, []byte(splitsPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	prev := make([]int, splits)
	for i, p := range []int{2, 1} {
		env := []string{"OUT=" + out, fmt.Sprint("P=", p)}
		args := []string{"run", "--progress", "off"}
		if i > 0 {
			args = append(args, "--from", filepath.Join(out, "checkpoints"))
		}
		proc := start(t, env, append(args, file)...)
		// Wait (bounded) until every split committed more than before.
		grown := func() bool {
			per := idsPerSplit(t, out, splits)
			for k := range splits {
				if len(per[k]) <= prev[k] {
					return false
				}
			}
			return true
		}
		deadline := time.Now().Add(time.Minute) // a hang guard, not a timing assertion
		for n := 0; n < 600 && time.Now().Before(deadline) && !grown(); n++ {
			select {
			case <-proc.done:
				t.Fatalf("parallelism %d: sluice ended early\n%s", p, proc.stderr())
			case <-time.After(50 * time.Millisecond):
			}
		}
		if err := proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := proc.wait(t); code != 0 {
			t.Fatalf("parallelism %d: exit %d after SIGTERM\n%s", p, code, proc.stderr())
		}
		per := idsPerSplit(t, out, splits)
		for k := range splits {
			if len(per[k]) <= prev[k] {
				t.Errorf("parallelism %d: split %d has %d records, had %d before: it was not read", p, k, len(per[k]), prev[k])
			}
			for j, id := range per[k] {
				if want := int64(k + j*splits); id != want {
					t.Fatalf("parallelism %d: split %d: record %d has id %d, want %d (lost or duplicated)", p, k, j, id, want)
				}
			}
			prev[k] = len(per[k])
		}
	}
}

// idsPerSplit reads the committed output under out/output and groups its
// ids by split, sorted.
func idsPerSplit(t *testing.T, out string, splits int) [][]int64 {
	t.Helper()
	per := make([][]int64, splits)
	for id, n := range readOutput(t, filepath.Join(out, "output"), "id") {
		for range n {
			per[id%int64(splits)] = append(per[id%int64(splits)], id)
		}
	}
	for _, s := range per {
		slices.Sort(s)
	}
	return per
}
