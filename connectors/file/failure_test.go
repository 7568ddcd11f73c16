package file

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// repairing is a restart strategy that runs repair before each restart
// (the operator freeing disk space or fixing permissions).
type repairing struct {
	max    int
	repair func()
}

func (r repairing) Next(attempt int) (time.Duration, bool) {
	if attempt >= r.max {
		return 0, false
	}
	r.repair()
	return 0, true
}

func (r repairing) String() string { return "repairing" }

var _ restart.Strategy = repairing{}

// runRepaired copies in to out with the given sink options and restart
// strategy and returns the result.
func runRepaired(t *testing.T, in, out string, strategy restart.Strategy, sinkOpts ...SinkOption) *stream.Result {
	t.Helper()
	sk, err := NewRowSink(out, LinesFormat(), sinkOpts...)
	if err != nil {
		t.Fatal(err)
	}
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(20*time.Millisecond),
		stream.Restart(strategy), stream.Logger(stream.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, NewSource(TextLines(), []string{in}), watermark.None[string](), "files"), sk, "out")
	res, err := env.Execute(t.Context(), "repaired")
	if err != nil {
		t.Fatalf("job: %v", err)
	}
	return res
}

func checkFailure(t *testing.T, res *stream.Result, want ...string) {
	t.Helper()
	if res.Restarts == 0 || len(res.Failures) == 0 {
		t.Fatalf("the job did not fail (%d restarts)", res.Restarts)
	}
	msg := res.Failures[0].Error()
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("failure %q does not mention %q", msg, w)
		}
	}
	t.Logf("first failure: %v", msg)
}

// TestDiskFullInjected fails the part files' writes with ENOSPC once
// (through the sink's file seam) while the data sits in the write buffer,
// so that the checkpoint's flush fails; after the restart the output is
// complete and exact.
func TestDiskFullInjected(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	want := writeInput(t, in, 10, 500)
	var fired atomic.Bool
	var written atomic.Int64
	wrap := sinkOptionFunc(func(c *sinkConfig) {
		c.wrapFile = func(_ string, w io.Writer) io.Writer {
			return writerFunc(func(p []byte) (int, error) {
				if written.Add(int64(len(p))) > 20_000 && fired.CompareAndSwap(false, true) {
					return 0, syscall.ENOSPC
				}
				return w.Write(p)
			})
		}
	})
	res := runRepaired(t, in, out, restart.FixedDelay(3, 0), wrap, WithBuckets(BasePathBuckets[string]()), WriteBufferSize(1<<20))
	checkFailure(t, res, "no space left on device", ".part-")
	checkExactlyOnce(t, want, readOutput(t, out), true)
	if h := hiddenFiles(t, out); len(h) > 0 {
		t.Errorf("in-progress files left: %v", h)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestDiskFullTmpfs writes to a real, small tmpfs that is full: the
// checkpoint fails with ENOSPC naming the file; the restart strategy frees
// the space, and the output is complete and exact. It needs permission to
// mount a tmpfs and is skipped without.
func TestDiskFullTmpfs(t *testing.T) {
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=4m"); err != nil {
		t.Skipf("cannot mount a tmpfs (%v); TestDiskFullInjected covers the same path through the file seam", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(mnt, 0) })
	ballast := filepath.Join(mnt, "ballast")
	fillDisk(t, ballast, 256<<10) // leave 256 KiB
	in, out := t.TempDir(), filepath.Join(mnt, "out")
	want := writeInput(t, in, 10, 5000) // about 450 KB
	var once sync.Once
	res := runRepaired(t, in, out, repairing{max: 5, repair: func() { once.Do(func() { _ = os.Remove(ballast) }) }},
		WithBuckets(BasePathBuckets[string]()), WriteBufferSize(4<<20))
	checkFailure(t, res, "no space left on device", ".part-")
	checkExactlyOnce(t, want, readOutput(t, out), true)
	if h := hiddenFiles(t, out); len(h) > 0 {
		t.Errorf("in-progress files left: %v", h)
	}
}

// fillDisk writes p until the file system has about leave bytes free.
func fillDisk(t *testing.T, p string, leave int64) {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(p), &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	if free <= leave {
		return
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for n := free - leave; n > 0; n -= int64(len(buf)) {
		if _, err := f.Write(buf[:min(int64(len(buf)), n)]); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
}

// TestPermissionErrorDuringWrite routes records to a bucket whose parent
// is a regular file (ENOTDIR, which also stops root, unlike a read-only
// directory): the job fails with an error naming the bucket directory;
// the restart strategy removes the obstacle, and the output is complete
// and exact.
func TestPermissionErrorDuringWrite(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	want := writeInput(t, in, 6, 300)
	obstacle := filepath.Join(out, "blocked")
	if err := os.WriteFile(obstacle, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	res := runRepaired(t, in, out, repairing{max: 5, repair: func() { once.Do(func() { _ = os.Remove(obstacle) }) }},
		WithBuckets(BucketFunc[string](func(v string, _ BucketContext) (string, error) {
			return "blocked/" + v[:4], nil
		})))
	checkFailure(t, res, "blocked", "not a directory")
	got := readOutput(t, out)
	checkExactlyOnce(t, want, got, true)
	for f := range got {
		if !strings.HasPrefix(f, "blocked"+string(filepath.Separator)) {
			t.Errorf("output %s outside the bucket", f)
		}
	}
}

// TestBaseDirectoryNotADirectory fails at start with an error naming the
// base directory.
func TestBaseDirectoryNotADirectory(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s := newTestSink(t, filepath.Join(file, "out"))
	_, err := s.CreateCommitter(context.Background(), nil)
	if err == nil || !strings.Contains(err.Error(), "base directory") || !errors.Is(err, syscall.ENOTDIR) {
		t.Fatalf("got %v, want ENOTDIR naming the base directory", err)
	}
}

// TestMissingInputPathFailsJob fails a bounded job whose path does not
// exist, with an error naming it, instead of waiting forever.
func TestMissingInputPathFailsJob(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	env := stream.New(stream.Parallelism(2), stream.Logger(stream.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, NewSource(TextLines(), []string{missing}, SourceLogger(stream.DiscardLogger())), watermark.None[string](), "files"),
		sink.Sink[string](&countSink{}), "count")
	_, err := env.Execute(t.Context(), "missing")
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("got %v, want a not-exist error naming %s", err, missing)
	}
}
