package file

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// TestContinuousSource runs an unbounded job that discovers files as they
// appear, writes a second batch while it runs, touches and appends to a
// processed file (it must not be read again), then stops with a final
// checkpoint: every line of both batches arrives exactly once.
func TestContinuousSource(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	batch := func(from, n int) []string {
		var all []string
		for i := from; i < from+n; i++ {
			var b strings.Builder
			for j := range 200 {
				l := fmt.Sprintf("f%03d:%d", i, j)
				all = append(all, l)
				b.WriteString(l + "\n")
			}
			tmp := filepath.Join(in, fmt.Sprintf(".f%03d.tmp", i)) // hidden while written
			if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(in, fmt.Sprintf("f%03d.txt", i))); err != nil {
				t.Fatal(err)
			}
		}
		return all
	}
	want := batch(0, 5)
	sk, err := NewRowSink(out, LinesFormat(), WithBuckets(BasePathBuckets[string]()), Rolling(OnCheckpointRolling()))
	if err != nil {
		t.Fatal(err)
	}
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(20*time.Millisecond),
		stream.Restart(restart.None()), stream.Logger(stream.DiscardLogger()))
	src := NewSource(TextLines(), []string{in}, ContinuousDiscovery(10*time.Millisecond))
	stream.SinkTo(stream.FromSource(env, src, watermark.None[string](), "files"), sk, "out")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	h, err := env.Start(ctx, "continuous")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Cancel()
	waitLines(t, ctx, out, len(want))
	// A processed file that changes is not read again.
	f, err := os.OpenFile(filepath.Join(in, "f000.txt"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("appended\n")
	f.Close()
	want = append(want, batch(5, 5)...)
	waitLines(t, ctx, out, len(want))
	if _, err := h.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, want, readOutput(t, out), true)
}

// waitLines polls the committed output until it holds n lines or ctx
// ends; the bound is ctx's deadline, not a timed assertion.
func waitLines(t *testing.T, ctx context.Context, dir string, n int) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		got := 0
		for _, lines := range readOutput(t, dir) {
			got += len(lines)
		}
		if got >= n {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %d committed lines, have %d: %v", n, got, ctx.Err())
		case <-tick.C:
		}
	}
}
