package file

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectortest/fakes"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/internal/sinkerase"
	"github.com/sluice-io/sluice/internal/sinkrt"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/stream"
)

// byFirstLetter buckets a line by its first byte.
var byFirstLetter = WithBuckets(BucketFunc[string](func(v string, _ BucketContext) (string, error) {
	return v[:1], nil
}))

// writeCheckpoint has subtask sub of par write lines and prepare
// checkpoint id; it returns the committables. The writer counts as
// restored from checkpoint id-1 (with states, possibly none) unless id is
// 1: a writer that is not restored removes the in-progress files of its
// subtask.
func writeCheckpoint(t *testing.T, s *fileSink[string], sub, par int, id int64, states []writerState, lines ...string) ([]committable, []writerState) {
	t.Helper()
	ic := &fakes.InitContext{Subtask: sub, Parallel: par}
	if states != nil || id > 1 {
		ic.AttemptNum, ic.Restored, ic.HasRestored = 1, id-1, true
	}
	w, err := s.newWriter(ic, states)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	writeAll(t, w, lines...)
	cs, err := w.PrepareCommit(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	st, err := w.SnapshotState(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return cs, st
}

// lines returns n lines "<prefix><i>".
func lines(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// visibleLines returns every line of the visible files under dir.
func visibleLines(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, ls := range readOutput(t, dir) {
		out = append(out, ls...)
	}
	slices.Sort(out)
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// checkNoDuplicates fails if a line is visible twice or a visible line is
// not one of want.
func checkNoDuplicates(t *testing.T, dir string, want []string) {
	t.Helper()
	ok := map[string]bool{}
	for _, l := range want {
		ok[l] = true
	}
	seen := map[string]bool{}
	for _, l := range visibleLines(t, dir) {
		if !ok[l] {
			t.Fatalf("unexpected visible line %q", l)
		}
		if seen[l] {
			t.Fatalf("line %q visible twice", l)
		}
		seen[l] = true
	}
}

func newCompactingSink(t *testing.T, dir string, cs CompactStrategy, opts ...SinkOption) *fileSink[string] {
	t.Helper()
	return newTestSink(t, dir, append([]SinkOption{Rolling(OnCheckpointRolling()), Compact(cs)}, opts...)...)
}

func globalCommit(t *testing.T, s *fileSink[string], id int64, cs []committable) {
	t.Helper()
	g, err := s.newCompactor(testJob)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.CommitGlobal(t.Context(), id, cs); err != nil {
		t.Fatal(err)
	}
}

// TestCompactionMergesSmallFiles writes small files from three subtasks
// into two buckets and one large file: the committer leaves the small
// ones hidden, the global committer merges each bucket's into one
// compacted file, the large file is committed as usual and left alone, and
// the visible lines are exactly the written ones, each subtask's in
// order.
func TestCompactionMergesSmallFiles(t *testing.T) {
	dir := t.TempDir()
	s := newCompactingSink(t, dir, CompactStrategy{SizeThreshold: 1000}, byFirstLetter)
	var all []committable
	var want []string
	for sub := range 3 {
		ls := append(lines(fmt.Sprintf("a%d-", sub), 20), lines(fmt.Sprintf("b%d-", sub), 10)...)
		if sub == 2 {
			ls = append(ls, lines("c-large-", 200)...) // > 1000 bytes
		}
		cs, _ := writeCheckpoint(t, s, sub, 3, 1, nil, ls...)
		all = append(all, cs...)
		want = append(want, ls...)
	}
	var large committable
	for _, c := range all {
		if c.Bucket == "c" {
			large = c
		}
		if c.Compact != (c.Bucket != "c") {
			t.Fatalf("committable %+v: want the small files marked as candidates", c)
		}
	}
	for _, r := range commitAll(t, s, all) {
		if r.outcome != "committed" {
			t.Fatalf("commit %+v: %s %v", r.c, r.outcome, r.err)
		}
	}
	if got := finishedFiles(t, dir); !slices.Equal(got, []string{filepath.Join("c", large.Final)}) {
		t.Fatalf("visible after the subtask commits: %v, want only the large file", got)
	}
	globalCommit(t, s, 1, all)
	got := finishedFiles(t, dir)
	wantFiles := []string{"a/part-0000000000000000-compacted-1-0", "b/part-0000000000000000-compacted-1-0", filepath.Join("c", large.Final)}
	if !slices.Equal(got, wantFiles) {
		t.Fatalf("visible files %v, want %v", got, wantFiles)
	}
	if h := hiddenFiles(t, dir); len(h) != 0 {
		t.Fatalf("hidden files left: %v", h)
	}
	if got, want := visibleLines(t, dir), sorted(want); !slices.Equal(got, want) {
		t.Fatalf("visible lines differ from the written ones: %d vs %d", len(got), len(want))
	}
	// Within the compacted file, subtask 0's lines come first, in order.
	a := readOutput(t, dir)["a/part-0000000000000000-compacted-1-0"]
	if want := append(append(lines("a0-", 20), lines("a1-", 20)...), lines("a2-", 20)...); !slices.Equal(a, want) {
		t.Fatalf("a/part-0000000000000000-compacted-1-0 holds %v, want the subtasks' lines in order", a)
	}
	// The committables seen again (a restore): nothing changes.
	for _, r := range commitAll(t, s, all) {
		if r.outcome != "already" {
			t.Fatalf("recommit %+v: %s %v, want already committed", r.c, r.outcome, r.err)
		}
	}
	globalCommit(t, s, 2, all)
	if got := finishedFiles(t, dir); !slices.Equal(got, wantFiles) {
		t.Fatalf("after a repeated global commit: %v", got)
	}
	if got, want := visibleLines(t, dir), sorted(want); !slices.Equal(got, want) {
		t.Fatal("a repeated global commit changed the output")
	}
}

// TestCompactionGroups cuts a bucket's candidates into groups that reach
// the threshold (a small rest joins the last group) and renames a lone
// candidate instead of copying it.
func TestCompactionGroups(t *testing.T) {
	dir := t.TempDir()
	// Each subtask writes 10 lines of 4 bytes: 40 bytes per file.
	s := newCompactingSink(t, dir, CompactStrategy{SizeThreshold: 60}, byFirstLetter)
	var all, want []string
	var cs []committable
	for sub := range 5 {
		ls := lines(fmt.Sprintf("a%d", sub), 10)
		c, _ := writeCheckpoint(t, s, sub, 5, 7, nil, ls...)
		cs = append(cs, c...)
		all = append(all, ls...)
	}
	lone, _ := writeCheckpoint(t, s, 0, 5, 8, nil, "b-alone")
	cs = append(cs, lone...)
	want = append(all, "b-alone")
	commitAll(t, s, cs)
	globalCommit(t, s, 8, cs)
	got := finishedFiles(t, dir)
	wantFiles := []string{"a/part-0000000000000000-compacted-8-0", "a/part-0000000000000000-compacted-8-1", filepath.Join("b", lone[0].Final)}
	if !slices.Equal(got, wantFiles) {
		t.Fatalf("visible files %v, want %v (groups of 2 and 3 files, the lone file renamed)", got, wantFiles)
	}
	out := readOutput(t, dir)
	if n0, n1 := len(out["a/part-0000000000000000-compacted-8-0"]), len(out["a/part-0000000000000000-compacted-8-1"]); n0 != 20 || n1 != 30 {
		t.Fatalf("groups hold %d and %d lines, want 20 and 30", n0, n1)
	}
	if got, want := visibleLines(t, dir), sorted(want); !slices.Equal(got, want) {
		t.Fatalf("visible lines %v, want %v", got, want)
	}
	if h := hiddenFiles(t, dir); len(h) != 0 {
		t.Fatalf("hidden files left: %v", h)
	}
}

// TestCompactionOffByDefault: without Compact the sink has no global
// committer and no committable is a candidate; with it, it has one.
func TestCompactionOffByDefault(t *testing.T) {
	dir := t.TempDir()
	sk, err := NewRowSink(dir, LinesFormat())
	if err != nil {
		t.Fatal(err)
	}
	if g, err := sinkerase.Erase(sk).NewGlobalCommitter(context.Background(), &fakes.InitContext{}); err != nil || g != nil {
		t.Fatalf("global committer %v, %v: want none", g, err)
	}
	s := newTestSink(t, dir, Rolling(OnCheckpointRolling()))
	cs, _ := writeCheckpoint(t, s, 0, 1, 1, nil, "x")
	if len(cs) != 1 || cs[0].Compact || cs[0].Closed != 0 {
		t.Fatalf("committables %+v: want one plain committable", cs)
	}
	sk, err = NewRowSink(dir, LinesFormat(), Compact(CompactStrategy{SizeThreshold: 1}))
	if err != nil {
		t.Fatal(err)
	}
	g, err := sinkerase.Erase(sk).NewGlobalCommitter(context.Background(), &fakes.InitContext{})
	if err != nil || g == nil {
		t.Fatalf("global committer %v, %v: want one", g, err)
	}
	g.Close()
}

func TestCompactionConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		make func() error
		want string
	}{
		{"threshold", func() error {
			_, err := NewRowSink("x", LinesFormat(), Compact(CompactStrategy{}))
			return err
		}, "SizeThreshold"},
		{"checkpoints", func() error {
			_, err := NewRowSink("x", LinesFormat(), Compact(CompactStrategy{SizeThreshold: 1, CheckpointsBeforeCompaction: -1}))
			return err
		}, "CheckpointsBeforeCompaction"},
		{"bulk without compactor", func() error {
			_, err := NewBulkSink[[]string]("x", csvHeaderBulk{}, Compact(CompactStrategy{SizeThreshold: 1}))
			return err
		}, "needs CompactStrategy.Compactor"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.make(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalidConfig naming %s", err, tc.want)
			}
		})
	}
	// GzipBulk concatenates without being told.
	if _, err := NewBulkSink("x", GzipBulk(LinesFormat()), Compact(CompactStrategy{SizeThreshold: 1})); err != nil {
		t.Fatal(err)
	}
}

// crashSteps are the steps of a compaction after which a test crashes it.
var crashSteps = []string{"manifest-written", "manifest", "compacted-written", "renamed", "first-source-removed", "sources-removed"}

// TestCompactionCrashAtEveryStep stops a compaction after each step of
// its redo log, as a crash would (torn writes included), checks that no
// line is visible twice, then recovers — with the same committer's next
// call or with a new committer (a restart) — and hands over the
// committables again, as they were or regrouped under other checkpoint
// ids: every line ends up visible exactly once and nothing is left
// hidden.
func TestCompactionCrashAtEveryStep(t *testing.T) {
	for _, step := range crashSteps {
		for _, recovery := range []string{"next-call", "restart"} {
			for _, redeliver := range []string{"same", "regrouped"} {
				t.Run(step+"/"+recovery+"/"+redeliver, func(t *testing.T) {
					crashAt(t, step, recovery, redeliver)
				})
			}
		}
	}
}

func crashAt(t *testing.T, step, recovery, redeliver string) {
	dir := t.TempDir()
	s := newCompactingSink(t, dir, CompactStrategy{SizeThreshold: 1 << 20}, byFirstLetter)
	var cs []committable
	var want []string
	for sub := range 3 {
		ls := append(lines(fmt.Sprintf("a%d-", sub), 50), lines(fmt.Sprintf("b%d-", sub), 5)...)
		c, _ := writeCheckpoint(t, s, sub, 3, 4, nil, ls...)
		cs = append(cs, c...)
		want = append(want, ls...)
	}
	commitAll(t, s, cs)
	crash := errors.New("crash")
	fired := 0
	s.cfg.compactHook = func(st string) error {
		if st != step || fired > 0 {
			return nil
		}
		fired++
		// A crash may tear what was being written.
		switch st {
		case "manifest-written":
			tearFiles(t, dir, manifestSuffix+".tmp")
		case "compacted-written":
			tearFiles(t, dir, compactingSuffix)
		}
		return crash
	}
	g, err := s.newCompactor(testJob)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.CommitGlobal(t.Context(), 4, cs); !errors.Is(err, crash) {
		g.Close()
		t.Fatalf("global commit: %v, want the injected crash", err)
	}
	checkNoDuplicates(t, dir, want)
	if recovery == "restart" {
		g.Close()
		if g, err = s.newCompactor(testJob); err != nil {
			t.Fatal(err)
		}
		checkNoDuplicates(t, dir, want)
	}
	defer g.Close()
	// The runtime commits the restored committables again before the
	// global committer sees them.
	for _, r := range commitAll(t, s, cs) {
		if r.outcome != "committed" && r.outcome != "already" {
			t.Fatalf("recommit %+v: %s %v", r.c, r.outcome, r.err)
		}
	}
	switch redeliver {
	case "same":
		if err := g.CommitGlobal(t.Context(), 4, cs); err != nil {
			t.Fatal(err)
		}
	case "regrouped":
		rev := slices.Clone(cs)
		slices.Reverse(rev)
		for i, part := range [][]committable{rev[:2], rev[1:]} {
			if err := g.CommitGlobal(t.Context(), int64(5+i), part); err != nil {
				t.Fatal(err)
			}
			checkNoDuplicates(t, dir, want)
		}
	}
	if got, want := visibleLines(t, dir), sorted(want); !slices.Equal(got, want) {
		t.Fatalf("after recovery %d lines visible, want %d (%v)", len(got), len(want), finishedFiles(t, dir))
	}
	if h := hiddenFiles(t, dir); len(h) != 0 {
		t.Fatalf("hidden files left: %v", h)
	}
}

// tearFiles truncates the files under dir whose names end in suffix to
// half their length.
func tearFiles(t *testing.T, dir, suffix string) {
	t.Helper()
	for _, p := range hiddenFiles(t, dir) {
		if strings.HasSuffix(p, suffix) {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, fi.Size()/2); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestCompactionManifestInconsistent: a manifest whose sources are partly
// gone while its target does not exist cannot be finished; starting the
// committer fails naming it rather than guessing.
func TestCompactionManifestInconsistent(t *testing.T) {
	dir := t.TempDir()
	s := newCompactingSink(t, dir, CompactStrategy{SizeThreshold: 1 << 20})
	cs, _ := writeCheckpoint(t, s, 0, 2, 1, nil, "x")
	cs2, _ := writeCheckpoint(t, s, 1, 2, 1, nil, "y")
	cs = append(cs, cs2...)
	s.cfg.compactHook = func(st string) error {
		if st == "manifest" {
			return errors.New("crash")
		}
		return nil
	}
	g, err := s.newCompactor(testJob)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.CommitGlobal(t.Context(), 1, cs); err == nil {
		t.Fatal("no crash")
	}
	g.Close()
	if err := os.Remove(filepath.Join(dir, cs[0].Temp)); err != nil {
		t.Fatal(err)
	}
	s.cfg.compactHook = nil
	_, err = s.newCompactor(testJob)
	if err == nil || !strings.Contains(err.Error(), ".part-0000000000000000-compacted-1-0"+manifestSuffix) || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("got %v, want an error naming the manifest", err)
	}
}

// TestCompactionHoldsCheckpoints: with CheckpointsBeforeCompaction 3,
// writers hold candidates back in their state and release them at the
// first checkpoint whose id is a multiple of 3 — also after a restore
// from that state — or when a bucket's held files reach the threshold, or
// at the end of input.
func TestCompactionHoldsCheckpoints(t *testing.T) {
	dir := t.TempDir()
	s := newCompactingSink(t, dir, CompactStrategy{SizeThreshold: 100, CheckpointsBeforeCompaction: 3}, byFirstLetter)
	w, err := s.newWriter(&fakes.InitContext{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	cur := w
	prepare := func(id int64, ls ...string) ([]committable, []writerState) {
		t.Helper()
		writeAll(t, cur, ls...)
		cs, err := cur.PrepareCommit(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		st, _ := cur.SnapshotState(context.Background(), id)
		return cs, st
	}
	if cs, st := prepare(1, "a1"); len(cs) != 0 || len(st[0].Held) != 1 {
		t.Fatalf("checkpoint 1: committables %+v, held %+v: want the file held", cs, st[0].Held)
	}
	cs, st := prepare(2, "a2", strings.Repeat("b", 200))
	if len(cs) != 1 || cs[0].Bucket != "b" || cs[0].Compact || len(st[0].Held) != 2 {
		t.Fatalf("checkpoint 2: committables %+v, held %+v: want the large file only", cs, st[0].Held)
	}
	// A crash, and a restore from checkpoint 2 holds the same files.
	w.Close()
	w2, err := s.newWriter(&fakes.InitContext{AttemptNum: 1, Restored: 2, HasRestored: true}, st)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	cur = w2
	if h := hiddenFiles(t, dir); len(h) != 3 {
		t.Fatalf("after the restore hidden files %v, want the 3 pending ones", h)
	}
	cs3, err := w2.PrepareCommit(context.Background(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs3) != 2 || !cs3[0].Compact || cs3[0].Closed != 1 || cs3[1].Closed != 2 {
		t.Fatalf("checkpoint 3: committables %+v, want both held files", cs3)
	}
	if st, _ := w2.SnapshotState(context.Background(), 3); len(st[0].Held) != 0 {
		t.Fatalf("held after release: %+v", st[0].Held)
	}
	// A bucket whose held files reach the threshold is released early.
	if cs, _ := prepare(4, strings.Repeat("c", 60)); len(cs) != 0 {
		t.Fatalf("checkpoint 4: %+v", cs)
	}
	if cs, _ := prepare(5, strings.Repeat("c", 60), "d1"); len(cs) != 2 || cs[0].Bucket != "c" || cs[1].Bucket != "c" {
		t.Fatalf("checkpoint 5: %+v, want the two c files", cs)
	}
	// The end of input releases everything.
	writeAll(t, w2, "e1")
	if err := w2.Flush(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	cs, _ = w2.PrepareCommit(context.Background(), 7)
	var buckets []string
	for _, c := range cs {
		buckets = append(buckets, c.Bucket)
	}
	if slices.Sort(buckets); !slices.Equal(buckets, []string{"d", "e"}) {
		t.Fatalf("end of input: %+v, want every held file", cs)
	}
}

// TestCompactionKeepsSplitOrderAcrossRestores scales down from 4 to 2
// subtasks. Before the restore, split x was read by old subtask 2 (its
// records x0…x4 in that subtask's open file) and split y by old subtask 0;
// after it, new subtask 0 reads x on (x5…x9). A compacting sink finishes
// the restored open files instead of appending to them, and orders
// candidates by the checkpoint at which they were closed (files finished
// at a restore from r right after those closed at r), so the compacted
// file holds x0…x4 before x5…x9.
func TestCompactionKeepsSplitOrderAcrossRestores(t *testing.T) {
	dir := t.TempDir()
	s := newCompactingSink(t, dir, CompactStrategy{SizeThreshold: 1 << 20}, Rolling(DefaultRollingPolicy{PartSize: 1 << 20}))
	old := make([]*writer[string], 4)
	var states []writerState
	for sub := range old {
		w, err := s.newWriter(&fakes.InitContext{Subtask: sub, Parallel: 4}, nil)
		if err != nil {
			t.Fatal(err)
		}
		old[sub] = w
		if _, err := w.PrepareCommit(context.Background(), 1); err != nil { // nothing written yet
			t.Fatal(err)
		}
	}
	writeAll(t, old[0], lines("y", 5)...)
	if _, err := old[0].PrepareCommit(context.Background(), 2); err != nil {
		t.Fatal(err)
	}
	writeAll(t, old[2], lines("x", 5)...)
	for sub, w := range old {
		if sub != 0 {
			if _, err := w.PrepareCommit(context.Background(), 2); err != nil {
				t.Fatal(err)
			}
		}
		st, _ := w.SnapshotState(context.Background(), 2)
		states = append(states, st...)
		w.Close() // crash
	}
	restore := func(sub int, sts ...writerState) *writer[string] {
		w, err := s.newWriter(&fakes.InitContext{Subtask: sub, Parallel: 2, AttemptNum: 1, Restored: 2, HasRestored: true}, sts)
		if err != nil {
			t.Fatal(err)
		}
		return w
	}
	w0, w1 := restore(0, states[0], states[1]), restore(1, states[2], states[3])
	defer w0.Close()
	defer w1.Close()
	writeAll(t, w0, "x5", "x6", "x7", "x8", "x9")
	var cs []committable
	for _, w := range []*writer[string]{w0, w1} {
		if err := w.Flush(context.Background(), true); err != nil {
			t.Fatal(err)
		}
		c, err := w.PrepareCommit(context.Background(), 3)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c...)
	}
	// A restored in-progress file is continued in a copy with the
	// writer's attempt tag; the original comes back as a Discard
	// committable (deleted at the commit), which is not a file of the
	// output.
	files := 0
	for _, c := range cs {
		if !c.Discard {
			files++
		}
	}
	if files != 3 {
		t.Fatalf("committables %+v: want the two restored files and the new one", cs)
	}
	commitAll(t, s, cs)
	globalCommit(t, s, 3, cs)
	got := readOutput(t, dir)
	want := append(append(lines("y", 5), lines("x", 5)...), "x5", "x6", "x7", "x8", "x9")
	if len(got) != 1 || !slices.Equal(got["part-0000000000000000-compacted-3-0"], want) {
		t.Fatalf("output %v, want part-compacted-3-0 holding %v", got, want)
	}
}

// TestCompactionKeepsSplitOrderRegionalFailover: subtask 1 opened its
// file (records t…) before subtask 0 opened its own (records s0…s4), both
// stay open across checkpoint 2; then only subtask 0's region fails and
// restores from 2, and split s moves to subtask 1, which appends s5…s9 to
// its old open file. The compacted file must hold s0…s4 before s5…s9: the
// file subtask 0 finished at the restore (closed "at 2") sorts before the
// one subtask 1 closes at 3, although it was opened later.
func TestCompactionKeepsSplitOrderRegionalFailover(t *testing.T) {
	dir := t.TempDir()
	s := newCompactingSink(t, dir, CompactStrategy{SizeThreshold: 1 << 20}, Rolling(DefaultRollingPolicy{PartSize: 1 << 20}))
	a, err := s.newWriter(&fakes.InitContext{Subtask: 0, Parallel: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.newWriter(&fakes.InitContext{Subtask: 1, Parallel: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	writeAll(t, b, lines("t", 3)...)
	for _, w := range []*writer[string]{a, b} {
		if _, err := w.PrepareCommit(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
	}
	writeAll(t, a, lines("s", 5)...)
	var stA []writerState
	for _, w := range []*writer[string]{a, b} {
		if cs, err := w.PrepareCommit(context.Background(), 2); err != nil || len(cs) != 0 {
			t.Fatalf("checkpoint 2: %+v %v, want both files still open", cs, err)
		}
	}
	stA, _ = a.SnapshotState(context.Background(), 2)
	writeAll(t, a, "s5", "s6") // lost with subtask 0's region
	a.Close()
	a2, err := s.newWriter(&fakes.InitContext{Subtask: 0, Parallel: 2, AttemptNum: 1, Restored: 2, HasRestored: true}, stA)
	if err != nil {
		t.Fatal(err)
	}
	defer a2.Close()
	writeAll(t, b, "s5", "s6", "s7", "s8", "s9")
	var cs []committable
	for _, w := range []*writer[string]{a2, b} {
		if err := w.Flush(context.Background(), true); err != nil {
			t.Fatal(err)
		}
		c, err := w.PrepareCommit(context.Background(), 3)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c...)
	}
	commitAll(t, s, cs)
	globalCommit(t, s, 3, cs)
	got := readOutput(t, dir)
	var s5 []string
	for _, l := range got["part-0000000000000000-compacted-3-0"] {
		if strings.HasPrefix(l, "s") {
			s5 = append(s5, l)
		}
	}
	if want := append(lines("s", 5), "s5", "s6", "s7", "s8", "s9"); len(got) != 1 || !slices.Equal(s5, want) {
		t.Fatalf("output %v: want part-compacted-3-0 with split s in order %v", got, want)
	}
}

// TestCompactionTurnedOff restores a writer holding candidates and a
// committer with candidates into a sink without compaction: they are
// committed as ordinary part files.
func TestCompactionTurnedOff(t *testing.T) {
	dir := t.TempDir()
	s := newCompactingSink(t, dir, CompactStrategy{SizeThreshold: 100, CheckpointsBeforeCompaction: 5})
	cs, st := writeCheckpoint(t, s, 0, 1, 1, nil, "a")
	if len(cs) != 0 || len(st[0].Held) != 1 {
		t.Fatalf("%+v %+v", cs, st)
	}
	plain := newTestSink(t, dir, Rolling(OnCheckpointRolling()))
	cs, _ = writeCheckpoint(t, plain, 0, 1, 2, st, "b")
	if len(cs) != 2 || cs[0].Compact || cs[1].Compact {
		t.Fatalf("committables %+v, want two plain ones", cs)
	}
	commitAll(t, plain, cs)
	if got := visibleLines(t, dir); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("visible %v", got)
	}
}

// csvHeaderBulk writes CSV with a header line: files cannot be
// concatenated.
type csvHeaderBulk struct{}

func (csvHeaderBulk) NewWriter(w io.Writer) (BulkWriter[[]string], error) {
	bw := bufio.NewWriter(w)
	if _, err := bw.WriteString("key,value\n"); err != nil {
		return nil, err
	}
	return &csvHeaderWriter{bw: bw}, nil
}

type csvHeaderWriter struct {
	bw  *bufio.Writer
	buf []byte
}

func (c *csvHeaderWriter) Write(v []string) error {
	var err error
	c.buf, err = CSVFormat().AppendRecord(c.buf[:0], v)
	if err == nil {
		_, err = c.bw.Write(c.buf)
	}
	return err
}

func (c *csvHeaderWriter) Finish() error { return c.bw.Flush() }

// TestCompactionBulkFormats compacts gzip part files by concatenating
// their members (the default) and by recompressing them record by record,
// and CSV files with a header record by record: read back with the
// source, the records are the written ones, and every compacted CSV file
// has one header.
func TestCompactionBulkFormats(t *testing.T) {
	t.Run("gzip/concat", func(t *testing.T) {
		testBulkCompaction(t, GzipBulk(LinesFormat()), nil)
	})
	t.Run("gzip/record-wise", func(t *testing.T) {
		testBulkCompaction(t, GzipBulk(LinesFormat()), RecordWiseCompactor(TextLines(), GzipBulk(LinesFormat())))
	})
	t.Run("csv-header/record-wise", func(t *testing.T) {
		dir := t.TempDir()
		s, err := buildSink(dir, nil, csvHeaderBulk{}, []SinkOption{WithBuckets(BasePathBuckets[[]string]()), PartSuffix(".csv"),
			Compact(CompactStrategy{SizeThreshold: 1 << 20, Compactor: RecordWiseCompactor(CSV(CSVHeader()), BulkFormat[[]string](csvHeaderBulk{}))})})
		if err != nil {
			t.Fatal(err)
		}
		var cs []committable
		var want []string
		for sub := range 3 {
			w, err := s.newWriter(&fakes.InitContext{Subtask: sub, Parallel: 3}, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 5 {
				rec := []string{fmt.Sprintf("k%d-%d", sub, i), "v, \"quoted\"\nline"}
				if err := w.Write(context.Background(), rec, sink.Meta{}); err != nil {
					t.Fatal(err)
				}
				want = append(want, strings.Join(rec, "|"))
			}
			c, err := w.PrepareCommit(context.Background(), 1)
			if err != nil {
				t.Fatal(err)
			}
			w.Close()
			cs = append(cs, c...)
		}
		compactAll(t, s.CreateCommitter, s.newCompactor, cs)
		files := finishedFiles(t, dir)
		if len(files) != 1 || files[0] != "part-0000000000000000-compacted-2-0.csv" {
			t.Fatalf("files %v, want one compacted file", files)
		}
		if n := strings.Count(readFile(t, filepath.Join(dir, files[0])), "key,value\n"); n != 1 {
			t.Fatalf("%d headers in the compacted file, want 1", n)
		}
		got := readBack(t, dir, CSV(CSVHeader()), func(r []string) string { return strings.Join(r, "|") })
		if slices.Sort(want); !slices.Equal(got, want) {
			t.Fatalf("read back %q, want %q", got, want)
		}
	})
}

func testBulkCompaction(t *testing.T, format BulkFormat[string], c Compactor) {
	dir := t.TempDir()
	s, err := buildSink(dir, nil, format, []SinkOption{WithBuckets(BasePathBuckets[string]()), PartSuffix(".gz"),
		Compact(CompactStrategy{SizeThreshold: 1 << 20, Compactor: c})})
	if err != nil {
		t.Fatal(err)
	}
	var cs []committable
	var want []string
	for sub := range 3 {
		for id := int64(1); id <= 2; id++ {
			ls := lines(fmt.Sprintf("s%d-c%d-", sub, id), 100)
			c, _ := writeCheckpoint(t, s, sub, 3, id, nil, ls...)
			cs = append(cs, c...)
			want = append(want, ls...)
		}
	}
	compactAll(t, s.CreateCommitter, s.newCompactor, cs)
	files := finishedFiles(t, dir)
	if len(files) != 1 || files[0] != "part-0000000000000000-compacted-2-0.gz" {
		t.Fatalf("files %v, want one compacted file", files)
	}
	got := readBack(t, dir, TextLines(), func(s string) string { return s })
	if slices.Sort(want); !slices.Equal(got, want) {
		t.Fatalf("read back %d lines, want %d", len(got), len(want))
	}
}

// compactAll commits cs with a subtask committer and then the global
// committer, at checkpoint 2, and checks nothing is left hidden.
func compactAll(t *testing.T, newCommitter func(context.Context, sink.InitContext) (sink.Committer[committable], error), newCompactor func(string) (*compactCommitter, error), cs []committable) {
	t.Helper()
	c, err := newCommitter(context.Background(), &fakes.InitContext{})
	if err != nil {
		t.Fatal(err)
	}
	var reqs []sink.CommitRequest[committable]
	for _, cm := range cs {
		reqs = append(reqs, &request{c: cm, id: 1, outcome: "committed"})
	}
	err = c.Commit(t.Context(), reqs)
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	g, err := newCompactor(testJob)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.CommitGlobal(t.Context(), 2, cs); err != nil {
		t.Fatal(err)
	}
}

// TestCopyExactlyOnceWithCompaction is TestCopyExactlyOnceUnderFailures
// with compaction of small files: seeded random failures of every kind,
// regional and full failover, parallelism 3, checkpoints every 20 ms, and
// crashes of the global
// committer between the steps of a compaction (the 2nd and 9th step it
// reaches). Output must equal input as a multiset (in order per input
// file within each output file), compaction must have happened (over all
// runs), and no
// hidden file may be left behind.
//
// It relies on the runtime handing every committed committable to the
// global committer at least once, also across restores.
func TestCopyExactlyOnceWithCompaction(t *testing.T) {
	type tc struct {
		seed    int64
		faults  int
		rolling string
		every   int
	}
	cases := []tc{
		{seed: 11, faults: 6, rolling: "checkpoint"},
		{seed: 12, faults: 6, rolling: "size"},
		{seed: 15, faults: 6, rolling: "mixed"},
		{seed: 13, faults: 8, rolling: "checkpoint", every: 3},
		{seed: 14, faults: 8, rolling: "size", every: 2},
	}
	files, lines := 30, 2000
	if testing.Short() {
		cases, files, lines = cases[:2], 15, 1000
	}
	fired, totalCompacted := 0, 0
	for _, c := range cases {
		for _, failover := range []stream.FailoverMode{stream.FailoverRegion, stream.FailoverFull} {
			t.Run(fmt.Sprintf("seed=%d/%s/every=%d/%v", c.seed, c.rolling, c.every, failover), func(t *testing.T) {
				in, out := t.TempDir(), t.TempDir()
				want := writeInput(t, in, files, lines)
				const par = 3
				total := int64(len(want))
				plan := faultinject.RandomPlan(c.seed, c.faults, faultinject.Kinds(), par, total/par/2, 10)
				var steps, crashes atomic.Int64
				crashHook := sinkOptionFunc(func(cfg *sinkConfig) {
					cfg.compactHook = func(step string) error {
						if n := steps.Add(1); n == 2 || n == 9 {
							crashes.Add(1)
							return fmt.Errorf("injected crash after compaction step %s", step)
						}
						return nil
					}
				})
				opts := []SinkOption{Compact(CompactStrategy{SizeThreshold: 64 << 10, CheckpointsBeforeCompaction: c.every}), crashHook}
				switch c.rolling {
				case "checkpoint":
					opts = append(opts, Rolling(OnCheckpointRolling()))
				case "size": // every file is a candidate
					opts = append(opts, Rolling(DefaultRollingPolicy{PartSize: 24 << 10}))
				case "mixed": // files rolled by size are not, the last ones are
					opts = append(opts, Rolling(DefaultRollingPolicy{PartSize: 80 << 10}))
				}
				res, err := runCopy(t, in, out, jobOpts{parallelism: par, plan: plan, restarts: c.faults + 4, sinkOpts: opts, failover: failover})
				if err != nil {
					t.Fatalf("job: %v (fired %v)", err, plan.Fired())
				}
				got := readOutput(t, out)
				compacted := 0
				for f := range got {
					if strings.Contains(filepath.Base(f), "-compacted-") {
						compacted++
					}
				}
				if h := hiddenFiles(t, out); len(h) > 0 {
					t.Errorf("hidden files left behind (%d): %v", len(h), h)
				}
				checkExactlyOnce(t, want, got, true)
				// Whether a given run compacts depends on how its
				// checkpoints fall between the failures (a lone candidate
				// is renamed, not compacted); over all runs it must.
				totalCompacted += compacted
				fired += len(plan.Fired())
				t.Logf("fired %v and %d compaction crashes, %d restarts, %d checkpoints, %d output files (%d compacted)",
					plan.Fired(), crashes.Load(), res.Restarts, res.Checkpoints.Completed, len(got), compacted)
			})
		}
	}
	t.Logf("%d injected failures fired, %d compacted files", fired, totalCompacted)
	if totalCompacted < len(cases) {
		t.Errorf("only %d compacted files over %d runs; compaction did not happen", totalCompacted, 2*len(cases))
	}
	if !testing.Short() && fired < 10 {
		t.Errorf("only %d injected failures fired, want at least 10", fired)
	}
}

// TestCompactionGlobalCommitterBehind fails the global committer's first
// call with candidates, but only once a checkpoint whose barrier every
// writer took after that call started has completed (or, at the end of
// the input, once the last checkpoint completed): the job restores from a
// checkpoint taken after the subtasks had committed (and dropped) the
// committables the global committer never handled. Every line must still
// end up visible exactly once and nothing may stay hidden.
//
// This needs the runtime to keep committables that are committed but not
// yet globally committed in later checkpoints and to hand them to the
// global committer after the restore.
func TestCompactionGlobalCommitterBehind(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	want := writeInput(t, in, 40, 4000)
	gs := &globalCrashSink{seen: make(chan struct{}), ended: map[int]bool{}}
	res, err := runCopy(t, in, out, jobOpts{parallelism: 2, restarts: 3, interval: 5 * time.Millisecond,
		sinkOpts: []SinkOption{Rolling(OnCheckpointRolling()), Compact(CompactStrategy{SizeThreshold: 1 << 30})},
		srcWrap: func(s *Source[string]) source.Source[string, Split, EnumState] {
			return completionSource{s, gs.completed}
		},
		wrap: func(s sink.Sink[string]) sink.Sink[string] {
			gs.Sink = sinkerase.Erase(s)
			return gs
		}})
	if err != nil {
		t.Fatalf("job: %v", err)
	}
	if !gs.crashed.Load() {
		t.Fatal("the global committer never failed")
	}
	target, after, later := gs.report()
	t.Logf("global committer failed at checkpoint %d after checkpoint %d completed (barriers after it started from %d on); %d restarts, %d checkpoints",
		target, later, after+1, res.Restarts, res.Checkpoints.Completed)
	if h := hiddenFiles(t, out); len(h) > 0 {
		t.Errorf("hidden files left behind (%d), never made visible: %v", len(h), h)
	}
	checkExactlyOnce(t, want, readOutput(t, out), true)
}

// globalCrashSink wraps a sink's erased view: its global committer's first
// call with committables, for checkpoint t, notes the highest checkpoint
// any writer has prepared so far, x, and waits until checkpoint x+1 or a
// later one has completed — every writer took that checkpoint's barrier
// after the call started, that is after every subtask had committed t and
// dropped t's committables from its state — or, when every writer has
// reached the end of its input, until the last checkpoint they prepared
// has completed (no later one may come). Then it fails without doing
// anything.
//
// An earlier version waited for a subtask committer's Commit call with a
// checkpoint three later than t, or the final one, counted only from the
// moment the global call started. It hung (until the test's deadline) in
// most runs without the race detector, where the input is read in one or
// two checkpoints: the runtime starts the global commit of t only after
// every subtask committed t, so when t was the final checkpoint its
// commits were already over; and a checkpoint without committables (a
// writer whose files were all rolled earlier) has no Commit call at all.
// Checkpoint completions (seen by the source's enumerator) come for every
// checkpoint, committables or not.
type globalCrashSink struct {
	sinkerase.Sink[string]
	mu       sync.Mutex
	target   int64        // checkpoint of the failing global commit (0: not yet)
	after    int64        // the highest checkpoint prepared when it started
	prepared int64        // the highest checkpoint a writer prepared
	ended    map[int]bool // writers that prepared a checkpoint after their end of input
	writers  int          // the sink's parallelism
	done     int64        // the highest completed checkpoint
	later    int64        // the completed checkpoint that released the failure
	seen     chan struct{}
	fired    bool
	crashed  atomic.Bool
}

// check releases the waiting global committer once its condition holds;
// s.mu is held.
func (s *globalCrashSink) check() {
	if s.fired || s.target == 0 {
		return
	}
	allEnded := s.writers > 0 && len(s.ended) == s.writers
	if s.done > s.after || (allEnded && s.done >= s.prepared) {
		s.fired = true
		s.later = s.done
		close(s.seen)
	}
}

func (s *globalCrashSink) completed(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = max(s.done, id)
	s.check()
}

func (s *globalCrashSink) preparing(sub, parallelism int, id int64, ending bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prepared = max(s.prepared, id)
	s.writers = parallelism
	if ending {
		s.ended[sub] = true
	}
	s.check()
}

func (s *globalCrashSink) start(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.target, s.after = id, s.prepared
	s.check()
}

func (s *globalCrashSink) report() (target, after, later int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.target, s.after, s.later
}

func (s *globalCrashSink) CreateWriter(ctx context.Context, ic sink.InitContext) (sink.Writer[string], error) {
	w, _, err := s.NewWriter(ctx, ic, nil)
	return w, err
}

func (s *globalCrashSink) NewWriter(ctx context.Context, ic sink.InitContext, restored [][]byte) (sink.Writer[string], sinkrt.Writer, error) {
	front, w, err := s.Sink.NewWriter(ctx, ic, restored)
	if err != nil {
		return nil, nil, err
	}
	return front, &endWatcher{Writer: w, s: s, sub: ic.SubtaskIndex(), par: ic.Parallelism()}, nil
}

// endWatcher reports every checkpoint its writer prepares, and whether the
// writer had reached the end of its input by then.
type endWatcher struct {
	sinkrt.Writer
	s        *globalCrashSink
	sub, par int
	ending   bool
}

func (w *endWatcher) Flush(ctx context.Context, endOfInput bool) error {
	w.ending = w.ending || endOfInput
	return w.Writer.Flush(ctx, endOfInput)
}

func (w *endWatcher) PrepareCommitRaw(ctx context.Context, id int64) ([][]byte, error) {
	w.s.preparing(w.sub, w.par, id, w.ending)
	return w.Writer.PrepareCommitRaw(ctx, id)
}

func (s *globalCrashSink) NewGlobalCommitter(ctx context.Context, ic sink.InitContext) (sinkrt.GlobalCommitter, error) {
	g, err := s.Sink.NewGlobalCommitter(ctx, ic)
	if err != nil || g == nil {
		return g, err
	}
	return &behindGlobal{GlobalCommitter: g, s: s}, nil
}

type behindGlobal struct {
	sinkrt.GlobalCommitter
	s *globalCrashSink
}

func (g *behindGlobal) CommitGlobal(ctx context.Context, id int64, committed [][]byte) error {
	if len(committed) == 0 || g.s.crashed.Load() {
		return g.GlobalCommitter.CommitGlobal(ctx, id, committed)
	}
	g.s.start(id)
	select {
	case <-g.s.seen:
	case <-ctx.Done():
		return ctx.Err()
	}
	g.s.crashed.Store(true)
	return fmt.Errorf("injected: global committer failed at checkpoint %d after a later checkpoint completed", id)
}

// completionSource is a file source whose enumerator reports every
// completed checkpoint to done.
type completionSource struct {
	*Source[string]
	done func(id int64)
}

func (s completionSource) CreateEnumerator(ctx source.EnumeratorContext[Split]) (source.Enumerator[Split, EnumState], error) {
	e, err := s.Source.CreateEnumerator(ctx)
	if err != nil {
		return nil, err
	}
	return completionEnum{e, s.done}, nil
}

func (s completionSource) RestoreEnumerator(ctx source.EnumeratorContext[Split], st EnumState) (source.Enumerator[Split, EnumState], error) {
	e, err := s.Source.RestoreEnumerator(ctx, st)
	if err != nil {
		return nil, err
	}
	return completionEnum{e, s.done}, nil
}

type completionEnum struct {
	source.Enumerator[Split, EnumState]
	done func(id int64)
}

func (e completionEnum) NotifyCheckpointComplete(id int64) error {
	e.done(id)
	return nil
}
