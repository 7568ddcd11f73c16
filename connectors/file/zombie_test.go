package file

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/connectortest/fakes"
)

// committedLines returns every line of the finished files under dir, the
// files in name order.
func committedLines(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	for _, rel := range finishedFiles(t, dir) {
		s := strings.TrimSuffix(readFile(t, filepath.Join(dir, rel)), "\n")
		if s != "" {
			out = append(out, strings.Split(s, "\n")...)
		}
	}
	return out
}

// TestStaleWriterCannotAppendToResumedFile is the file sink's side of the
// zombie-write window of cluster mode (docs/cluster.md): a leader's writer
// completes checkpoint 1 with a part file open, writes on, and is paused;
// its successor restores checkpoint 1 and continues the open file; the
// stale writer resumes and writes into the file it still has open — before
// the successor's writes, between them and after. The committed output is
// exactly what checkpoint 1 held followed by the successor's records: no
// byte of the stale writer reaches a committed file, and the restored file
// is removed when the successor's next checkpoint commits.
func TestStaleWriterCannotAppendToResumedFile(t *testing.T) {
	dir := t.TempDir()
	s := newTestSink(t, dir)
	ctx := context.Background()
	stale, err := s.newWriter(&fakes.InitContext{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer stale.Close()
	before := lines("ok-", 10)
	writeAll(t, stale, before...)
	cs1, err := stale.PrepareCommit(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	st1, err := stale.SnapshotState(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs1) != 0 || len(st1) != 1 || len(st1[0].InProgress) != 1 {
		t.Fatalf("checkpoint 1: committables %+v, state %+v; want one open file", cs1, st1)
	}
	restored := filepath.Join(dir, st1[0].InProgress[0].Temp)
	// After checkpoint 1 (which completed): written, never completed.
	writeAll(t, stale, lines("stale-a-", 20)...)
	if err := stale.PrepareCommit2Flush(); err != nil {
		t.Fatal(err)
	}

	// The successor (another process: attempt 0 again, same job id).
	succ, err := s.newWriter(&fakes.InitContext{Restored: 1, HasRestored: true}, st1)
	if err != nil {
		t.Fatal(err)
	}
	defer succ.Close()
	writeAll(t, stale, lines("stale-b-", 20)...)
	if err := stale.PrepareCommit2Flush(); err != nil {
		t.Fatal(err)
	}
	after := lines("succ-", 30)
	writeAll(t, succ, after[:15]...)
	if err := succ.PrepareCommit2Flush(); err != nil {
		t.Fatal(err)
	}
	writeAll(t, stale, lines("stale-c-", 20)...)
	if err := stale.PrepareCommit2Flush(); err != nil {
		t.Fatal(err)
	}
	writeAll(t, succ, after[15:]...)
	cs2, err := succ.PrepareCommit(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	// The stale writer goes on: it rolls its file and prepares it, but its
	// checkpoint never completes (its pointer publish is fenced), so its
	// committables are never committed.
	writeAll(t, stale, lines("stale-d-", 20)...)
	if err := stale.Flush(ctx, true); err != nil {
		t.Fatal(err)
	}
	staleCs, err := stale.PrepareCommit(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(staleCs) != 1 || staleCs[0].Temp != filepath.Base(restored) {
		t.Fatalf("stale committables %+v, want its one file %s", staleCs, filepath.Base(restored))
	}
	for _, r := range commitAll(t, s, cs2) {
		if r.outcome != "committed" {
			t.Fatalf("commit of checkpoint 2: %+v: %s %v", r.c, r.outcome, r.err)
		}
	}
	if err := succ.Flush(ctx, true); err != nil {
		t.Fatal(err)
	}
	cs3, err := succ.PrepareCommit(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range commitAll(t, s, cs3) {
		if r.outcome != "committed" {
			t.Fatalf("commit of checkpoint 3: %+v: %s %v", r.c, r.outcome, r.err)
		}
	}
	want := append(slices.Clone(before), after...)
	if got := committedLines(t, dir); !slices.Equal(got, want) {
		t.Fatalf("committed output:\n%q\nwant\n%q", got, want)
	}
	if h := hiddenFiles(t, dir); len(h) != 0 {
		t.Errorf("hidden files left: %v (the restored file should be removed by the commit of checkpoint 2)", h)
	}
}

// TestResumeSameCheckpointTwice restores one checkpoint twice, the first
// restore failing before its next checkpoint (it wrote into its copy):
// the second restore copies the restored file again, removes the first
// copy as superseded, and the output holds checkpoint 1's records and the
// second restore's, once.
func TestResumeSameCheckpointTwice(t *testing.T) {
	dir := t.TempDir()
	s := newTestSink(t, dir)
	ctx := context.Background()
	w1, err := s.newWriter(&fakes.InitContext{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := lines("ok-", 10)
	writeAll(t, w1, before...)
	if _, err := w1.PrepareCommit(ctx, 1); err != nil {
		t.Fatal(err)
	}
	st1, err := w1.SnapshotState(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, w1, lines("lost-a-", 5)...)
	if err := w1.PrepareCommit2Flush(); err != nil {
		t.Fatal(err)
	}
	w1.Close() // crash
	w2, err := s.newWriter(&fakes.InitContext{AttemptNum: 1, Restored: 1, HasRestored: true}, st1)
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, w2, lines("lost-b-", 5)...)
	if err := w2.PrepareCommit2Flush(); err != nil {
		t.Fatal(err)
	}
	w2.Close() // crash before checkpoint 2 completed
	if h := hiddenFiles(t, dir); len(h) != 2 {
		t.Fatalf("hidden files %v, want the restored file and the failed attempt's copy", h)
	}
	w3, err := s.newWriter(&fakes.InitContext{AttemptNum: 2, Restored: 1, HasRestored: true}, st1)
	if err != nil {
		t.Fatal(err)
	}
	defer w3.Close()
	if h := hiddenFiles(t, dir); len(h) != 2 {
		t.Fatalf("hidden files %v after the second restore, want the restored file and the new copy", h)
	}
	after := lines("ok-after-", 10)
	writeAll(t, w3, after...)
	if err := w3.Flush(ctx, true); err != nil {
		t.Fatal(err)
	}
	cs, err := w3.PrepareCommit(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	commitAll(t, s, cs)
	want := append(slices.Clone(before), after...)
	if got := committedLines(t, dir); !slices.Equal(got, want) {
		t.Fatalf("committed output:\n%q\nwant\n%q", got, want)
	}
	if h := hiddenFiles(t, dir); len(h) != 0 {
		t.Errorf("hidden files left: %v", h)
	}
}

func TestUntagged(t *testing.T) {
	for in, want := range map[string]string{
		".part-j-0-1.json.r0123abcd.inprogress": ".part-j-0-1.json.inprogress",
		".part-j-0-1.json.inprogress":           ".part-j-0-1.json.inprogress",
		".part-j-0-1.r0123abcd.inprogress":      ".part-j-0-1.inprogress",
		".part-j-0-1.r0123ABCD.inprogress":      ".part-j-0-1.r0123ABCD.inprogress",
		".part-j-0-1.r0123abc.inprogress":       ".part-j-0-1.r0123abc.inprogress",
		"part-j-0-1.json":                       "part-j-0-1.json",
	} {
		if got := untagged(in); got != want {
			t.Errorf("untagged(%q) = %q, want %q", in, got, want)
		}
	}
	if f := finalOf(resumedName("part-j-0-1.json", newAttemptTag())); f != "part-j-0-1.json" {
		t.Errorf("finalOf(resumedName) = %q", f)
	}
}
