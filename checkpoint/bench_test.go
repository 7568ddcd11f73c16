package checkpoint

import (
	"context"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// benchSnapshot is 1000 tasks with one 10 KiB blob each.
func benchSnapshot(id int64) (*Snapshot, int64) {
	const tasks, blob = 1000, 10 << 10
	s := &Snapshot{ID: id, JobName: "bench", Timestamp: t0,
		Enumerators: map[string][]byte{"src": make([]byte, 1024)},
		Properties:  map[string]string{"parallelism/src": fmt.Sprint(tasks)}}
	s.Tasks = make([]TaskState, tasks)
	for i := range s.Tasks {
		b := make([]byte, blob)
		for j := range b {
			b[j] = byte(i + j)
		}
		s.Tasks[i] = TaskState{Vertex: "src", Subtask: i, Parallelism: tasks,
			Parts: map[string][][]byte{"splits": {b}, "writer": {}}}
	}
	return s, tasks * blob
}

// BenchmarkSaveLoad saves a checkpoint to a local directory (with fsync)
// and loads it back.
func BenchmarkSaveLoad(b *testing.B) {
	ctx := context.Background()
	l, err := NewLocal(b.TempDir(), Retain(1))
	if err != nil {
		b.Fatal(err)
	}
	s, size := benchSnapshot(0)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		s.ID++
		info, err := l.Save(ctx, s)
		if err != nil {
			b.Fatal(err)
		}
		if _, _, err := Load(ctx, info.Path); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSave(b *testing.B) {
	ctx := context.Background()
	l, err := NewLocal(b.TempDir(), Retain(1))
	if err != nil {
		b.Fatal(err)
	}
	s, size := benchSnapshot(0)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		s.ID++
		if _, err := l.Save(ctx, s); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLoad(b *testing.B) {
	ctx := context.Background()
	l, err := NewLocal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	s, size := benchSnapshot(1)
	info := mustSave(b, l, s)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Load(ctx, info.Path); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncode measures the format alone, without the file system.
func BenchmarkEncode(b *testing.B) {
	s, size := benchSnapshot(1)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		cw := &crcWriter{w: io.Discard}
		e := encoder{w: &discardStrings{cw}}
		if err := e.snapshot(context.Background(), s); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMemorySaveLatest(b *testing.B) {
	ctx := context.Background()
	m := NewMemory(Retain(1))
	s, size := benchSnapshot(0)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		s.ID++
		if _, err := m.Save(ctx, s); err != nil {
			b.Fatal(err)
		}
		if _, _, err := m.Latest(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

type discardStrings struct{ w io.Writer }

func (d *discardStrings) Write(p []byte) (int, error)       { return d.w.Write(p) }
func (d *discardStrings) WriteString(s string) (int, error) { return io.WriteString(d.w, s) }

// BenchmarkLoadBaseline reads the same state file with os.ReadFile and
// checksums it: the floor Load is measured against.
func BenchmarkLoadBaseline(b *testing.B) {
	l, err := NewLocal(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	s, size := benchSnapshot(1)
	info := mustSave(b, l, s)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		data, err := os.ReadFile(filepath.Join(info.Path, stateFileName))
		if err != nil {
			b.Fatal(err)
		}
		crc32.Checksum(data, castagnoli)
	}
}
