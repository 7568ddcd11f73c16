package main

// Binary tests of the file connector: a kill -9 before the first
// checkpoint leaves no stray in-progress files behind the next run, and a
// file source that would read the file sink's output is refused (with
// discovery) or warned about (without).

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// hiddenIn returns the names of the hidden files directly under dir.
func hiddenIn(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") && !e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

func writeNamedPipeline(t *testing.T, dir, name, yaml string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFileKill9BeforeFirstCheckpoint kills `sluice run` with SIGKILL while
// its file sink has in-progress part files and before any checkpoint
// completed, then runs the pipeline again on the same checkpoint
// directory: the second run (which keeps the job id recorded in the
// directory) removes the first run's in-progress files, and the output
// holds every record exactly once.
func TestFileKill9BeforeFirstCheckpoint(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	work := t.TempDir()
	out := filepath.Join(work, "out")
	const count = 20000
	file := writeNamedPipeline(t, work, "p.yaml", fmt.Sprintf(`name: kill-before-checkpoint
parallelism: 2
checkpoint:
  interval: 1h
  dir: %s
restart:
  strategy: none
source:
  type: datagen
  options:
    count: %d
    splits: 2
    rate: ${RATE}
sink:
  type: file
  options:
    path: %s
`, filepath.Join(work, "checkpoints"), count, out))

	p := start(t, []string{"RATE=2000"}, "run", "--progress", "off", file)
	// Wait (bounded) until both subtasks have in-progress files.
	for i := 0; i < 800 && len(hiddenIn(t, out)) < 2; i++ {
		time.Sleep(25 * time.Millisecond)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	strays := hiddenIn(t, out)
	if len(strays) < 2 {
		t.Fatalf("after kill -9: in-progress files %v, want at least 2\n%s", strays, p.stderr())
	}
	if got := readOutput(t, out, "id"); len(got) != 0 {
		t.Fatalf("after kill -9 before the first checkpoint: %d records visible, want none", len(got))
	}

	r := run(t, []string{"RATE=0"}, "run", "--progress", "off", file)
	if r.code != 0 {
		t.Fatalf("second run: exit %d\n%s", r.code, r.stderr)
	}
	if left := hiddenIn(t, out); len(left) != 0 {
		t.Errorf("in-progress files left after the second run: %v (the killed run left %v; the second run removes only files of its own job id)", left, strays)
	}
	got := readOutput(t, out, "id")
	for i := range int64(count) {
		if got[i] != 1 {
			t.Errorf("record %d: %d times, want once", i, got[i])
		}
	}
	if len(got) != count {
		t.Errorf("%d distinct records, want %d", len(got), count)
	}
}

// TestFileSourceOverSinkOutput: a file source with discovery whose paths
// cover the file sink's directory would read the job's own output forever
// (100 lines became 3,800): validate and run refuse it, naming both
// paths, and run starts nothing. Without discovery the source lists its
// paths once, before any output exists: validate and run warn, and the
// run copies the input exactly once.
func TestFileSourceOverSinkOutput(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	work := t.TempDir()
	in := filepath.Join(work, "in")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := range 100 {
		fmt.Fprintf(&b, "{\"n\": %d}\n", i)
	}
	if err := os.WriteFile(filepath.Join(in, "events.jsonl"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(in, "out")
	pipeline := func(name, discovery, srcPath string) string {
		return writeNamedPipeline(t, work, name, fmt.Sprintf(`name: loop
checkpoint:
  interval: 100ms
  dir: %s
source:
  type: file
  options:
    paths: [%q]
    discovery: %s
sink:
  type: file
  options:
    path: %s
`, filepath.Join(work, "checkpoints-"+name), srcPath, discovery, out))
	}
	// The source path as a user may write it: relative, through a
	// symbolic link, as a glob.
	if err := os.Symlink(in, filepath.Join(work, "link")); err != nil {
		t.Fatal(err)
	}
	for i, src := range []string{in, filepath.Join(work, "link"), filepath.Join(work, "i*")} {
		file := pipeline(fmt.Sprintf("loop%d.yaml", i), "100ms", src)
		for _, cmd := range []string{"validate", "run"} {
			r := run(t, nil, cmd, file)
			if r.code != 2 {
				t.Fatalf("%s with %q: exit %d, want 2\n%s%s", cmd, src, r.code, r.stdout, r.stderr)
			}
			for _, want := range []string{fmt.Sprintf("%q", out), fmt.Sprintf("%q", src), "discovery"} {
				if !strings.Contains(r.stderr, want) {
					t.Errorf("%s with %q: stderr does not name %s:\n%s", cmd, src, want, r.stderr)
				}
			}
		}
	}
	// Values from the environment are never shown; the fields name them.
	envFile := writeNamedPipeline(t, work, "env.yaml", fmt.Sprintf(`name: loop
checkpoint:
  interval: 100ms
  dir: %s
source:
  type: file
  options:
    paths: ["${SLUICE_TEST_IN}"]
    discovery: 100ms
sink:
  type: file
  options:
    path: ${SLUICE_TEST_IN}/out
`, filepath.Join(work, "checkpoints-env")))
	r := run(t, []string{"SLUICE_TEST_IN=" + in}, "validate", envFile)
	if r.code != 2 || strings.Contains(r.stderr, in) || !strings.Contains(r.stderr, "sink.options.path (value from the environment not shown)") {
		t.Fatalf("validate with paths from the environment: exit %d, want 2 naming the fields, not the values\n%s", r.code, r.stderr)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a refused pipeline created its output directory (%v)", err)
	}

	file := pipeline("once.yaml", "0s", in)
	r = run(t, nil, "validate", file)
	if r.code != 0 || !strings.Contains(r.stderr, "warning:") || !strings.Contains(r.stderr, fmt.Sprintf("%q", in)) {
		t.Fatalf("validate without discovery: exit %d, want 0 with a warning naming %q\n%s%s", r.code, in, r.stdout, r.stderr)
	}
	r = run(t, nil, "run", "--progress", "off", file)
	if r.code != 0 || !strings.Contains(r.stderr, "later run of this pipeline reads this run's output") {
		t.Fatalf("run without discovery: exit %d, want 0 with the warning logged\n%s", r.code, r.stderr)
	}
	got := readOutput(t, out, "n")
	for i := range int64(100) {
		if got[i] != 1 {
			t.Errorf("line %d: %d times, want once", i, got[i])
		}
	}
	if len(got) != 100 {
		t.Errorf("%d distinct lines, want 100", len(got))
	}
}
