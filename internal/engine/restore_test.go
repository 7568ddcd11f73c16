package engine_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// waitRunning waits, bounded (10 s), until the job runs.
func waitRunning(t *testing.T, h *engine.Handle) {
	t.Helper()
	for i := 0; h.Status().State != engine.Running; i++ {
		if i > 5000 {
			t.Fatalf("job not running within 10s: %s", h.Status().State)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// slowJob is an unbounded-enough job (a slow datagen) on dir without
// periodic checkpoints: it never completes a checkpoint before it is
// cancelled.
func slowJob(dir string, o ...stream.Option) *stream.Environment {
	env := stream.New(append([]stream.Option{stream.CheckpointDir(dir), stream.Logger(engine.DiscardLogger())}, o...)...)
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(1_000_000), datagen.RatePerSecond(100))
	stream.SinkTo(stream.FromSource(env, gen, watermark.None[int64](), "gen"), testsink.NewTwoPhase(testsink.NewStore[int64]()), "sink")
	return env
}

// TestJobIDKeptInCheckpointDir: a job killed before its first checkpoint
// and started again on the same checkpoint directory keeps its id (its
// sinks find what the first attempt left); the id is recorded before any
// task starts.
func TestJobIDKeptInCheckpointDir(t *testing.T) {
	dir := t.TempDir()
	h, err := slowJob(dir).Start(t.Context(), "keep-id")
	if err != nil {
		t.Fatal(err)
	}
	waitRunning(t, h)
	h.Cancel() // as good as a crash: no checkpoint completed
	res1, _ := h.Wait()
	if res1.Checkpoints.Completed != 0 {
		t.Fatalf("the first run completed %d checkpoints, want none", res1.Checkpoints.Completed)
	}
	if got, err := checkpoint.ReadJobID(dir); err != nil || got != res1.JobID {
		t.Fatalf("_job holds %q (%v), want the first run's id %q", got, err, res1.JobID)
	}
	j, err := slowJob(dir).Build("keep-id")
	if err != nil {
		t.Fatal(err)
	}
	if j.ID() != res1.JobID {
		t.Errorf("the job started again on its checkpoint dir has id %q, want %q", j.ID(), res1.JobID)
	}
	// Another directory, another job.
	if other, err := slowJob(t.TempDir()).Build("keep-id"); err != nil || other.ID() == res1.JobID {
		t.Errorf("a job on a fresh directory got id %q (%v), want a new one", other.ID(), err)
	}
}

// TestRestoreIntoDirOfAnotherJob: a job restored from a snapshot records
// the restored id in a fresh directory, and is refused on a directory that
// belongs to another job id.
func TestRestoreIntoDirOfAnotherJob(t *testing.T) {
	snap := &checkpoint.Snapshot{ID: 7, JobName: "x", Properties: map[string]string{engine.JobIDProperty: "00000000000000aa"}}
	fresh := t.TempDir()
	j, err := slowJob(fresh, stream.RestoreFrom(snap), stream.AllowNonRestoredState()).Build("x")
	if err != nil {
		t.Fatal(err)
	}
	if j.ID() != "00000000000000aa" {
		t.Fatalf("restored job id %q, want the snapshot's", j.ID())
	}
	ctx, cancel := context.WithCancel(t.Context())
	h := j.Start(ctx)
	waitRunning(t, h)
	cancel()
	_, _ = h.Wait()
	if got, _ := checkpoint.ReadJobID(fresh); got != "00000000000000aa" {
		t.Errorf("_job after a restored run: %q, want the restored id", got)
	}

	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "_job"), []byte("00000000000000bb\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = slowJob(other, stream.RestoreFrom(snap), stream.AllowNonRestoredState()).Build("x")
	if !errors.Is(err, checkpoint.ErrOtherJob) || !strings.Contains(fmt.Sprint(err), "00000000000000bb") || !strings.Contains(fmt.Sprint(err), "00000000000000aa") {
		t.Errorf("restore into a dir of another job: got %v, want ErrOtherJob naming both ids", err)
	}
}

// TestOneRunPerCheckpointDir: while a job runs on a checkpoint directory, a
// second job on it (started fresh or from a snapshot) fails at once naming
// the directory and the holder's pid; once the first has ended, it runs.
func TestOneRunPerCheckpointDir(t *testing.T) {
	dir := t.TempDir()
	h, err := slowJob(dir).Start(t.Context(), "locked")
	if err != nil {
		t.Fatal(err)
	}
	waitRunning(t, h)
	for _, o := range [][]stream.Option{nil, {stream.RestoreFrom(&checkpoint.Snapshot{ID: 1, Properties: map[string]string{}}), stream.AllowNonRestoredState()}} {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		res, err := slowJob(dir, o...).Execute(ctx, "locked")
		cancel()
		abs, _ := filepath.Abs(dir)
		if !errors.Is(err, checkpoint.ErrLocked) || !strings.Contains(err.Error(), abs) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
			t.Errorf("second run: got %v, want ErrLocked naming %s and pid %d", err, abs, os.Getpid())
		}
		if res == nil || res.State != engine.Failed {
			t.Errorf("second run: result %+v, want FAILED", res)
		}
	}
	h.Cancel()
	_, _ = h.Wait()
	h2, err := slowJob(dir).Start(t.Context(), "locked")
	if err != nil {
		t.Fatal(err)
	}
	waitRunning(t, h2)
	h2.Cancel()
	if _, err := h2.Wait(); !errors.Is(err, context.Canceled) {
		t.Errorf("run after the holder ended: %v, want it to run until cancelled", err)
	}
}

// uidJob is a bounded job gen → sink with the given names and uids ("" =
// none).
func uidJob(dir string, store *testsink.Store[int64], n int64, srcName, srcUID, sinkName, sinkUID string, o ...stream.Option) *stream.Environment {
	env := stream.New(append([]stream.Option{stream.Parallelism(2), stream.CheckpointEvery(20 * time.Millisecond),
		stream.CheckpointDir(dir), stream.Logger(engine.DiscardLogger())}, o...)...)
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(n), datagen.Splits(4), datagen.RatePerSecond(20_000))
	var so, ko []stream.OpOption
	if srcUID != "" {
		so = append(so, stream.UID(srcUID))
	}
	if sinkUID != "" {
		ko = append(ko, stream.UID(sinkUID))
	}
	stream.SinkTo(stream.FromSource(env, gen, watermark.None[int64](), srcName, so...), testsink.NewTwoPhase(store), sinkName, ko...)
	return env
}

// cancelAfterCheckpoints runs env until it completed 3 checkpoints, cancels
// it and returns the newest checkpoint in dir.
func cancelAfterCheckpoints(t *testing.T, env *stream.Environment, dir string) *checkpoint.Snapshot {
	t.Helper()
	h, err := env.Start(t.Context(), "uids")
	if err != nil {
		t.Fatal(err)
	}
	waitCheckpoints(t, h, 3)
	h.Cancel()
	_, _ = h.Wait()
	snap, _, err := checkpoint.LoadLatest(t.Context(), dir)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// TestRestoreByUID: renaming an operator whose uid stays restores its
// state (exactly once); a renamed operator without a uid leaves state that
// matches nothing, and the restore is refused naming it and the job's
// operators — unless non-restored state is allowed.
func TestRestoreByUID(t *testing.T) {
	const n = 20_000
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(n), datagen.Splits(4))
	t.Run("renamed with fixed uid", func(t *testing.T) {
		dir, store := t.TempDir(), testsink.NewStore[int64]()
		// The first version has no uids: they default to the names.
		snap := cancelAfterCheckpoints(t, uidJob(dir, store, n, "gen", "", "sink", ""), dir)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if _, err := uidJob(dir, store, n, "generator v2", "gen", "sink v2", "sink", stream.RestoreFrom(snap)).Execute(ctx, "uids"); err != nil {
			t.Fatal(err)
		}
		checkSequence(t, gen, n, store.Committed(), false)
	})
	for _, c := range []struct {
		name             string
		srcName, snkName string
		unmatched        string
	}{{"renamed sink", "gen", "files", `"sink"`}, {"renamed source", "generator", "sink", `"gen"`}} {
		t.Run(c.name, func(t *testing.T) {
			dir, store := t.TempDir(), testsink.NewStore[int64]()
			snap := cancelAfterCheckpoints(t, uidJob(dir, store, n, "gen", "", "sink", ""), dir)
			_, err := uidJob(dir, store, n, c.srcName, "", c.snkName, "", stream.RestoreFrom(snap)).Build("uids")
			if !errors.Is(err, engine.ErrUnmatchedState) || !strings.Contains(err.Error(), c.unmatched) ||
				!strings.Contains(err.Error(), fmt.Sprintf("%q", c.srcName)) || !strings.Contains(err.Error(), fmt.Sprintf("%q", c.snkName)) {
				t.Fatalf("got %v, want ErrUnmatchedState naming %s and the job's operators", err, c.unmatched)
			}
			// Nothing was lost: the original job resumes to all records.
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			if _, err := uidJob(dir, store, n, "gen", "", "sink", "", stream.RestoreFrom(snap)).Execute(ctx, "uids"); err != nil {
				t.Fatal(err)
			}
			checkSequence(t, gen, n, store.Committed(), false)
		})
	}
	t.Run("allow non-restored state", func(t *testing.T) {
		dir, store := t.TempDir(), testsink.NewStore[int64]()
		snap := cancelAfterCheckpoints(t, uidJob(dir, store, n, "gen", "", "sink", ""), dir)
		var logs strings.Builder
		logger := newTextLogger(&logs)
		j, err := uidJob(dir, testsink.NewStore[int64](), n, "gen", "", "files", "", stream.RestoreFrom(snap), stream.AllowNonRestoredState(), stream.Logger(logger)).Build("uids")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(logs.String(), "dropping state") || !strings.Contains(logs.String(), `\"sink\"`) {
			t.Errorf("log does not report the dropped state of \"sink\":\n%s", logs.String())
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if _, err := j.Run(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// newTextLogger logs as text into w; safe for concurrent use.
func newTextLogger(w *strings.Builder) *slog.Logger {
	return slog.New(slog.NewTextHandler(&lockedWriter{w: w}, nil))
}

type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestCheckpointIDsPassDamagedLatest: a completed checkpoint whose
// _metadata is gone is not listed, but its id was used (sinks derived
// names from it); a job restored from an older checkpoint on that
// directory continues after the recorded one, never reusing its id.
func TestCheckpointIDsPassDamagedLatest(t *testing.T) {
	dir := t.TempDir()
	l, err := checkpoint.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= 3; id++ {
		if _, err := l.Save(t.Context(), &checkpoint.Snapshot{ID: id, JobName: "ids", Properties: map[string]string{engine.JobIDProperty: "00000000000000cc"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(dir, "chk-3", "_metadata")); err != nil {
		t.Fatal(err)
	}
	snap, _, err := l.Get(t.Context(), checkpoint.Checkpoint, 2)
	if err != nil {
		t.Fatal(err)
	}
	h, err := slowJob(dir, stream.RestoreFrom(snap), stream.CheckpointEvery(10*time.Millisecond)).Start(t.Context(), "ids")
	if err != nil {
		t.Fatal(err)
	}
	waitCheckpoints(t, h, 1)
	first := h.Latest().ID
	h.Cancel()
	_, _ = h.Wait()
	if first <= 3 {
		t.Errorf("first checkpoint after the restore has id %d, want > 3 (checkpoint 3 completed before its _metadata was lost)", first)
	}
}

// uidSink records the operator uid its writers see.
type uidSink struct{ seen chan string }

func (s uidSink) CreateWriter(ctx context.Context, ic sink.InitContext) (sink.Writer[int64], error) {
	select {
	case s.seen <- ic.OperatorUID() + "/" + ic.OperatorName():
	default:
	}
	return discardWriter{}, nil
}

type discardWriter struct{}

func (discardWriter) Write(context.Context, int64, sink.Meta) error { return nil }
func (discardWriter) Flush(context.Context, bool) error             { return nil }
func (discardWriter) Close() error                                  { return nil }

// TestSinkSeesOperatorUID: InitContext.OperatorUID gives a sink its operator's
// uid (the name by default), for the names it derives.
func TestSinkSeesOperatorUID(t *testing.T) {
	for _, c := range []struct {
		o    []stream.OpOption
		want string
	}{{nil, "out/out"}, {[]stream.OpOption{stream.UID("stable")}, "stable/out"}} {
		env := stream.New(stream.Logger(engine.DiscardLogger()))
		gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(10))
		s := uidSink{seen: make(chan string, 1)}
		stream.SinkTo(stream.FromSource(env, gen, watermark.None[int64](), "gen"), sink.Sink[int64](s), "out", c.o...)
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		_, err := env.Execute(ctx, "uid")
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if got := <-s.seen; got != c.want {
			t.Errorf("uid/name seen by the sink: %q, want %q", got, c.want)
		}
	}
}

// TestRestoreOlderWarns: restoring a checkpoint older than the newest
// completed one in the job's storage (the explicit choice when the newest
// is damaged) logs a warning that output may be duplicated; restoring the
// newest does not.
func TestRestoreOlderWarns(t *testing.T) {
	dir := t.TempDir()
	l, err := checkpoint.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= 3; id++ {
		if _, err := l.Save(t.Context(), &checkpoint.Snapshot{ID: id, JobName: "w", Properties: map[string]string{engine.JobIDProperty: "00000000000000dd"}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(dir, "chk-3", "_metadata")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.Latest(t.Context()); !errors.Is(err, checkpoint.ErrDamaged) {
		t.Fatalf("Latest: %v, want ErrDamaged", err)
	}
	for _, c := range []struct {
		id   int64
		warn bool
	}{{2, true}, {3, false}} {
		snap := &checkpoint.Snapshot{ID: c.id, JobName: "w", Properties: map[string]string{engine.JobIDProperty: "00000000000000dd"}}
		if c.id == 2 {
			if snap, _, err = l.Get(t.Context(), checkpoint.Checkpoint, 2); err != nil {
				t.Fatal(err)
			}
		}
		var logs strings.Builder
		if _, err := slowJob(dir, stream.RestoreFrom(snap), stream.Logger(newTextLogger(&logs))).Build("w"); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(logs.String(), "restoring an older snapshot"); got != c.warn || c.warn && !strings.Contains(logs.String(), "newest_completed=3") {
			t.Errorf("restoring %d: warning logged %t, want %t (newest 3)\n%s", c.id, got, c.warn, logs.String())
		}
	}
}
