package s3

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-io/sluice/connectors/file"
	"github.com/sluice-io/sluice/connectortest"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/source"
)

// sinkContext writes test records as text lines to s3://<bucket>/out.
type sinkContext struct {
	c      *Client
	bucket string
}

func (s *sinkContext) Sink() (sink.Sink[string], error) {
	return file.NewRowSink("out", file.LinesFormat(), file.WithObjectStore(s.c.Store(s.bucket)),
		file.WithBuckets(file.BasePathBuckets[string]()), file.Rolling(file.DefaultRollingPolicy{PartSize: 4 << 10}))
}

func (s *sinkContext) Value(r connectortest.Record) string { return r.String() }

// Committed reads the completed objects, checking the order of each split
// within every object.
func (s *sinkContext) Committed() ([]connectortest.Record, error) {
	var out []connectortest.Record
	objs := listObjects(panicTB{}, s.c, s.bucket, "out/")
	for _, k := range slices.Sorted(mapsKeys(objs)) {
		last := map[int]int64{}
		sc := bufio.NewScanner(bytes.NewReader(objs[k]))
		for sc.Scan() {
			r, err := connectortest.ParseRecord(sc.Text())
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			if l, ok := last[r.Split]; ok && r.Seq <= l {
				return nil, fmt.Errorf("%s: split %d seq %d after seq %d", k, r.Split, r.Seq, l)
			}
			last[r.Split] = r.Seq
			out = append(out, r)
		}
	}
	return out, nil
}

// Pending lists the unfinished multipart uploads.
func (s *sinkContext) Pending() ([]string, error) {
	return uploads(panicTB{}, s.c, s.bucket), nil
}

func (s *sinkContext) Close() error { return nil }

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// panicTB turns the helpers' t.Fatal into a panic for the suite's
// callbacks, which return errors instead (only Fatalf and Helper are used).
type panicTB struct{ testing.TB }

func (panicTB) Helper()                      {}
func (panicTB) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }
func (panicTB) Fatal(args ...any)            { panic(fmt.Sprint(args...)) }

// TestSinkConformance runs the sink suite on the file sink writing to
// versitygw through a Store.
func TestSinkConformance(t *testing.T) {
	c, _ := testClient(t)
	n := 0
	connectortest.TestSink(t, func(s connectortest.SinkSettings) (connectortest.SinkContext[string], error) {
		n++
		bucket := fmt.Sprintf("%s-sink-%d", strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(path.Base(s.TempDir))), n)
		if len(bucket) > 60 {
			bucket = bucket[len(bucket)-60:]
		}
		bucket = strings.Trim(bucket, "-")
		if err := c.CreateBucket(context.Background(), bucket); err != nil {
			return nil, err
		}
		return &sinkContext{c: c, bucket: bucket}, nil
	}, connectortest.Unordered())
}

// sourceContext keeps each test split in an object of its own, rewritten
// whole at every Write (objects cannot be appended to).
type sourceContext struct {
	c      *Client
	bucket string
	mu     sync.Mutex
	data   map[int][]byte
}

func (s *sourceContext) Write(split int, rs []connectortest.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rs {
		s.data[split] = append(s.data[split], r.String()+"\n"...)
	}
	putObject(panicTB{}, s.c, s.bucket, fmt.Sprintf("in/split-%03d.txt", split), s.data[split])
	return nil
}

func (s *sourceContext) Source() (source.Source[string, file.Split, file.EnumState], error) {
	src := file.NewSource(file.TextLines(), []string{"s3://" + s.bucket + "/in"}, file.WithSourceFS(s.c.FS()))
	return src, src.Err()
}

func (s *sourceContext) Record(v string) (connectortest.Record, error) {
	return connectortest.ParseRecord(v)
}

func (s *sourceContext) Close() error { return nil }

// TestSourceConformance runs the bounded source cases on s3:// objects,
// one per test split (ordered); resumed splits continue at their byte
// offset with a ranged GET.
func TestSourceConformance(t *testing.T) {
	c, _ := testClient(t)
	n := 0
	connectortest.TestSource(t, func(s connectortest.SourceSettings) (connectortest.SourceContext[string, file.Split, file.EnumState], error) {
		if !s.Bounded {
			return nil, fmt.Errorf("objects cannot be appended to; unbounded sources are tested on the local file system: %w", errUnsupported)
		}
		n++
		bucket := fmt.Sprintf("src-%d-%d", n, len(s.TempDir))
		bucket = strings.ToLower(bucket) + "-" + randSuffix()
		if err := c.CreateBucket(context.Background(), bucket); err != nil {
			return nil, err
		}
		return &sourceContext{c: c, bucket: bucket, data: map[int][]byte{}}, nil
	})
}
