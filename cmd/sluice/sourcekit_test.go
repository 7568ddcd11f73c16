package main

// Binary test of the source kit's discovering enumerator (source/enumerate,
// used by the file source): files discovered before a kill -9 are not read
// again after the resume, files that appear while the job is down are read,
// and the output holds every record exactly once.

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// writeBatch atomically writes files name-0 … name-(files-1) into dir, each
// of per records {"id": n} with consecutive ids from first on. It writes a
// hidden file and renames it, so that discovery never sees half a file.
func writeBatch(t *testing.T, dir, name string, files, per int, first int64) {
	t.Helper()
	id := first
	for f := range files {
		var b strings.Builder
		for range per {
			fmt.Fprintf(&b, "{\"id\": %d}\n", id)
			id++
		}
		tmp := filepath.Join(dir, fmt.Sprintf(".%s-%d.tmp", name, f))
		if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, fmt.Sprintf("%s-%d.jsonl", name, f))); err != nil {
			t.Fatal(err)
		}
	}
}

// waitOutput waits (bounded: a hang guard, not a timing assertion) until
// the committed output holds at least want distinct ids, and returns them.
func waitOutput(t *testing.T, p *proc, out string, want int) map[int64]int {
	t.Helper()
	var got map[int64]int
	for i := 0; i < 2400; i++ {
		if got = readOutput(t, out, "id"); len(got) >= want {
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("committed output has %d distinct ids, want %d\n%s", len(got), want, p.stderr())
	return nil
}

// TestDiscoveredFilesKill9Resume runs a continuous file source (discovery
// every 100 ms) into the exactly-once file sink: a first batch of files is
// read and committed, a second batch appears, the process is killed with
// SIGKILL, a third batch appears while it is down, and `sluice run --from`
// resumes. The enumerator's restored state (the files already discovered,
// and those discovered but not yet assigned) must make the resumed job read
// the second batch's unread files and the third batch, and no file twice:
// every id exactly once.
func TestDiscoveredFilesKill9Resume(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	work := t.TempDir()
	in, out := filepath.Join(work, "in"), filepath.Join(work, "out")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	const files, per = 4, 500
	file := writeNamedPipeline(t, work, "p.yaml", fmt.Sprintf(`name: discovered-files
parallelism: 2
checkpoint:
  interval: 100ms
  dir: %s
restart:
  strategy: none
source:
  type: file
  options:
    paths: [%q]
    discovery: 100ms
sink:
  type: file
  options:
    path: %s
`, filepath.Join(work, "checkpoints"), in, out))

	writeBatch(t, in, "a", files, per, 0)
	p := start(t, nil, "run", "--progress", "off", file)
	waitOutput(t, p, out, files*per)
	writeBatch(t, in, "b", files, per, files*per)
	waitOutput(t, p, out, files*per+1) // the second batch is being read
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	before := len(readOutput(t, out, "id"))
	writeBatch(t, in, "c", files, per, 2*files*per)

	q := start(t, nil, "run", "--progress", "off", "--from", filepath.Join(work, "checkpoints"), file)
	const total = 3 * files * per
	waitOutput(t, q, out, total)
	if err := q.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := q.wait(t); code != 0 {
		t.Fatalf("resumed run after SIGTERM: exit %d\n%s", code, q.stderr())
	}
	got := readOutput(t, out, "id")
	for id := range int64(total) {
		if got[id] != 1 {
			t.Errorf("id %d: %d times, want once", id, got[id])
		}
	}
	if len(got) != total {
		t.Errorf("%d distinct ids, want %d", len(got), total)
	}
	t.Logf("killed with %d of %d records committed; resumed to %d", before, total, len(got))
}
