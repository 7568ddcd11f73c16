package file

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectortest"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/source"
)

// sourceContext keeps each test split in files of its own: one file per
// split for a bounded source; for an unbounded one every Write adds a new
// file (a processed file is never read again), written under a hidden name
// and renamed, as a producer of files for a continuous source should.
type sourceContext struct {
	dir     string
	bounded bool
	mu      sync.Mutex
	writes  map[int]int
}

func (c *sourceContext) Write(split int, rs []connectortest.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, r := range rs {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	name := fmt.Sprintf("split-%03d.txt", split)
	if c.bounded {
		f, err := os.OpenFile(filepath.Join(c.dir, name), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		_, err = f.WriteString(b.String())
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	}
	n := c.writes[split]
	c.writes[split] = n + 1
	name = fmt.Sprintf("split-%03d-%06d.txt", split, n)
	tmp := filepath.Join(c.dir, "."+name)
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(c.dir, name))
}

func (c *sourceContext) Source() (source.Source[string, Split, EnumState], error) {
	var opts []SourceOption
	if !c.bounded {
		opts = append(opts, ContinuousDiscovery(10*time.Millisecond))
	}
	src := NewSource(TextLines(), []string{c.dir}, opts...)
	return src, src.Err()
}

func (c *sourceContext) Record(v string) (connectortest.Record, error) {
	return connectortest.ParseRecord(v)
}

func (c *sourceContext) Close() error { return nil }

func newSourceContext(s connectortest.SourceSettings) (connectortest.SourceContext[string, Split, EnumState], error) {
	return &sourceContext{dir: s.TempDir, bounded: s.Bounded, writes: map[int]int{}}, nil
}

// unboundedCase is the one case with an unbounded source: there a test
// split is a series of files, which readers read in parallel (within one
// file the order is kept), so it runs without the order check.
const unboundedCase = "unbounded/data-after-start"

func TestSourceConformance(t *testing.T) {
	connectortest.TestSource(t, newSourceContext,
		connectortest.SkipCase(unboundedCase, "runs unordered in TestSourceConformanceUnbounded"))
}

func TestSourceConformanceUnbounded(t *testing.T) {
	opts := []connectortest.Option{connectortest.Unordered()}
	for _, name := range []string{"single-split", "multiple-splits", "idle-reader", "resume/same-parallelism",
		"resume/scale-up", "resume/scale-down", "resume/savepoint", "failure-recovery", "metrics", "goroutine-leaks"} {
		opts = append(opts, connectortest.SkipCase(name, "runs ordered in TestSourceConformance"))
	}
	connectortest.TestSource(t, newSourceContext, opts...)
}

// sinkContext writes test records as text lines under a base directory.
type sinkContext struct {
	dir  string
	opts []SinkOption
}

func (c *sinkContext) Sink() (sink.Sink[string], error) {
	return NewRowSink(c.dir, LinesFormat(), append([]SinkOption{WithBuckets(BasePathBuckets[string]()),
		Rolling(DefaultRollingPolicy{PartSize: 4 << 10})}, c.opts...)...)
}

func (c *sinkContext) Value(r connectortest.Record) string { return r.String() }

// Committed reads the finished part files. A file system has no order
// across files, so it checks the order of each split within every file
// itself and returns the files' records one after another.
func (c *sinkContext) Committed() ([]connectortest.Record, error) {
	var out []connectortest.Record
	err := filepath.WalkDir(c.dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasPrefix(d.Name(), ".") {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		last := map[int]int64{}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			r, err := connectortest.ParseRecord(sc.Text())
			if err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			if l, ok := last[r.Split]; ok && r.Seq <= l {
				return fmt.Errorf("%s: split %d seq %d after seq %d", p, r.Split, r.Seq, l)
			}
			last[r.Split] = r.Seq
			out = append(out, r)
		}
		return sc.Err()
	})
	if os.IsNotExist(err) {
		return nil, nil
	}
	return out, err
}

func (c *sinkContext) Pending() ([]string, error) {
	var out []string
	err := filepath.WalkDir(c.dir, func(p string, d os.DirEntry, err error) error {
		// In-progress files and compaction leftovers.
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), ".") {
			out = append(out, p)
		}
		if os.IsNotExist(err) {
			return nil
		}
		return err
	})
	return out, err
}

func (c *sinkContext) Close() error { return nil }

func TestSinkConformance(t *testing.T) {
	connectortest.TestSink(t, func(s connectortest.SinkSettings) (connectortest.SinkContext[string], error) {
		return &sinkContext{dir: filepath.Join(s.TempDir, "out")}, nil
	},
		// Part files have no order among each other; Committed checks the
		// order within each file.
		connectortest.Unordered())
}

// TestSinkConformanceCompacted runs the sink suite with compaction of
// small files: every part file is a candidate, merged by the global
// committer.
func TestSinkConformanceCompacted(t *testing.T) {
	connectortest.TestSink(t, func(s connectortest.SinkSettings) (connectortest.SinkContext[string], error) {
		return &sinkContext{dir: filepath.Join(s.TempDir, "out"), opts: []SinkOption{Compact(CompactStrategy{SizeThreshold: 16 << 10})}}, nil
	}, connectortest.Unordered())
}
