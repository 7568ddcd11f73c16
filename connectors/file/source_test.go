package file

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/sluice-io/sluice/connectortest/fakes"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/source"
)

// readSplit reads a split to its end (or max records) with a splitReader
// and returns the records and the split advanced past them, as the
// emitter would.
func readSplit[T any](t *testing.T, f Format[T], sp Split, max int, opts ...SourceOption) ([]T, Split, error) {
	t.Helper()
	cfg := defaultSourceConfig()
	cfg.batchSize = 7
	if max >= 0 {
		cfg.batchSize = 1 // positions are per batch
	}
	for _, o := range opts {
		o.applySource(&cfg)
	}
	r := &splitReader[T]{format: f, cfg: &cfg, errCount: new(metrics.Counter)}
	defer r.Close()
	if err := r.AddSplits([]Split{sp}); err != nil {
		t.Fatal(err)
	}
	var out []T
	for range 1_000_000 {
		b, err := r.Fetch(context.Background())
		if err != nil {
			return out, sp, err
		}
		for _, g := range b.Records {
			for _, c := range g.Records {
				if max >= 0 && len(out) == max {
					return out, sp, nil
				}
				out = append(out, c.vs...)
				sp.Offset, sp.Skip = c.next, 0
			}
		}
		if b.Recycle != nil {
			b.Recycle()
		}
		if len(b.Finished) > 0 {
			return out, sp, nil
		}
	}
	t.Fatal("split did not finish")
	return nil, sp, nil
}

func randomLines(rng *rand.Rand, n int, long bool) []string {
	lines := make([]string, n)
	for i := range lines {
		l := rng.IntN(30)
		if rng.IntN(20) == 0 {
			l = 0
		}
		if long && rng.IntN(100) == 0 {
			l = 300_000 // longer than the read buffer and than blocks
		}
		lines[i] = fmt.Sprintf("%d:%s", i, strings.Repeat("x", l))
	}
	return lines
}

// TestBlockSplitsReadEveryLineOnce cuts files into blocks of many sizes
// and checks that the blocks together read every line exactly once, in
// order, including "\r\n" line ends and a last line without a terminator.
func TestBlockSplitsReadEveryLineOnce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	dir := t.TempDir()
	for _, tc := range []struct {
		name, sep string
		trailing  bool
	}{{"lf", "\n", true}, {"crlf", "\r\n", true}, {"no-final-newline", "\n", false}} {
		short, long := randomLines(rng, 300, false), randomLines(rng, 400, true)
		content := strings.Join(long, tc.sep)
		if tc.trailing {
			content += tc.sep
		}
		p := filepath.Join(dir, tc.name+".txt")
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		shortContent := strings.Join(short, tc.sep)
		if tc.trailing {
			shortContent += tc.sep
		}
		sp := filepath.Join(dir, tc.name+"-short.txt")
		if err := os.WriteFile(sp, []byte(shortContent), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, bs := range []int64{1, 2, 3, 7, 100, 4096, 65536, 1 << 20, int64(len(content)), int64(len(content)) + 1} {
			t.Run(fmt.Sprintf("%s/block=%d", tc.name, bs), func(t *testing.T) {
				p, content, lines := p, content, long
				if bs <= 100 { // many tiny blocks: use the short file
					p, content, lines = sp, shortContent, short
				}
				splits := splitFile(fileInfo{path: p, size: int64(len(content))}, true, bs)
				var got []string
				for _, sp := range splits {
					recs, _, err := readSplit(t, TextLines(), sp, -1)
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, recs...)
				}
				if !slices.Equal(got, lines) {
					t.Fatalf("%d splits read %d lines, want %d (first difference at %d)", len(splits), len(got), len(lines), firstDiff(got, lines))
				}
			})
		}
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func compress(t *testing.T, kind string, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	switch kind {
	case "gz":
		w = gzip.NewWriter(&buf)
	case "zst":
		zw, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w = zw
	default:
		return data
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestResumeInTheMiddle reads part of a file, then resumes a new reader
// from the split's position (byte offset, and records to skip), for plain,
// gzip and zstd files, and for block splits.
func TestResumeInTheMiddle(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	lines := randomLines(rng, 500, true)
	content := []byte(strings.Join(lines, "\n") + "\n")
	dir := t.TempDir()
	for _, ext := range []string{"txt", "gz", "zst"} {
		p := filepath.Join(dir, "in."+ext)
		if err := os.WriteFile(p, compress(t, ext, content), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, stop := range []int{0, 1, 17, 250, 499} {
			t.Run(fmt.Sprintf("%s/after=%d", ext, stop), func(t *testing.T) {
				sp := Split{Path: p, End: -1}
				first, pos, err := readSplit(t, TextLines(), sp, stop)
				if err != nil {
					t.Fatal(err)
				}
				rest, _, err := readSplit(t, TextLines(), pos, -1)
				if err != nil {
					t.Fatal(err)
				}
				if got := append(first, rest...); !slices.Equal(got, lines) {
					t.Fatalf("resumed at %+v: got %d lines, want %d (first difference at %d)", pos, len(got), len(lines), firstDiff(got, lines))
				}
				// The same position expressed as records to skip.
				skip := Split{Path: p, End: -1, Skip: int64(stop)}
				rest2, _, err := readSplit(t, TextLines(), skip, -1)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(rest2, lines[stop:]) {
					t.Fatalf("skip %d: got %d lines, want %d", stop, len(rest2), len(lines)-stop)
				}
			})
		}
	}
	t.Run("block", func(t *testing.T) {
		p := filepath.Join(dir, "in.txt")
		var got []string
		for _, sp := range splitFile(fileInfo{path: p, size: int64(len(content))}, true, 5000) {
			a, pos, err := readSplit(t, TextLines(), sp, 3)
			if err != nil {
				t.Fatal(err)
			}
			b, _, err := readSplit(t, TextLines(), pos, -1)
			if err != nil {
				t.Fatal(err)
			}
			got = append(append(got, a...), b...)
		}
		if !slices.Equal(got, lines) {
			t.Fatalf("got %d lines, want %d", len(got), len(lines))
		}
	})
}

func TestFormats(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Run("csv-header", func(t *testing.T) {
		p := write("a.csv", "name,qty\n\"x, y\",1\n\"multi\nline\",2\nz,3\n")
		got, pos, err := readSplit(t, CSV(CSVHeader()), Split{Path: p, End: -1}, 1)
		if err != nil {
			t.Fatal(err)
		}
		rest, _, err := readSplit(t, CSV(CSVHeader()), pos, -1)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rest...)
		want := [][]string{{"x, y", "1"}, {"multi\nline", "2"}, {"z", "3"}}
		if !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("got %q, want %q", got, want)
		}
	})
	t.Run("csv-semicolon", func(t *testing.T) {
		p := write("b.csv", "a;b\nc;d\n")
		got, _, err := readSplit(t, CSV(CSVComma(';')), Split{Path: p, End: -1}, -1)
		if err != nil {
			t.Fatal(err)
		}
		if want := [][]string{{"a", "b"}, {"c", "d"}}; !slices.EqualFunc(got, want, slices.Equal) {
			t.Fatalf("got %q, want %q", got, want)
		}
	})
	type rec struct {
		ID   int    `json:"id"`
		Name string `json:"name"`
	}
	t.Run("jsonl", func(t *testing.T) {
		p := write("a.jsonl", "{\"id\":1,\"name\":\"a\"}\n\n{\"id\":2,\"name\":\"b\"}\r\n")
		got, _, err := readSplit(t, JSONLines[rec](), Split{Path: p, End: -1}, -1)
		if err != nil {
			t.Fatal(err)
		}
		if want := []rec{{1, "a"}, {2, "b"}}; !slices.Equal(got, want) {
			t.Fatalf("got %v, want %v", got, want)
		}
	})
	bad := write("bad.jsonl", "{\"id\":1}\n{\"id\":oops}\n{\"id\":3}\n")
	t.Run("malformed-fail", func(t *testing.T) {
		_, _, err := readSplit(t, JSONLines[rec](), Split{Path: bad, End: -1}, -1)
		var re *RecordError
		if !errors.As(err, &re) || !errors.Is(err, ErrMalformed) {
			t.Fatalf("got %v, want a *RecordError wrapping ErrMalformed", err)
		}
		if re.File != bad || re.Offset != 9 {
			t.Errorf("error names %s at %d, want %s at 9", re.File, re.Offset, bad)
		}
		if !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), "offset 9") {
			t.Errorf("message %q does not name the file and offset", err)
		}
	})
	t.Run("malformed-skip", func(t *testing.T) {
		cfg := defaultSourceConfig()
		cfg.malformed = SkipMalformed
		r := &splitReader[rec]{format: JSONLines[rec](), cfg: &cfg, errCount: new(metrics.Counter)}
		defer r.Close()
		_ = r.AddSplits([]Split{{Path: bad, End: -1}})
		b, err := r.Fetch(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n := len(b.Records[0].Records[0].vs); n != 2 || r.errCount.Value() != 1 {
			t.Fatalf("got %d records and %d errors, want 2 and 1", n, r.errCount.Value())
		}
	})
	t.Run("missing-file", func(t *testing.T) {
		_, _, err := readSplit(t, TextLines(), Split{Path: filepath.Join(dir, "nope"), End: -1}, -1)
		if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), "nope") {
			t.Fatalf("got %v, want a not-exist error naming the file", err)
		}
	})
}

func TestListFiles(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"a/1.txt", "a/b/2.txt", "a/.hidden", "a/_tmp/3.txt", "c/4.log", "c/5.txt", "6.txt"} {
		full := filepath.Join(dir, p)
		_ = os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := listFiles(t.Context(), []string{filepath.Join(dir, "a"), filepath.Join(dir, "c", "*.txt"), filepath.Join(dir, "6.txt"), filepath.Join(dir, "a", "1.txt")}, defaultFileFilter)
	if err != nil {
		t.Fatal(err)
	}
	var rel []string
	for _, f := range got {
		r, _ := filepath.Rel(dir, f.path)
		rel = append(rel, r)
	}
	want := []string{"6.txt", "a/1.txt", "a/b/2.txt", "c/5.txt"}
	if !slices.Equal(rel, want) {
		t.Fatalf("got %v, want %v", rel, want)
	}
	if _, err := listFiles(t.Context(), []string{filepath.Join(dir, "missing")}, defaultFileFilter); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing path: got %v, want not-exist", err)
	}
}

func runAsync(t *testing.T, c *fakes.EnumeratorContext[Split], from int) int {
	t.Helper()
	for ; from < len(c.Async); from++ {
		a := c.Async[from]
		v, err := a.Fn(t.Context())
		a.Handler(v, err)
	}
	return from
}

func TestEnumeratorBounded(t *testing.T) {
	in := t.TempDir()
	writeInput(t, in, 3, 10)
	src := NewSource(TextLines(), []string{in})
	ctx := &fakes.EnumeratorContext[Split]{Parallel: 2}
	ctx.Register(0, 1)
	e, err := src.CreateEnumerator(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	// A request before the listing finished waits for it.
	if err := e.HandleSplitRequest(0, ""); err != nil {
		t.Fatal(err)
	}
	if len(ctx.Assigned[0]) != 0 || ctx.NoMoreSplits[0] != 0 {
		t.Fatalf("answered before listing: %v %v", ctx.Assigned, ctx.NoMoreSplits)
	}
	runAsync(t, ctx, 0)
	if len(ctx.Assigned[0]) != 1 {
		t.Fatalf("waiting reader got %d splits after the listing, want 1", len(ctx.Assigned[0]))
	}
	st, _ := e.SnapshotState(1)
	if len(st.Pending) != 2 || !st.Listed {
		t.Fatalf("snapshot %+v, want 2 pending and listed", st)
	}
	// Restored: no new listing; the pending splits go out, then no more.
	ctx2 := &fakes.EnumeratorContext[Split]{Parallel: 2}
	ctx2.Register(0, 1)
	e2, _ := src.RestoreEnumerator(ctx2, st)
	_ = e2.Start(t.Context())
	if len(ctx2.Async) != 0 {
		t.Fatalf("restored bounded enumerator lists again")
	}
	for range 3 {
		_ = e2.HandleSplitRequest(1, "")
	}
	if len(ctx2.Assigned[1]) != 2 || ctx2.NoMoreSplits[1] != 1 {
		t.Fatalf("got %d splits and %d no-more-splits, want 2 and 1", len(ctx2.Assigned[1]), ctx2.NoMoreSplits[1])
	}
	_ = e2.AddSplitsBack(ctx2.Assigned[1][:1], 1)
	_ = e2.HandleSplitRequest(0, "")
	if len(ctx2.Assigned[0]) != 1 {
		t.Fatalf("split added back was not assigned again")
	}
}

// TestEnumeratorContinuous checks that new files are found, a processed
// file is never assigned again (also after a restore), and the processed
// set forgets files that disappeared.
func TestEnumeratorContinuous(t *testing.T) {
	in := t.TempDir()
	put := func(name string) {
		if err := os.WriteFile(filepath.Join(in, name), []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("a.txt")
	src := NewSource(TextLines(), []string{in}, ContinuousDiscovery(1))
	if src.Boundedness() != source.ContinuousUnbounded {
		t.Fatal("not unbounded")
	}
	ctx := &fakes.EnumeratorContext[Split]{Parallel: 1}
	ctx.Register(0)
	e, _ := src.CreateEnumerator(ctx)
	_ = e.Start(t.Context())
	next := runAsync(t, ctx, 0)
	_ = e.HandleSplitRequest(0, "")
	_ = e.HandleSplitRequest(0, "") // waits: nothing new
	put("b.txt")
	runAsync(t, ctx, next-1) // the periodic call runs again
	runAsync(t, ctx, next-1)
	if got := len(ctx.Assigned[0]); got != 2 || ctx.NoMoreSplits[0] != 0 {
		t.Fatalf("got %d splits (%d no-more-splits), want a and b once", got, ctx.NoMoreSplits[0])
	}
	st, _ := e.SnapshotState(1)
	if !slices.Equal(st.Processed, []string{filepath.Join(in, "a.txt"), filepath.Join(in, "b.txt")}) {
		t.Fatalf("processed %v", st.Processed)
	}
	_ = os.Remove(filepath.Join(in, "a.txt"))
	ctx2 := &fakes.EnumeratorContext[Split]{Parallel: 1}
	ctx2.Register(0)
	e2, _ := src.RestoreEnumerator(ctx2, st)
	_ = e2.Start(t.Context())
	runAsync(t, ctx2, 0)
	_ = e2.HandleSplitRequest(0, "")
	if len(ctx2.Assigned[0]) != 0 {
		t.Fatalf("restored enumerator re-assigned %v", ctx2.Assigned[0])
	}
	st2, _ := e2.SnapshotState(2)
	if !slices.Equal(st2.Processed, []string{filepath.Join(in, "b.txt")}) {
		t.Fatalf("processed %v, want only b.txt (a.txt disappeared)", st2.Processed)
	}
}

func TestSourceConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  *Source[string]
		want string
	}{
		{"no paths", NewSource(TextLines(), nil), "no paths"},
		{"block", NewSource(TextLines(), []string{"x"}, BlockSize(0)), "BlockSize"},
		{"discovery", NewSource(TextLines(), []string{"x"}, ContinuousDiscovery(-1)), "ContinuousDiscovery"},
		{"batch", NewSource(TextLines(), []string{"x"}, ReadBatchSize(0)), "ReadBatchSize"},
		{"nil format", NewSource[string](nil, []string{"x"}), "format"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.src.Err()
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalidConfig naming %s", err, tc.want)
			}
		})
	}
}

// TestTextLinesBatches reads, in batches of 1000, lines that share
// strings of about 32 KiB (empty lines, "\r\n", lines longer than that):
// every line comes back intact, also after later batches reused the
// reader's buffers.
func TestTextLinesBatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	var lines []string
	var b strings.Builder
	for i := range 5000 {
		l := fmt.Sprintf("%d:%s", i, strings.Repeat("y", rng.IntN(200)))
		switch {
		case i%97 == 0:
			l = ""
		case i%1000 == 1:
			l = strings.Repeat("z", 40<<10)
		}
		lines = append(lines, l)
		b.WriteString(l)
		if i%3 == 0 {
			b.WriteString("\r\n")
		} else {
			b.WriteString("\n")
		}
	}
	p := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	got, _, err := readSplit(t, TextLines(), Split{Path: p, End: -1}, -1, ReadBatchSize(1000))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, lines) {
		t.Fatalf("read %d lines, want %d (first difference at %d)", len(got), len(lines), firstDiff(got, lines))
	}
}
