package main

// Restore paths through the binary: one run per checkpoint directory, the
// job id kept in the directory, operator uids and refusal of unmatched
// state, and refusal of a damaged newest checkpoint.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
)

// restorePipeline writes a datagen-to-file pipeline like
// examples/pipelines/datagen-to-file.yaml with the given operator names and
// uids ("" = no uid line) and checkpoint interval, and returns its path.
func restorePipeline(t *testing.T, srcName, srcUID, sinkName, sinkUID, interval string) string {
	t.Helper()
	uid := func(u string) string {
		if u == "" {
			return ""
		}
		return "\n  uid: " + u
	}
	yaml := fmt.Sprintf(`name: orders-to-files
parallelism: 2
delivery: exactly-once
checkpoint:
  interval: %s
  dir: ${OUT}/checkpoints
restart: {strategy: none}
source:
  type: datagen
  name: %s%s
  options:
    count: ${COUNT}
    splits: 4
    rate: ${RATE}
transforms:
  - name: large
    filter: amount >= 500
  - name: shape
    map: '{"order": id, "amount": amount}'
sink:
  type: file
  name: %s%s
  options:
    path: ${OUT}/output
`, interval, srcName, uid(srcUID), sinkName, uid(sinkUID))
	file := filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

var jobIDRE = regexp.MustCompile(`msg="job starting" .*job_id=([0-9a-f]{16})`)

// waitCompleted waits (bounded) until dir records a completed checkpoint
// with an id of at least n.
func waitCompleted(t *testing.T, p *proc, dir string, n int64) {
	t.Helper()
	for i := 0; ; i++ {
		if id, ok, _ := checkpoint.LatestCompleted(dir); ok && id >= n {
			return
		}
		if i > 2400 { // a hang guard (2 minutes), not a timing assertion
			t.Fatalf("no checkpoint %d in %s within 2 minutes\n%s", n, dir, p.stderr())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// refusedLocked checks that a second sluice on a locked checkpoint dir
// failed at once, naming the directory and the holder's pid.
func refusedLocked(t *testing.T, what string, r result, dir string, pid int) {
	t.Helper()
	if r.code == 0 || !strings.Contains(r.stderr, "is in use") || !strings.Contains(r.stderr, dir) || !strings.Contains(r.stderr, fmt.Sprintf("pid %d", pid)) {
		t.Errorf("%s: exit %d, want a refusal naming %s and pid %d; stderr:\n%s", what, r.code, dir, pid, r.stderr)
	}
}

// TestOneProcessPerCheckpointDir: while one sluice runs on a checkpoint
// directory, a second one refuses at once, in every start order (fresh or
// --from, for each of the two); after kill -9 of the holder the next start
// runs, and the output holds every record once.
func TestOneProcessPerCheckpointDir(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	out := t.TempDir()
	const count = 200000
	slow := []string{"OUT=" + out, fmt.Sprint("COUNT=", count), "RATE=3000"}
	file := restorePipeline(t, "orders", "", "order-files", "", "200ms")
	ckpt := filepath.Join(out, "checkpoints")
	shownCkpt := "${OUT}/checkpoints" // values from the environment are shown as ${VAR}

	holder := start(t, slow, "run", "--http", "127.0.0.1:0", file) // fresh
	holder.waitLine(t, httpRE)
	refusedLocked(t, "fresh while a fresh run holds the dir", run(t, slow, "run", "--progress", "off", file), shownCkpt, holder.cmd.Process.Pid)
	refusedLocked(t, "--from while a fresh run holds the dir", run(t, slow, "run", "--progress", "off", "--from", ckpt, file), shownCkpt, holder.cmd.Process.Pid)
	waitCompleted(t, holder, ckpt, 2)
	if err := holder.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	holder.wait(t)

	holder = start(t, slow, "run", "--http", "127.0.0.1:0", "--from", ckpt, file) // the next start after kill -9 runs
	holder.waitLine(t, httpRE)
	holder.waitLine(t, regexp.MustCompile(`msg="(job starting)"`))
	refusedLocked(t, "fresh while a --from run holds the dir", run(t, slow, "run", "--progress", "off", file), shownCkpt, holder.cmd.Process.Pid)
	refusedLocked(t, "--from while a --from run holds the dir", run(t, slow, "run", "--progress", "off", "--from", ckpt, file), shownCkpt, holder.cmd.Process.Pid)
	if err := holder.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	holder.wait(t)

	fast := []string{"OUT=" + out, fmt.Sprint("COUNT=", count), "RATE=0"}
	if r := run(t, fast, "run", "--progress", "off", "--from", ckpt, file); r.code != 0 {
		t.Fatalf("resume after kill -9: exit %d\n%s", r.code, r.stderr)
	}
	checkLargeOrdersOnce(t, out, count)
}

// checkLargeOrdersOnce is checkOrdersOnce for restorePipeline's output.
func checkLargeOrdersOnce(t *testing.T, out string, count int64) {
	t.Helper()
	checkOrdersOnce(t, out, count)
}

// TestJobIDKeptAfterKillBeforeFirstCheckpoint: a run killed (-9) before
// its first checkpoint leaves only the job id in its checkpoint dir; the
// next run on the dir starts (it is not told to use --from) and keeps the
// id, which its checkpoints carry.
func TestJobIDKeptAfterKillBeforeFirstCheckpoint(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	out := t.TempDir()
	const count = 20000
	file := restorePipeline(t, "orders", "", "order-files", "", "1h")
	ckpt := filepath.Join(out, "checkpoints")
	p := start(t, []string{"OUT=" + out, fmt.Sprint("COUNT=", count), "RATE=1000"}, "run", "--progress", "off", file)
	id1 := p.waitLine(t, jobIDRE)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	p.wait(t)
	if infos, err := checkpoint.ListDir(t.Context(), ckpt); err != nil || len(infos) != 0 {
		t.Fatalf("the killed run left snapshots %v (%v), want none", infos, err)
	}
	r := run(t, []string{"OUT=" + out, fmt.Sprint("COUNT=", count), "RATE=0"}, "run", "--progress", "off", file)
	if r.code != 0 {
		t.Fatalf("second run: exit %d\n%s", r.code, r.stderr)
	}
	m := jobIDRE.FindStringSubmatch(r.stderr)
	if m == nil || m[1] != id1 {
		t.Fatalf("second run's job id: got %v, want the first run's %s\n%s", m, id1, r.stderr)
	}
	snap, _, err := checkpoint.LoadLatest(t.Context(), ckpt)
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.Properties["job.id"]; got != id1 {
		t.Errorf("the second run's checkpoint carries job id %q, want %q", got, id1)
	}
	checkLargeOrdersOnce(t, out, count)
}

var resumeRE = regexp.MustCompile(`resume with: sluice run --from (\S+) `)

// TestUnmatchedStateThroughTheBinary: resuming a savepoint with a renamed
// sink or source is refused (naming the unmatched operator, nothing is
// written); with the old names kept as uids the renamed pipeline resumes
// and the output holds every record once; --allow-non-restored-state runs
// and logs the dropped state.
func TestUnmatchedStateThroughTheBinary(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	out, spDir := t.TempDir(), t.TempDir()
	const count = 30000
	env := []string{"OUT=" + out, fmt.Sprint("COUNT=", count), "RATE=6000", "SLUICE_TEST_TOKEN=t0ken"}
	orig := restorePipeline(t, "orders", "", "order-files", "", "200ms")
	// --savepoint-dir with --http enables POST /savepoints, which needs a token.
	p := start(t, env, "run", "--http", "127.0.0.1:0", "--http-token-env", "SLUICE_TEST_TOKEN", "--savepoint-dir", spDir, orig)
	p.waitLine(t, httpRE)
	waitCompleted(t, p, filepath.Join(out, "checkpoints"), 2)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("stop with savepoint: exit %d\n%s", code, p.stderr())
	}
	m := resumeRE.FindStringSubmatch(p.stderr())
	if m == nil || !strings.HasPrefix(m[1], spDir) {
		t.Fatalf("no savepoint reported:\n%s", p.stderr())
	}
	sp := m[1]
	before := readOutput(t, filepath.Join(out, "output"), "order")

	fast := []string{"OUT=" + out, fmt.Sprint("COUNT=", count), "RATE=0"}
	for _, c := range []struct{ name, file, unmatched string }{
		{"renamed sink", restorePipeline(t, "orders", "", "files-v2", "", "200ms"), `"order-files"`},
		{"renamed source", restorePipeline(t, "orders-v2", "", "order-files", "", "200ms"), `"orders"`},
	} {
		r := run(t, fast, "run", "--progress", "off", "--from", sp, c.file)
		if r.code == 0 || !strings.Contains(r.stderr, "matches no operator") || !strings.Contains(r.stderr, c.unmatched) || !strings.Contains(r.stderr, "--allow-non-restored-state") {
			t.Errorf("%s: exit %d, want a refusal naming %s\n%s", c.name, r.code, c.unmatched, r.stderr)
		}
		if got := readOutput(t, filepath.Join(out, "output"), "order"); len(got) != len(before) {
			t.Errorf("%s: the refused run changed the output (%d → %d orders)", c.name, len(before), len(got))
		}
	}

	// Renamed display names, old names kept as uids: resumes exactly once.
	renamed := restorePipeline(t, "orders-v2", "orders", "files-v2", "order-files", "200ms")
	if r := run(t, fast, "run", "--progress", "off", "--from", sp, renamed); r.code != 0 {
		t.Fatalf("renamed with uids: exit %d\n%s", r.code, r.stderr)
	}
	checkLargeOrdersOnce(t, out, count)

	// Dropping on purpose, into another output.
	out2 := t.TempDir()
	r := run(t, []string{"OUT=" + out2, fmt.Sprint("COUNT=", count), "RATE=0"}, "run", "--progress", "off", "--allow-non-restored-state", "--from", sp,
		restorePipeline(t, "orders", "", "files-v2", "", "200ms"))
	if r.code != 0 || !strings.Contains(r.stderr, "dropping state") || !strings.Contains(r.stderr, "order-files") {
		t.Errorf("--allow-non-restored-state: exit %d, want a run that logs the dropped state of order-files\n%s", r.code, r.stderr)
	}
}

// TestDamagedNewestCheckpointThroughTheBinary: when the newest completed
// checkpoint is damaged (deleted _metadata, torn state file, bad
// _metadata), --from DIR refuses, naming it and an older one to choose;
// sluice checkpoints shows it DAMAGED; --from DIR/chk-N of the older one
// runs with a warning that it may duplicate output.
func TestDamagedNewestCheckpointThroughTheBinary(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	out := t.TempDir()
	const count = 30000
	file := restorePipeline(t, "orders", "", "order-files", "", "200ms")
	ckpt := filepath.Join(out, "checkpoints")
	p := start(t, []string{"OUT=" + out, fmt.Sprint("COUNT=", count), "RATE=6000"}, "run", "--progress", "off", file)
	waitCompleted(t, p, ckpt, 3)
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("stop: exit %d\n%s", code, p.stderr())
	}
	newest, ok, err := checkpoint.LatestCompleted(ckpt)
	if err != nil || !ok {
		t.Fatalf("no latest completed checkpoint recorded: %v", err)
	}
	for _, c := range []struct {
		name   string
		damage func(chk string) error
	}{
		{"deleted _metadata", func(chk string) error { return os.Remove(filepath.Join(chk, "_metadata")) }},
		{"torn state file", func(chk string) error {
			fi, err := os.Stat(filepath.Join(chk, "state"))
			if err != nil {
				return err
			}
			return os.Truncate(filepath.Join(chk, "state"), fi.Size()/2)
		}},
		{"bad _metadata", func(chk string) error {
			return os.WriteFile(filepath.Join(chk, "_metadata"), []byte("{\"formatVersion\": 1,"), 0o644)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A copy of the job's output and checkpoints per case.
			world := filepath.Join(t.TempDir(), "out")
			if b, err := exec.Command("cp", "-a", out, world).CombinedOutput(); err != nil {
				t.Fatalf("cp: %v: %s", err, b)
			}
			dir := filepath.Join(world, "checkpoints")
			damaged := filepath.Join(dir, fmt.Sprintf("chk-%d", newest))
			if err := c.damage(damaged); err != nil {
				t.Fatal(err)
			}
			runEnv := []string{"OUT=" + world, fmt.Sprint("COUNT=", count), "RATE=0"}
			r := run(t, runEnv, "run", "--progress", "off", "--from", dir, file)
			older := regexp.MustCompile(`--from (\S+/chk-(\d+)) `).FindStringSubmatch(r.stderr)
			if r.code == 0 || !strings.Contains(r.stderr, shownPath(damaged, runEnv)) || !strings.Contains(r.stderr, fmt.Sprintf("checkpoint %d, is damaged", newest)) || older == nil {
				t.Fatalf("--from with a damaged newest checkpoint: exit %d, want a refusal naming %s and an older checkpoint\n%s", r.code, damaged, r.stderr)
			}
			cr := run(t, nil, "checkpoints", dir)
			if cr.code != 0 || !strings.Contains(cr.stdout, "DAMAGED") || !strings.Contains(cr.stdout, damaged) {
				t.Errorf("sluice checkpoints does not show %s damaged:\n%s%s", damaged, cr.stdout, cr.stderr)
			}
			if c.name != "deleted _metadata" {
				return
			}
			// The explicit older choice runs, and warns.
			r = run(t, runEnv, "run", "--progress", "off", "--from", expandEnv(older[1], runEnv), file)
			if r.code != 0 || !strings.Contains(r.stderr, "restoring an older snapshot than the newest completed checkpoint") {
				t.Errorf("--from %s: exit %d, want a run with a duplicate warning\n%s", older[1], r.code, r.stderr)
			}
		})
	}
}

// TestFromIntoDirOfAnotherJob: --from a snapshot of job A into a
// checkpoint dir that belongs to job B (B was killed before its first
// checkpoint, so the dir holds only B's id) is refused, naming both ids.
func TestFromIntoDirOfAnotherJob(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	outA, outB := t.TempDir(), t.TempDir()
	file := restorePipeline(t, "orders", "", "order-files", "", "100ms")
	a := start(t, []string{"OUT=" + outA, "COUNT=1000000", "RATE=2000"}, "run", "--progress", "off", file)
	idA := a.waitLine(t, jobIDRE)
	waitCompleted(t, a, filepath.Join(outA, "checkpoints"), 1)
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := a.wait(t); code != 0 {
		t.Fatalf("job A: exit %d\n%s", code, a.stderr())
	}
	b := start(t, []string{"OUT=" + outB, "COUNT=1000000", "RATE=2000"}, "run", "--progress", "off", file)
	idB := b.waitLine(t, jobIDRE)
	if err := b.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	b.wait(t)
	r := run(t, []string{"OUT=" + outB, "COUNT=1000000", "RATE=0"}, "run", "--progress", "off", "--from", filepath.Join(outA, "checkpoints"), file)
	if r.code == 0 || !strings.Contains(r.stderr, "belongs to job id "+idB) || !strings.Contains(r.stderr, idA) {
		t.Fatalf("--from job A into job B's dir: exit %d, want a refusal naming %s and %s\n%s", r.code, idB, idA, r.stderr)
	}
	if got, _ := checkpoint.ReadJobID(filepath.Join(outB, "checkpoints")); got != idB {
		t.Errorf("job B's dir now records %q, want %q", got, idB)
	}
}
