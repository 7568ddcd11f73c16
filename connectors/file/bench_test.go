package file

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// countSink counts records and bytes and keeps nothing.
type countSink struct{ n, bytes atomic.Int64 }

type countWriter struct {
	s        *countSink
	n, bytes int64
}

func (s *countSink) CreateWriter(context.Context, sink.InitContext) (sink.Writer[string], error) {
	return &countWriter{s: s}, nil
}

func (w *countWriter) Write(ctx context.Context, v string, _ sink.Meta) error {
	w.n++
	w.bytes += int64(len(v)) + 1
	return nil
}

func (w *countWriter) Flush(context.Context, bool) error { return nil }

func (w *countWriter) Close() error {
	w.s.n.Add(w.n)
	w.s.bytes.Add(w.bytes)
	return nil
}

// benchLine is a JSON line of about 100 bytes.
func benchLine(i int) string {
	return fmt.Sprintf(`{"id":%d,"user":"user-%04d","event":"click","page":"/p/%06d","score":%d.%02d}`, i, i%9973, i*7%1000003, i%100, i%97)
}

// writeBenchFiles writes files of about perFile bytes of JSON lines and
// returns their paths, total bytes and lines.
func writeBenchFiles(b testing.TB, dir string, files int, perFile int64) ([]string, int64, int) {
	b.Helper()
	var paths []string
	var total int64
	lines := 0
	for f := range files {
		p := filepath.Join(dir, fmt.Sprintf("in-%04d.jsonl", f))
		fh, err := os.Create(p)
		if err != nil {
			b.Fatal(err)
		}
		bw := bufio.NewWriterSize(fh, 1<<20)
		var n int64
		for n < perFile {
			l := benchLine(lines)
			lines++
			bw.WriteString(l)
			bw.WriteByte('\n')
			n += int64(len(l)) + 1
		}
		if err := errors.Join(bw.Flush(), fh.Close()); err != nil {
			b.Fatal(err)
		}
		paths = append(paths, p)
		total += n
	}
	return paths, total, lines
}

// plainRead reads every line of the files with a bufio.Reader, as
// strings, and returns the line count.
func plainRead(b *testing.B, paths []string) int {
	n := 0
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			b.Fatal(err)
		}
		br := bufio.NewReaderSize(f, defaultReadBuffer)
		for {
			line, err := br.ReadSlice('\n')
			if len(line) > 0 {
				_ = string(line[:len(line)-1])
				n++
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
		}
		f.Close()
	}
	return n
}

// BenchmarkRead compares a bounded job that reads text lines with the
// file source (parallelism 1, into a counting sink) with a plain bufio
// read of the same files in the same run. Compare the MB/s of the two
// sub-benchmarks; the parent logs the ratio.
func BenchmarkRead(b *testing.B) {
	dir := b.TempDir()
	paths, total, lines := writeBenchFiles(b, dir, 16, 4<<20)
	var plain, file float64
	b.Run("plain-bufio", func(b *testing.B) {
		b.SetBytes(total)
		b.ReportAllocs()
		for b.Loop() {
			if n := plainRead(b, paths); n != lines {
				b.Fatalf("read %d lines, want %d", n, lines)
			}
		}
		plain = mbps(b, total)
	})
	b.Run("file-source", func(b *testing.B) {
		b.SetBytes(total)
		b.ReportAllocs()
		for b.Loop() {
			cs := &countSink{}
			env := stream.New(stream.Parallelism(1), stream.Logger(stream.DiscardLogger()))
			stream.SinkTo(stream.FromSource(env, NewSource(TextLines(), []string{dir}), watermark.None[string](), "read"), sink.Sink[string](cs), "count")
			if _, err := env.Execute(context.Background(), "bench-read"); err != nil {
				b.Fatal(err)
			}
			if cs.n.Load() != int64(lines) {
				b.Fatalf("read %d lines, want %d", cs.n.Load(), lines)
			}
		}
		file = mbps(b, total)
	})
	if plain > 0 {
		b.Logf("read: plain %.0f MB/s, file source %.0f MB/s, ratio %.2f", plain, file, file/plain)
	}
}

// BenchmarkWrite compares a bounded job that writes text lines with the
// file sink (parallelism 1, from an in-memory generator, rolled at 64 MiB)
// with plain bufio writes of the same bytes into 16 files, each fsynced
// and closed, in the same run. The job's figure includes the generator and
// the exchange.
func BenchmarkWrite(b *testing.B) {
	const files, perFile = 16, 4 << 20
	var lines []string
	var total int64
	for total < files*perFile {
		l := benchLine(len(lines))
		lines = append(lines, l)
		total += int64(len(l)) + 1
	}
	perFileLines := (len(lines) + files - 1) / files
	var plain, file float64
	b.Run("plain-bufio", func(b *testing.B) {
		b.SetBytes(total)
		b.ReportAllocs()
		for b.Loop() {
			dir := b.TempDir()
			for f := 0; f*perFileLines < len(lines); f++ {
				fh, err := os.Create(filepath.Join(dir, strconv.Itoa(f)))
				if err != nil {
					b.Fatal(err)
				}
				bw := bufio.NewWriterSize(fh, 256<<10)
				for _, l := range lines[f*perFileLines : min((f+1)*perFileLines, len(lines))] {
					bw.WriteString(l)
					bw.WriteByte('\n')
				}
				if err := errors.Join(bw.Flush(), fh.Sync(), fh.Close()); err != nil {
					b.Fatal(err)
				}
			}
		}
		plain = mbps(b, total)
	})
	b.Run("file-sink", func(b *testing.B) {
		b.SetBytes(total)
		b.ReportAllocs()
		for b.Loop() {
			dir := b.TempDir()
			sk, err := NewRowSink(dir, LinesFormat(), WithBuckets(BasePathBuckets[string]()), Rolling(DefaultRollingPolicy{PartSize: perFile}))
			if err != nil {
				b.Fatal(err)
			}
			env := stream.New(stream.Parallelism(1), stream.Logger(stream.DiscardLogger()))
			gen := datagen.New(func(i int64) string { return lines[i] }, datagen.Count(int64(len(lines))))
			stream.SinkTo(stream.FromSource(env, gen, watermark.None[string](), "gen"), sk, "write")
			if _, err := env.Execute(context.Background(), "bench-write"); err != nil {
				b.Fatal(err)
			}
		}
		file = mbps(b, total)
	})
	if plain > 0 {
		b.Logf("write: plain %.0f MB/s, file sink %.0f MB/s, ratio %.2f", plain, file, file/plain)
	}
}

func mbps(b *testing.B, total int64) float64 {
	if b.N == 0 || b.Elapsed() == 0 {
		return 0
	}
	return float64(total) * float64(b.N) / b.Elapsed().Seconds() / 1e6
}

// TestRoundTrip1GB reads about SLUICE_FILE_ROUNDTRIP_MB (default 1024) MB
// of JSON lines spread over 4 MB files, writes them back with the file sink
// (parallelism 2, checkpoints every second) and checks that the output
// holds the same multiset of lines (compared by 64-bit FNV hashes), and
// logs the throughput. It takes disk space and minutes, so it runs only
// with SLUICE_FILE_ROUNDTRIP=1.
func TestRoundTrip1GB(t *testing.T) {
	if os.Getenv("SLUICE_FILE_ROUNDTRIP") != "1" {
		t.Skip("set SLUICE_FILE_ROUNDTRIP=1 (and optionally SLUICE_FILE_ROUNDTRIP_MB) to run the 1 GB round trip")
	}
	mb := 1024
	if v := os.Getenv("SLUICE_FILE_ROUNDTRIP_MB"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SLUICE_FILE_ROUNDTRIP_MB=%q: want a positive integer", v)
		}
		mb = n
	}
	in, out := t.TempDir(), t.TempDir()
	paths, total, lines := writeBenchFiles(t, in, max(mb/4, 1), 4<<20)
	t.Logf("%d files, %d bytes, %d lines", len(paths), total, lines)
	sk, err := NewRowSink(out, JSONLinesFormat[json.RawMessage](), PartSuffix(".jsonl"), WithBuckets(BasePathBuckets[json.RawMessage]()))
	if err != nil {
		t.Fatal(err)
	}
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(time.Second), stream.Logger(stream.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, NewSource(JSONLines[json.RawMessage](), []string{in}), watermark.None[json.RawMessage](), "read"), sk, "write")
	start := time.Now()
	res, err := env.Execute(t.Context(), "roundtrip")
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	t.Logf("copied in %v (%.0f MB/s), %d checkpoints", elapsed, float64(total)/elapsed.Seconds()/1e6, res.Checkpoints.Completed)
	want := hashLines(t, paths)
	var outPaths []string
	for _, f := range finishedFiles(t, out) {
		outPaths = append(outPaths, filepath.Join(out, f))
	}
	got := hashLines(t, outPaths)
	if len(got) != len(want) || !slices.Equal(got, want) {
		t.Fatalf("output has %d lines, input %d; multisets differ", len(got), len(want))
	}
	if h := hiddenFiles(t, out); len(h) > 0 {
		t.Errorf("in-progress files left: %v", h)
	}
}

// hashLines returns the sorted FNV-64a hashes of every line of the files.
func hashLines(t *testing.T, paths []string) []uint64 {
	t.Helper()
	var out []uint64
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			h := fnv.New64a()
			h.Write(sc.Bytes())
			out = append(out, h.Sum64())
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(out)
	return out
}
