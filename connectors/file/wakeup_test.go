package file

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluice-io/sluice/connectortest/fakes"
	"github.com/sluice-io/sluice/source"
)

// ctxFS is a SourceFS that uses contexts as connectors/s3's does: Open
// makes a request under its ctx, and an open file keeps that ctx for its
// later reads, which fail once it is done. A file hands out at most 8
// bytes a Read, so a split is read over many Fetch calls. Open of a path
// that has a gate waits until the gate is closed or ctx is done.
type ctxFS struct {
	files map[string]string
	gates map[string]chan struct{}
}

func (c *ctxFS) List(context.Context, string) ([]FileStat, error) {
	return nil, errors.New("ctxFS: List is not used")
}

func (c *ctxFS) Open(ctx context.Context, name string) (SourceFile, error) {
	if g := c.gates[name]; g != nil {
		select {
		case <-g:
		case <-ctx.Done():
			return nil, fmt.Errorf("ctxFS: open %s: %w", name, ctx.Err())
		}
	}
	data, ok := c.files[name]
	if !ok {
		return nil, fmt.Errorf("ctxFS: open %s: %w", name, fs.ErrNotExist)
	}
	return &ctxFile{ctx: ctx, name: name, r: strings.NewReader(data)}, nil
}

type ctxFile struct {
	ctx  context.Context
	name string
	r    *strings.Reader
}

func (f *ctxFile) Read(p []byte) (int, error) {
	if err := f.ctx.Err(); err != nil {
		return 0, fmt.Errorf("ctxFS: read %s: %w", f.name, err)
	}
	return f.r.Read(p[:min(len(p), 8)])
}

func (f *ctxFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.ctx.Err(); err != nil {
		return 0, fmt.Errorf("ctxFS: read %s: %w", f.name, err)
	}
	return f.r.ReadAt(p, off)
}

func (f *ctxFile) Seek(off int64, whence int) (int64, error) { return f.r.Seek(off, whence) }
func (f *ctxFile) Close() error                              { return nil }
func (f *ctxFile) Stat() (fs.FileInfo, error)                { return ctxFileInfo{f}, nil }

type ctxFileInfo struct{ f *ctxFile }

func (i ctxFileInfo) Name() string       { return i.f.name }
func (i ctxFileInfo) Size() int64        { return i.f.r.Size() }
func (i ctxFileInfo) Mode() fs.FileMode  { return 0o444 }
func (i ctxFileInfo) ModTime() time.Time { return time.Time{} }
func (i ctxFileInfo) IsDir() bool        { return false }
func (i ctxFileInfo) Sys() any           { return nil }

// numberedLines returns n numbered lines of file name and the file's content.
func numberedLines(name string, n int) ([]string, string) {
	var ls []string
	for i := range n {
		ls = append(ls, fmt.Sprintf("%s-%03d", name, i))
	}
	return ls, strings.Join(ls, "\n") + "\n"
}

// wholeFile is the split of a whole file that has not been read.
func wholeFile(path string) Split { return Split{Path: path, End: -1} }

// drainSynctest polls r inside a synctest bubble until EndOfInput and
// returns the values. When PollNext has nothing, it waits until every
// goroutine of the bubble is blocked: if Available is not ready then,
// the reader can never make progress, and the test fails.
func drainSynctest(t *testing.T, r source.Reader[string, Split]) []string {
	t.Helper()
	out := &fakes.Output[string]{}
	for range 10_000 {
		st, err := r.PollNext(out)
		if err != nil {
			t.Fatalf("PollNext after %d records: %v", len(out.Records), err)
		}
		switch st {
		case source.EndOfInput:
			return out.Values()
		case source.NothingAvailable:
			synctest.Wait()
			select {
			case <-r.Available():
			default:
				snap, _ := r.SnapshotState(1)
				t.Fatalf("the reader is stuck: no record to emit, no end of input, unfinished splits %v (%d records emitted)", snap, len(out.Records))
			}
		}
	}
	t.Fatal("PollNext loop did not end")
	return nil
}

// TestWakeUpKeepsSplits: the fetcher is woken (new splits handed over)
// while the file source's split reader opens a split on storage whose
// requests take the Fetch's ctx (s3://), and while a split's file, which
// keeps the ctx it was opened with, is open. Every record of every split
// must still be read, and the reader must end. Before the fix the wake-up
// cancelled the open, the split reader had already taken the split off
// its queue and the fetcher ignored the error, so the split was never
// read and its next Fetch waited for ever (the hang of cmd/sluice
// TestS3FileSourceToLocal); or the open file's later reads failed with
// the cancelled ctx.
func TestWakeUpKeepsSplits(t *testing.T) {
	aLines, a := numberedLines("a", 20)
	bLines, b := numberedLines("b", 3)
	want := append(slices.Clone(aLines), bLines...)

	t.Run("during open", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			gate := make(chan struct{})
			fsys := &ctxFS{files: map[string]string{"a": a, "b": b}, gates: map[string]chan struct{}{"a": gate}}
			r := newCtxReader(t, fsys)
			if err := r.AddSplits([]Split{wholeFile("a")}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait() // the fetcher waits in Open("a")
			if err := r.AddSplits([]Split{wholeFile("b")}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait() // the wake-up has arrived
			close(gate)
			r.NotifyNoMoreSplits()
			if got := drainSynctest(t, r); !slices.Equal(got, want) {
				t.Errorf("read %q, want %q", got, want)
			}
		})
	})

	t.Run("while a file is open", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fsys := &ctxFS{files: map[string]string{"a": a, "b": b}}
			r := newCtxReader(t, fsys, ReadBatchSize(1))
			if err := r.AddSplits([]Split{wholeFile("a")}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait() // "a" is open; the fetcher waits on the full queue
			if err := r.AddSplits([]Split{wholeFile("b")}); err != nil {
				t.Fatal(err)
			}
			r.NotifyNoMoreSplits()
			if got := drainSynctest(t, r); !slices.Equal(got, want) {
				t.Errorf("read %q, want %q", got, want)
			}
		})
	})

	t.Run("close interrupts an open", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			fsys := &ctxFS{files: map[string]string{"a": a}, gates: map[string]chan struct{}{"a": make(chan struct{})}}
			r := newCtxReader(t, fsys)
			if err := r.AddSplits([]Split{wholeFile("a")}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait() // the fetcher waits in Open("a")
			// Close stops the fetcher: it must cut the open short (if it
			// did not, every goroutine of the bubble would be blocked and
			// synctest would fail the test).
			if err := r.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
	})
}

// newCtxReader returns a started reader of the file source on fsys,
// closed when the test ends.
func newCtxReader(t *testing.T, fsys SourceFS, opts ...SourceOption) source.Reader[string, Split] {
	t.Helper()
	src := NewSource(TextLines(), []string{"unused"}, append([]SourceOption{WithSourceFS(fsys)}, opts...)...)
	r, err := src.CreateReader(&fakes.ReaderContext{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}
