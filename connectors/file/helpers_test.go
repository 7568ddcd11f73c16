package file

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// writeInput writes files f000 … with lines "f<i>:<j>" (j = 0 … lines-1)
// under dir and returns every line.
func writeInput(t testing.TB, dir string, files, lines int) []string {
	t.Helper()
	return writeInputNamed(t, dir, "f", files, lines)
}

// writeInputNamed is writeInput with another first letter than "f".
func writeInputNamed(t testing.TB, dir, name string, files, lines int) []string {
	t.Helper()
	var all []string
	for i := range files {
		var b strings.Builder
		for j := range lines {
			l := fmt.Sprintf("%s%03d:%d", name, i, j)
			b.WriteString(l)
			b.WriteByte('\n')
			all = append(all, l)
		}
		sub := filepath.Join(dir, fmt.Sprintf("d%d", i%3)) // nested directories
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sub, fmt.Sprintf("%s%03d.txt", name, i)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return all
}

// finishedFiles returns the visible files under dir, relative, sorted.
func finishedFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !strings.HasPrefix(d.Name(), ".") {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// hiddenFiles returns the hidden (in-progress) files under dir.
func hiddenFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), ".") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// readOutput reads every line of the finished files, per file.
func readOutput(t testing.TB, dir string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, rel := range finishedFiles(t, dir) {
		f, err := os.Open(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			out[rel] = append(out[rel], sc.Text())
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// checkExactlyOnce asserts that the output lines are the input lines as a
// multiset and, if ordered, that within every output file the lines of
// each input file keep their order.
func checkExactlyOnce(t *testing.T, want []string, got map[string][]string, ordered bool) {
	t.Helper()
	count := map[string]int{}
	for _, l := range want {
		count[l]++
	}
	n := 0
	var extra, dup []string
	for file, lines := range got {
		last := map[string]int{}
		for _, l := range lines {
			n++
			c, ok := count[l]
			switch {
			case !ok:
				extra = append(extra, l)
			case c <= 0:
				dup = append(dup, l)
			}
			count[l] = c - 1
			if ordered {
				src, idx, _ := strings.Cut(l, ":")
				j, _ := strconv.Atoi(idx)
				if p, ok := last[src]; ok && j <= p {
					t.Errorf("%s: %s out of order: line %d after %d", file, src, j, p)
				}
				last[src] = j
			}
		}
	}
	var missing []string
	for l, c := range count {
		if c > 0 {
			missing = append(missing, l)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 || len(dup) > 0 || len(extra) > 0 || n != len(want) {
		first := func(s []string) string {
			if len(s) == 0 {
				return "none"
			}
			return s[0]
		}
		t.Fatalf("got %d lines, want %d: %d missing (first %s), %d duplicated (first %s), %d unexpected (first %s)",
			n, len(want), len(missing), first(missing), len(dup), first(dup), len(extra), first(extra))
	}
}

type jobOpts struct {
	parallelism int
	plan        *faultinject.Plan
	restarts    int
	interval    time.Duration
	srcOpts     []SourceOption
	sinkOpts    []SinkOption
	timeout     time.Duration
	tolerable   int
	// wrap, if set, wraps the sink (inside the fault injection).
	wrap func(sink.Sink[string]) sink.Sink[string]
	// failover is the failover strategy (default: the runtime's).
	failover stream.FailoverMode
	// srcWrap, if set, wraps the file source (inside the fault injection).
	srcWrap func(*Source[string]) source.Source[string, Split, EnumState]
	// jobID is the job's id (default: a new one).
	jobID string
	// ctx, if set, is the job's context (default: the test's).
	ctx context.Context
}

// runCopy runs a bounded job that copies the text lines under in to a row
// file sink at out and returns its result.
func runCopy(t *testing.T, in, out string, o jobOpts) (*stream.Result, error) {
	t.Helper()
	if o.parallelism == 0 {
		o.parallelism = 2
	}
	if o.interval == 0 {
		o.interval = 20 * time.Millisecond
	}
	if o.timeout == 0 {
		o.timeout = 2 * time.Minute
	}
	fsrc := NewSource(TextLines(), []string{in}, o.srcOpts...)
	var src source.Source[string, Split, EnumState] = fsrc
	if o.srcWrap != nil {
		src = o.srcWrap(fsrc)
	}
	sk, err := NewRowSink(out, LinesFormat(), append([]SinkOption{WithBuckets(BasePathBuckets[string]())}, o.sinkOpts...)...)
	if err != nil {
		t.Fatal(err)
	}
	env := stream.New(stream.Parallelism(o.parallelism), stream.CheckpointEvery(o.interval),
		stream.Restart(restart.FixedDelay(o.restarts, 0)), stream.Logger(stream.DiscardLogger()),
		stream.TolerableCheckpointFailures(o.tolerable), stream.Failover(o.failover), stream.JobID(o.jobID))
	var s sink.Sink[string] = sk
	if o.wrap != nil {
		s = o.wrap(s)
	}
	if o.plan != nil {
		s = faultinject.WrapSink(sk, o.plan)
	}
	stream.SinkTo(stream.FromSource(env, faultinject.WrapSource(src, o.plan), watermark.None[string](), "files"), s, "out")
	if o.ctx == nil {
		o.ctx = t.Context()
	}
	ctx, cancel := context.WithTimeout(o.ctx, o.timeout)
	defer cancel()
	return env.Execute(ctx, "copy")
}

// testJob is the job id of fakes.InitContext.
const testJob = "0000000000000000"
