package file

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectortest/fakes"
	"github.com/sluice-io/sluice/faultinject"
)

// TestPartNames: part file and compaction names hold the job id; the
// parser reads them and the names from before job ids, and a job id that
// cannot be part of a file name is refused.
func TestPartNames(t *testing.T) {
	n := partNames{prefix: "part", suffix: ".txt", job: "a1-b2"}
	if got, want := n.final(3, 17), "part-a1-b2-3-17.txt"; got != want {
		t.Errorf("final %q, want %q", got, want)
	}
	if got, want := n.compacted(9, 2), "part-a1-b2-compacted-9-2.txt"; got != want {
		t.Errorf("compacted %q, want %q", got, want)
	}
	for _, c := range []struct {
		name string
		job  string
		sub  int
		cnt  int64
		ok   bool
	}{
		{".part-a1-b2-3-17.txt.inprogress", "a1-b2", 3, 17, true},
		{".part-" + testJob + "-0-0.txt.inprogress", testJob, 0, 0, true},
		{".part-3-17.txt.inprogress", "", 3, 17, true}, // before job ids
		{".part--3-17.txt.inprogress", "", 0, 0, false},
		{".part-x-+3-17.txt.inprogress", "", 0, 0, false},
		{".part-17.txt.inprogress", "", 0, 0, false},
		{".part-a1-b2-compacted-9-2.txt.compacting", "", 0, 0, false},
		{"part-a1-b2-3-17.txt", "", 0, 0, false},
		{".other-a1-b2-3-17.txt.inprogress", "", 0, 0, false},
	} {
		job, sub, cnt, ok := parsePartName(c.name, "part", ".txt")
		if ok != c.ok || (ok && (job != c.job || sub != c.sub || cnt != c.cnt)) {
			t.Errorf("parsePartName(%q) = %q %d %d %v, want %q %d %d %v", c.name, job, sub, cnt, ok, c.job, c.sub, c.cnt, c.ok)
		}
	}
	s := newTestSink(t, t.TempDir())
	for _, id := range []string{"a/b", "a\\b", ""} {
		if _, err := s.newWriter(&fakes.InitContext{ID: id}, nil); err == nil && id != "" {
			t.Errorf("job id %q: writer created, want an error", id)
		}
	}
}

// TestTwoJobsOneDirectory runs two jobs at once that write under one base
// directory, each with failures before and after its first checkpoint.
// Part file names without the job id let one job's recovery remove the
// other's in-progress and pending files as its own strays; with the id
// in every name, each job's output is its input exactly once and nothing
// stays hidden.
func TestTwoJobsOneDirectory(t *testing.T) {
	out := t.TempDir()
	type job struct {
		name string
		in   string
		want []string
		plan *faultinject.Plan
	}
	jobs := []*job{{name: "f"}, {name: "g"}}
	for i, j := range jobs {
		j.in = t.TempDir()
		j.want = writeInputNamed(t, j.in, j.name, 30, 2000)
		j.plan = faultinject.NewPlan(
			faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: i, Records: 300},
			faultinject.Fault{Kind: faultinject.WriterAfterRecords, Subtask: 1 - i, Records: 6000},
			faultinject.Fault{Kind: faultinject.DuringCommit, Subtask: i, Checkpoint: 3},
		)
	}
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() {
			_, errs[i] = runCopy(t, j.in, out, jobOpts{parallelism: 2, plan: j.plan, restarts: 6})
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("jobs: %v", err)
	}
	all := map[string][]string{}
	for f, ls := range readOutput(t, out) {
		all[f] = ls
	}
	var want []string
	for _, j := range jobs {
		t.Logf("job %s: fired %v", j.name, j.plan.Fired())
		want = append(want, j.want...)
	}
	checkExactlyOnce(t, want, all, true)
	if h := hiddenFiles(t, out); len(h) > 0 {
		t.Errorf("in-progress files left behind: %v", h)
	}
}

// TestCrashBeforeFirstCheckpoint: a job fails for good before its first
// checkpoint (as a process killed with -9 would), leaving hidden
// in-progress part files; started again with the same job id (the CLI
// keeps it in the checkpoint directory) it removes them, and its output is
// the input exactly once. Another job's in-progress files in the same
// directory are left alone.
func TestCrashBeforeFirstCheckpoint(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	want := writeInput(t, in, 40, 2000)
	const id, other = "00000000000000aa", "00000000000000bb"
	others := []string{".part-" + other + "-0-0.inprogress", ".part-" + other + "-1-3.inprogress", ".part-" + other + "-7-0.inprogress"}
	for _, name := range others {
		if err := os.WriteFile(filepath.Join(out, name), []byte(name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	plan := faultinject.NewPlan(faultinject.Fault{Kind: faultinject.WriterAfterRecords, Subtask: 0, Records: 500})
	_, err := runCopy(t, in, out, jobOpts{parallelism: 2, plan: plan, interval: time.Hour, jobID: id})
	if !errors.Is(err, faultinject.ErrInjected) {
		t.Fatalf("first run: %v, want the injected failure", err)
	}
	var mine []string
	for _, h := range hiddenFiles(t, out) {
		if !slices.Contains(others, filepath.Base(h)) {
			mine = append(mine, filepath.Base(h))
		}
	}
	if len(mine) == 0 || len(finishedFiles(t, out)) != 0 {
		t.Fatalf("after the crash: in-progress files %v, finished %v; want in-progress files only", mine, finishedFiles(t, out))
	}
	res, err := runCopy(t, in, out, jobOpts{parallelism: 2, jobID: id})
	if err != nil {
		t.Fatalf("second run: %v", err)
	}
	if res.JobID != id {
		t.Fatalf("second run has job id %q, want %q", res.JobID, id)
	}
	checkExactlyOnce(t, want, readOutput(t, out), true)
	var left []string
	for _, h := range hiddenFiles(t, out) {
		left = append(left, filepath.Base(h))
	}
	slices.Sort(left)
	if !slices.Equal(left, others) {
		t.Fatalf("hidden files after the second run %v, want only the other job's %v (the crashed run left %v)", left, others, mine)
	}
	for _, name := range others {
		if got := readFile(t, filepath.Join(out, name)); got != name+"\n" {
			t.Errorf("%s holds %q, changed", name, got)
		}
	}
}

// TestCompactionRecoveryLeavesOtherJobs crashes job A's compaction after
// each step of its redo log, then starts job B's global committer on the
// same directory: B must neither finish nor remove A's unfinished
// compaction (its manifest, its half-written merged file). A's own
// restarted global committer then finishes it, and A's lines are visible
// exactly once.
func TestCompactionRecoveryLeavesOtherJobs(t *testing.T) {
	for _, step := range crashSteps {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			s := newCompactingSink(t, dir, CompactStrategy{SizeThreshold: 1 << 20}, byFirstLetter)
			var cs []committable
			var want []string
			for sub := range 2 {
				ls := lines(fmt.Sprintf("a%d-", sub), 50)
				c, _ := writeCheckpoint(t, s, sub, 2, 4, nil, ls...)
				cs = append(cs, c...)
				want = append(want, ls...)
			}
			commitAll(t, s, cs)
			crash := errors.New("crash")
			s.cfg.compactHook = func(st string) error {
				if st == step {
					return crash
				}
				return nil
			}
			g, err := s.newCompactor(testJob)
			if err != nil {
				t.Fatal(err)
			}
			if err := g.CommitGlobal(t.Context(), 4, cs); !errors.Is(err, crash) {
				t.Fatalf("global commit: %v, want the injected crash", err)
			}
			g.Close()
			s.cfg.compactHook = nil
			before := dirState(t, dir)
			other, err := s.newCompactor("00000000000000bb")
			if err != nil {
				t.Fatal(err)
			}
			if err := other.CommitGlobal(t.Context(), 7, nil); err != nil {
				t.Fatal(err)
			}
			other.Close()
			if after := dirState(t, dir); !maps.Equal(before, after) {
				t.Fatalf("another job's global committer changed job A's files:\nbefore %v\nafter  %v", before, after)
			}
			g, err = s.newCompactor(testJob)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			if err := g.CommitGlobal(t.Context(), 4, cs); err != nil {
				t.Fatal(err)
			}
			if got, want := visibleLines(t, dir), sorted(want); !slices.Equal(got, want) {
				t.Fatalf("after recovery %d lines visible, want %d (%v)", len(got), len(want), finishedFiles(t, dir))
			}
			if h := hiddenFiles(t, dir); len(h) != 0 {
				t.Fatalf("hidden files left: %v", h)
			}
		})
	}
}

// dirState maps every file under dir (relative) to its size.
func dirState(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[rel] = fi.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCompactionFinishesOldNamedCompaction: a checkpoint of a version
// before job ids holds compaction candidates with the old names, and that
// version's global committer crashed in the middle of compacting them
// (an old-named manifest is left). The new global committer leaves
// old-named compactions alone when it starts (they might be another
// job's), but once it is handed old-named candidates — they are this
// job's — it finishes them: every line visible once, nothing hidden.
func TestCompactionFinishesOldNamedCompaction(t *testing.T) {
	dir := t.TempDir()
	s := newCompactingSink(t, dir, CompactStrategy{SizeThreshold: 1 << 20})
	var cs []committable
	var want []string
	m := compactManifest{Checkpoint: 4, Target: "part-compacted-4-0", Temp: ".part-compacted-4-0.compacting"}
	for sub := range 2 {
		ls := lines(fmt.Sprintf("a%d-", sub), 10)
		final := fmt.Sprintf("part-%d-0", sub)
		data := strings.Join(ls, "\n") + "\n"
		if err := os.WriteFile(filepath.Join(dir, inProgress(final)), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, committable{Temp: inProgress(final), Final: final, Size: int64(len(data)), Compact: true, Closed: 4})
		m.Sources = append(m.Sources, manifestEntry{Temp: inProgress(final), Final: final})
		want = append(want, ls...)
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".part-compacted-4-0"+manifestSuffix), b, 0o644); err != nil {
		t.Fatal(err)
	}
	before := dirState(t, dir)
	g, err := s.newCompactor(testJob)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if after := dirState(t, dir); !maps.Equal(before, after) {
		t.Fatalf("starting the global committer changed old-named files: %v, was %v", after, before)
	}
	commitAll(t, s, cs)
	if err := g.CommitGlobal(t.Context(), 5, cs); err != nil {
		t.Fatal(err)
	}
	if got := finishedFiles(t, dir); !slices.Equal(got, []string{"part-compacted-4-0"}) {
		t.Errorf("visible files %v, want the old compaction's target", got)
	}
	if got, want := visibleLines(t, dir), sorted(want); !slices.Equal(got, want) {
		t.Fatalf("%d lines visible, want %d (%v)", len(got), len(want), finishedFiles(t, dir))
	}
	if h := hiddenFiles(t, dir); len(h) != 0 {
		t.Fatalf("hidden files left: %v", h)
	}
}
