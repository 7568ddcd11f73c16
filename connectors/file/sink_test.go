package file

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectortest/fakes"
	"github.com/sluice-io/sluice/sink"
)

// request is a sink.CommitRequest that records its outcome.
type request struct {
	c       committable
	id      int64
	retries int
	outcome string
	err     error
}

func (r *request) Committable() committable            { return r.c }
func (r *request) CheckpointID() int64                 { return r.id }
func (r *request) Retries() int                        { return r.retries }
func (r *request) RetryLater()                         { r.outcome = "retry" }
func (r *request) UpdateAndRetryLater(c committable)   { r.c, r.outcome = c, "retry" }
func (r *request) SignalAlreadyCommitted()             { r.outcome = "already" }
func (r *request) SignalFailedWithKnownReason(e error) { r.outcome, r.err = "known", e }
func (r *request) SignalFailedWithUnknownReason(e error) {
	r.outcome, r.err = "unknown", e
}

func commitAll(t *testing.T, s *fileSink[string], cs []committable) []*request {
	t.Helper()
	c, err := s.CreateCommitter(context.Background(), &fakes.InitContext{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var reqs []sink.CommitRequest[committable]
	var out []*request
	for _, cm := range cs {
		r := &request{c: cm, id: 1, outcome: "committed"}
		reqs = append(reqs, r)
		out = append(out, r)
	}
	if err := c.Commit(t.Context(), reqs); err != nil {
		t.Fatal(err)
	}
	return out
}

func newTestSink(t *testing.T, dir string, opts ...SinkOption) *fileSink[string] {
	t.Helper()
	s, err := buildSink(dir, LinesFormat(), nil, append([]SinkOption{WithBuckets(BasePathBuckets[string]())}, opts...))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func writeAll(t *testing.T, w sink.Writer[string], vs ...string) {
	t.Helper()
	for _, v := range vs {
		if err := w.Write(context.Background(), v, sink.Meta{}); err != nil {
			t.Fatal(err)
		}
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestSinkLifecycle follows a part file from in progress (hidden) to
// pending (synced, still hidden) to finished (renamed), and commits it
// again.
func TestSinkLifecycle(t *testing.T) {
	dir := t.TempDir()
	s := newTestSink(t, dir, Rolling(OnCheckpointRolling()), PartPrefix("out"), PartSuffix(".txt"))
	w, err := s.newWriter(&fakes.InitContext{Subtask: 2, Parallel: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	writeAll(t, w, "a", "b")
	if got := finishedFiles(t, dir); len(got) != 0 {
		t.Fatalf("visible before commit: %v", got)
	}
	if h := hiddenFiles(t, dir); len(h) != 1 || filepath.Base(h[0]) != ".out-0000000000000000-2-0.txt.inprogress" {
		t.Fatalf("in-progress files %v, want .out-0000000000000000-2-0.txt.inprogress", h)
	}
	cs, err := w.PrepareCommit(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	want := []committable{{Temp: ".out-0000000000000000-2-0.txt.inprogress", Final: "out-0000000000000000-2-0.txt", Size: 4}}
	if !slices.Equal(cs, want) {
		t.Fatalf("committables %+v, want %+v", cs, want)
	}
	if got := finishedFiles(t, dir); len(got) != 0 {
		t.Fatalf("visible before commit: %v", got)
	}
	reqs := commitAll(t, s, cs)
	if reqs[0].outcome != "committed" {
		t.Fatalf("commit: %s %v", reqs[0].outcome, reqs[0].err)
	}
	if got := readFile(t, filepath.Join(dir, "out-0000000000000000-2-0.txt")); got != "a\nb\n" {
		t.Fatalf("finished file holds %q", got)
	}
	if reqs := commitAll(t, s, cs); reqs[0].outcome != "already" {
		t.Fatalf("second commit: %s, want already committed", reqs[0].outcome)
	}
	gone := []committable{{Temp: ".out-0000000000000000-2-9.txt.inprogress", Final: "out-0000000000000000-2-9.txt"}}
	if reqs := commitAll(t, s, gone); reqs[0].outcome != "unknown" || !strings.Contains(reqs[0].err.Error(), "out-0000000000000000-2-9.txt") {
		t.Fatalf("missing file: %s %v, want an unknown failure naming it", reqs[0].outcome, reqs[0].err)
	}
	// The next part file continues the counter.
	writeAll(t, w, "c")
	if h := hiddenFiles(t, dir); len(h) != 1 || filepath.Base(h[0]) != ".out-0000000000000000-2-1.txt.inprogress" {
		t.Fatalf("in-progress files %v, want .out-0000000000000000-2-1.txt.inprogress", h)
	}
}

// TestSinkRecovery crashes a writer after a checkpoint (an open file
// and a rolled file that the checkpoint made pending) and after more
// writes (more data in the open file, a new file), then restores it: the
// open file is truncated to its checkpointed length, the new file is
// removed, the pending file is committed, and counters continue. The open
// file is continued in a copy; the restored one is deleted when the next
// checkpoint commits.
func TestSinkRecovery(t *testing.T) {
	dir := t.TempDir()
	bySize := Rolling(DefaultRollingPolicy{PartSize: 6})
	s := newTestSink(t, dir, bySize, WithBuckets(BucketFunc[string](func(v string, _ BucketContext) (string, error) {
		return v[:1], nil // bucket by first letter
	})))
	w, err := s.newWriter(&fakes.InitContext{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, w, "a1", "a2", "b1") // a rolls at 6 bytes; b stays open
	cs, err := w.PrepareCommit(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := w.SnapshotState(context.Background(), 1)
	if len(cs) != 1 || len(st) != 1 || len(st[0].InProgress) != 1 || st[0].InProgress[0].Size != 3 || st[0].NextCounter != 2 {
		t.Fatalf("committables %+v, state %+v", cs, st)
	}
	writeAll(t, w, "b2", "c1") // after the checkpoint: lost in the crash
	if err := w.PrepareCommit2Flush(); err != nil {
		t.Fatal(err)
	}
	w.Close() // crash
	if h := hiddenFiles(t, dir); len(h) != 3 {
		t.Fatalf("before recovery: hidden files %v, want 3", h)
	}

	w2, err := s.newWriter(&fakes.InitContext{AttemptNum: 1, Restored: 1, HasRestored: true}, st)
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	if h := hiddenFiles(t, dir); len(h) != 3 {
		t.Fatalf("after recovery: hidden files %v, want the pending a file, the restored b file and its copy that the writer continues", h)
	}
	if reqs := commitAll(t, s, cs); reqs[0].outcome != "committed" {
		t.Fatalf("restored committable: %s %v", reqs[0].outcome, reqs[0].err)
	}
	writeAll(t, w2, "b3", "c2")
	if err := w2.Flush(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	cs2, err := w2.PrepareCommit(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	commitAll(t, s, cs2)
	got := map[string]string{}
	for _, f := range finishedFiles(t, dir) {
		got[f] = readFile(t, filepath.Join(dir, f))
	}
	want := map[string]string{"a/part-0000000000000000-0-0": "a1\na2\n", "b/part-0000000000000000-0-1": "b1\nb3\n", "c/part-0000000000000000-0-2": "c2\n"}
	if len(got) != len(want) {
		t.Fatalf("finished %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s holds %q, want %q", k, got[k], v)
		}
	}
	if h := hiddenFiles(t, dir); len(h) != 0 {
		t.Errorf("hidden files left: %v", h)
	}
}

// PrepareCommit2Flush pushes buffered bytes to the files without a
// checkpoint, as a crash after a buffer flush would leave them.
func (w *writer[T]) PrepareCommit2Flush() error {
	for _, b := range w.buckets {
		if b.part != nil {
			if err := b.part.bw.Flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// TestSinkRestartWithoutCheckpoint removes every in-progress file of the
// subtask (and of the subtasks j beyond the parallelism with j %
// parallelism == subtask, the rule of sink/leftover) when
// the job restarts before any checkpoint completed — or starts again with
// the same job id after a crash before its first checkpoint (attempt 0):
// other subtasks' files, finished files, other jobs' files and files
// named before job ids stay.
func TestSinkRestartWithoutCheckpoint(t *testing.T) {
	for _, attempt := range []int{0, 1} {
		t.Run(fmt.Sprintf("attempt%d", attempt), func(t *testing.T) {
			dir := t.TempDir()
			const other = "00000000000000ff"
			names := []string{
				".part-" + testJob + "-0-0.inprogress", ".part-" + testJob + "-0-7.inprogress", // removed
				".part-" + testJob + "-4-0.inprogress",                                     // removed: subtask 4 no longer exists, 4 % 2 == 0
				".part-" + testJob + "-5-0.inprogress",                                     // subtask 1's: 5 % 2 == 1
				".part-" + testJob + "-1-0.inprogress",                                     // subtask 1's
				"part-" + testJob + "-0-3",                                                 // finished
				".part-" + other + "-0-0.inprogress", ".part-" + other + "-5-0.inprogress", // another job's
				".part-0-0.inprogress", ".part-5-0.inprogress", // before job ids: not known to be this job's
				".other",
			}
			for _, name := range names {
				if err := os.WriteFile(filepath.Join(dir, name), []byte("x\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			s := newTestSink(t, dir)
			w, err := s.newWriter(&fakes.InitContext{Subtask: 0, Parallel: 2, AttemptNum: attempt}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			var left []string
			for _, h := range hiddenFiles(t, dir) {
				left = append(left, filepath.Base(h))
			}
			want := []string{".other", ".part-0-0.inprogress", ".part-" + other + "-0-0.inprogress", ".part-" + other + "-5-0.inprogress",
				".part-" + testJob + "-1-0.inprogress", ".part-" + testJob + "-5-0.inprogress", ".part-5-0.inprogress"}
			slices.Sort(left)
			slices.Sort(want)
			if !slices.Equal(left, want) {
				t.Fatalf("hidden files %v, want %v", left, want)
			}
			// part-<job>-0-3 exists: new files skip its counter.
			writeAll(t, w, "x")
			for range 3 {
				if err := w.Flush(context.Background(), true); err != nil {
					t.Fatal(err)
				}
				writeAll(t, w, "y")
			}
			cs, _ := w.PrepareCommit(context.Background(), 1)
			for _, c := range cs {
				if c.Final == "part-"+testJob+"-0-3" {
					t.Fatalf("counter reused an existing name: %+v", cs)
				}
			}
		})
	}
}

// TestBucketsCannotEscape renders bucket paths with "..", absolute paths
// and a symbolic link out of the base directory: every write fails and
// nothing is created outside.
func TestBucketsCannotEscape(t *testing.T) {
	outer := t.TempDir()
	dir := filepath.Join(outer, "base")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outer, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"../x", "a/../../x", "/tmp/abs", filepath.Join(outer, "abs"), "link/x", "link/../../x"} {
		t.Run(b, func(t *testing.T) {
			s := newTestSink(t, dir, WithBuckets(BucketFunc[string](func(string, BucketContext) (string, error) { return b, nil })))
			w, err := s.newWriter(&fakes.InitContext{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			err = w.Write(context.Background(), "v", sink.Meta{})
			if err == nil {
				t.Fatalf("bucket %q: write succeeded", b)
			}
			if !strings.Contains(err.Error(), "bucket") {
				t.Errorf("error %q does not name the bucket", err)
			}
		})
	}
	entries, _ := os.ReadDir(outer)
	if len(entries) != 1 {
		t.Fatalf("created outside the base directory: %v", entries)
	}
	t.Run("template values", func(t *testing.T) {
		// A date-time layout is rendered literally: "../" in a layout
		// fails too.
		s := newTestSink(t, dir, WithBuckets(DateTimeBuckets[string]("../2006", nil, ProcessingTime)))
		w, _ := s.newWriter(&fakes.InitContext{}, nil)
		defer w.Close()
		if err := w.Write(context.Background(), "v", sink.Meta{}); !errors.Is(err, ErrBucketEscapes) {
			t.Fatalf("got %v, want ErrBucketEscapes", err)
		}
	})
}

func TestDateTimeBuckets(t *testing.T) {
	tokyo := time.FixedZone("JST", 9*3600)
	ts := time.Date(2026, 11, 30, 20, 15, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		a    BucketAssigner[string]
		c    BucketContext
		want string
	}{
		{"processing", DateTimeBuckets[string]("2006-01-02--15", nil, ProcessingTime), BucketContext{ProcessingTime: ts}, "2026-11-30--20"},
		{"event-zone", DateTimeBuckets[string]("2006/01/02/15", tokyo, EventTime), BucketContext{Timestamp: ts.UnixMilli(), HasTimestamp: true, ProcessingTime: time.Unix(0, 0)}, "2026/12/01/05"},
		{"base", BasePathBuckets[string](), BucketContext{}, ""},
	} {
		got, err := tc.a.Bucket("v", tc.c)
		if err != nil || got != tc.want {
			t.Errorf("%s: got %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if _, err := DateTimeBuckets[string]("2006", nil, EventTime).Bucket("v", BucketContext{}); err == nil {
		t.Error("event time without a timestamp: no error")
	}
}

func TestDefaultRollingPolicy(t *testing.T) {
	t0 := time.Unix(1000, 0)
	p := DefaultRollingPolicy{PartSize: 100, RolloverInterval: time.Minute, InactivityInterval: 10 * time.Second}
	info := PartFileInfo{Size: 50, Created: t0, LastWrite: t0.Add(30 * time.Second)}
	if p.ShouldRollOnEvent(info) || p.ShouldRollOnCheckpoint(info) {
		t.Error("rolled below the part size")
	}
	if !p.ShouldRollOnEvent(PartFileInfo{Size: 100}) {
		t.Error("did not roll at the part size")
	}
	if p.ShouldRollOnProcessingTime(info, t0.Add(35*time.Second)) {
		t.Error("rolled before any interval")
	}
	if !p.ShouldRollOnProcessingTime(info, t0.Add(40*time.Second)) {
		t.Error("did not roll after the inactivity interval")
	}
	busy := PartFileInfo{Created: t0, LastWrite: t0.Add(59 * time.Second)}
	if !p.ShouldRollOnProcessingTime(busy, t0.Add(time.Minute)) {
		t.Error("did not roll after the rollover interval")
	}
	// Through a writer with a fake clock: inactivity rolls at a checkpoint.
	dir := t.TempDir()
	now := t0
	s := newTestSink(t, dir, Rolling(p), Clock(func() time.Time { return now }))
	w, _ := s.newWriter(&fakes.InitContext{}, nil)
	defer w.Close()
	writeAll(t, w, "a")
	if cs, _ := w.PrepareCommit(context.Background(), 1); len(cs) != 0 {
		t.Fatalf("rolled an active file: %+v", cs)
	}
	now = now.Add(11 * time.Second)
	if cs, _ := w.PrepareCommit(context.Background(), 2); len(cs) != 1 {
		t.Fatalf("inactive file not rolled at the checkpoint: %+v", cs)
	}
}

func TestSinkConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []SinkOption
		want string
	}{
		{"prefix", []SinkOption{PartPrefix(".x")}, "PartPrefix"},
		{"suffix", []SinkOption{PartSuffix("a/b")}, "suffix"},
		{"buffer", []SinkOption{WriteBufferSize(0)}, "WriteBufferSize"},
		{"buckets type", []SinkOption{WithBuckets(BasePathBuckets[int]())}, "BucketAssigner[string]"},
		{"rolling", []SinkOption{Rolling(nil)}, "Rolling"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewRowSink("x", LinesFormat(), tc.opts...)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalidConfig naming %s", err, tc.want)
			}
		})
	}
}

// failingWriter fails every write with err once armed.
type failingWriter struct {
	w     io.Writer
	armed *bool
	err   error
}

func (f failingWriter) Write(p []byte) (int, error) {
	if *f.armed {
		return 0, f.err
	}
	return f.w.Write(p)
}

// TestCheckpointFailsOnWriteError makes the part file's writes fail (a
// full disk) after records were buffered: PrepareCommit fails with an
// error naming the file and the cause.
func TestCheckpointFailsOnWriteError(t *testing.T) {
	dir := t.TempDir()
	armed := false
	s := newTestSink(t, dir)
	s.cfg.wrapFile = func(_ string, w io.Writer) io.Writer { return failingWriter{w, &armed, syscall.ENOSPC} }
	w, _ := s.newWriter(&fakes.InitContext{}, nil)
	defer w.Close()
	writeAll(t, w, "a", "b")
	armed = true
	_, err := w.PrepareCommit(context.Background(), 1)
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), ".part-0000000000000000-0-0.inprogress") {
		t.Fatalf("got %v, want ENOSPC naming the part file", err)
	}
}

func TestCommitterContext(t *testing.T) {
	s := newTestSink(t, t.TempDir())
	c, _ := s.CreateCommitter(context.Background(), &fakes.InitContext{})
	defer c.Close()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	r := &request{c: committable{Temp: ".x", Final: "x"}}
	if err := c.Commit(ctx, []sink.CommitRequest[committable]{r}); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// TestSinkRecoveryAfterRescale restores subtask 0 of 2 from the states of
// old subtasks 0 and 3 (scale down from 4) and of 1: strays of 0, 3 (which
// no longer runs) and 1 (which runs again as writer 1, but whose state
// reached writer 0, the only writer that knows where its checkpointed
// files end) at or above their counters are removed, and the open file of
// old subtask 3 is resumed. Before the sink/leftover rule, old subtask 1's
// stray stayed behind for good (cleanup-aborted/scale-down). It runs with this job's names and
// with states and files named before job ids (a checkpoint of an older
// version): strays under both namings go, since files written after a
// restore from an old state carry the job id.
func TestSinkRecoveryAfterRescale(t *testing.T) {
	for _, job := range []string{testJob, ""} {
		t.Run(fmt.Sprintf("job=%q", job), func(t *testing.T) {
			nm := func(job string, sub int, c int64) string {
				if job == "" {
					return fmt.Sprintf(".part-%d-%d.inprogress", sub, c)
				}
				return inProgress(partNames{prefix: "part", job: job}.final(sub, c))
			}
			dir := t.TempDir()
			files := []string{nm(job, 0, 1), nm(job, 0, 4), nm(job, 3, 2), nm(job, 3, 3), nm(job, 1, 9),
				nm(testJob, 0, 5), nm(testJob, 3, 7), // written after a restore from these states: strays
				nm("00000000000000ff", 0, 4)} // another job's
			for _, name := range files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte("x\ny\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			states := []writerState{
				{JobID: job, Subtask: 0, Parallelism: 4, NextCounter: 2},
				{JobID: job, Subtask: 3, Parallelism: 4, NextCounter: 3, InProgress: []inProgressFile{{Temp: nm(job, 3, 2), Final: nm(job, 3, 2)[1:], Size: 2}}},
				{JobID: job, Subtask: 1, Parallelism: 4, NextCounter: 5},
			}
			s := newTestSink(t, dir)
			w, err := s.newWriter(&fakes.InitContext{Subtask: 0, Parallel: 2, AttemptNum: 1, Restored: 4, HasRestored: true}, states)
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			// The open file of subtask 3's state is resumed in a copy of
			// its checkpointed bytes, named with the writer's tag; the
			// restored file stays as it was.
			copyName := resumedName(nm(job, 3, 2)[1:], w.tag)
			var left []string
			for _, h := range hiddenFiles(t, dir) {
				left = append(left, filepath.Base(h))
			}
			want := []string{nm(job, 0, 1), nm(job, 3, 2), copyName, nm("00000000000000ff", 0, 4)}
			slices.Sort(left)
			slices.Sort(want)
			if !slices.Equal(left, want) {
				t.Fatalf("hidden files %v, want %v", left, want)
			}
			if got := readFile(t, filepath.Join(dir, copyName)); got != "x\n" {
				t.Fatalf("the resumed copy holds %q, want the checkpointed %q", got, "x\n")
			}
			if got := readFile(t, filepath.Join(dir, nm(job, 3, 2))); got != "x\ny\n" {
				t.Fatalf("the restored file holds %q, want it untouched", got)
			}
			if w.next != 2 {
				t.Fatalf("next counter %d, want 2 (from subtask 0's state)", w.next)
			}
		})
	}
}
