package main

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fwCommittedIDs reads the ids of the committed JSON lines under dir with
// encoding/json (not the sink's reader) and the partition directories with
// a _SUCCESS file, the modification time of each, and the latest
// modification time of each partition's part files.
func fwCommittedIDs(t *testing.T, dir string) (ids map[int64]int, success, newestPart map[string]time.Time) {
	t.Helper()
	ids, success, newestPart = map[int64]int{}, map[string]time.Time{}, map[string]time.Time{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == dir {
			return filepath.SkipAll // not created yet
		}
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return err
		}
		rel, _ := filepath.Rel(dir, filepath.Dir(p))
		info, err := d.Info()
		if err != nil {
			return err
		}
		if d.Name() == "_SUCCESS" {
			success[rel] = info.ModTime()
			return nil
		}
		if info.ModTime().After(newestPart[rel]) {
			newestPart[rel] = info.ModTime()
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if line == "" {
				continue
			}
			var rec struct {
				ID   int64  `json:"id"`
				User string `json:"user"`
			}
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("%s: %q: %v", p, line, err)
			}
			if want := "user=" + rec.User; rel != want {
				t.Fatalf("%s: record %d of %s is in %s", p, rec.ID, rec.User, rel)
			}
			ids[rec.ID]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids, success, newestPart
}

// TestFwPartitionCommitKill9Resume drives the binary: datagen records
// under user=… partitions with partition-commit.policy success-file
// (process-time trigger), killed with -9 after some commits and resumed
// with --from. At the end every record is in the output once, every
// partition has a _SUCCESS, and each _SUCCESS is newer than every part file
// of its partition (it was written after the partition's last files became
// visible).
func TestFwPartitionCommitKill9Resume(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	const n = 6000
	dir := t.TempDir()
	out, ckpt := filepath.Join(dir, "out"), filepath.Join(dir, "checkpoints")
	file := writePipeline(t, dir, `name: fw-partition-commit
parallelism: 2
delivery: exactly-once
checkpoint: {interval: 200ms, dir: "${CKPT}"}
restart: {strategy: none}
source: {type: datagen, options: {count: 6000, splits: 2, rate: 1500}}
sink:
  type: file
  options:
    path: "${OUT}"
    partition-by: [user]
    partition-commit.policy: [success-file]
    partition-commit.trigger: process-time
    partition-commit.delay: 100ms
`)
	env := []string{"OUT=" + out, "CKPT=" + ckpt}
	p := start(t, env, "run", "--progress", "off", file)
	guard := time.Now().Add(2 * time.Minute) // a hang guard, not a timing assertion
	for {
		_, success, _ := fwCommittedIDs(t, out)
		if len(success) >= 3 {
			break
		}
		select {
		case <-p.done:
			t.Fatalf("sluice ended before the kill:\n%s", p.stderr())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(guard) {
			t.Fatalf("no partition committed in two minutes:\n%s", p.stderr())
		}
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	ids, _, _ := fwCommittedIDs(t, out)
	if len(ids) == n {
		t.Fatal("the job had finished before the kill")
	}
	p = start(t, env, "run", "--progress", "off", "--from", ckpt, file)
	if code := p.wait(t); code != 0 {
		t.Fatalf("resumed run: exit %d\n%s", code, p.stderr())
	}
	ids, success, newest := fwCommittedIDs(t, out)
	for id := range int64(n) {
		if ids[id] != 1 {
			t.Fatalf("record %d is %d times in the output, want once", id, ids[id])
		}
	}
	if len(ids) != n {
		t.Fatalf("%d distinct ids, want %d", len(ids), n)
	}
	if len(newest) != 10 {
		t.Fatalf("%d partitions, want 10: %v", len(newest), newest)
	}
	for part, last := range newest {
		s, ok := success[part]
		if !ok {
			t.Errorf("partition %s has no _SUCCESS", part)
		} else if s.Before(last) {
			t.Errorf("partition %s: _SUCCESS (%v) is older than a part file (%v)", part, s, last)
		}
	}
}
