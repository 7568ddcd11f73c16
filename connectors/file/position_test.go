package file

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/metrics"
)

// readWithPositions reads sp to its end with a splitReader configured
// with PositionAs and returns each record with the position it passed.
func readWithPositions[T any](t *testing.T, f Format[T], sp Split) (vs []T, pos []Position) {
	t.Helper()
	cfg := defaultSourceConfig()
	PositionAs(func(v T, p Position) T { pos = append(pos, p); return v }).applySource(&cfg)
	r := newSplitReader(f, &cfg, new(metrics.Counter))
	defer r.Close()
	if err := r.AddSplits([]Split{sp}); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		b, err := r.Fetch(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range b.Records {
			for _, c := range g.Records {
				vs = append(vs, c.vs...)
			}
		}
		if b.Recycle != nil {
			b.Recycle()
		}
		if len(b.Finished) > 0 {
			return vs, pos
		}
	}
	t.Fatal("split did not finish")
	return nil, nil
}

// TestPositionAs: every record passes PositionAs with its split, file and
// the byte offset of its line, in a format otherwise read in batches
// (text lines) and one read record by record (JSON lines), also from the
// middle of a file; a PositionAs of another record type or nil is a
// configuration error.
func TestPositionAs(t *testing.T) {
	p := filepath.Join(t.TempDir(), "in.jsonl")
	lines := []string{`{"a": 1}`, `{"a": 22}`, `{"a": 333}`, `{"a": 4444}`}
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var offsets []int64
	var off int64
	for _, l := range lines {
		offsets = append(offsets, off)
		off += int64(len(l)) + 1
	}
	for _, from := range []int{0, 1} {
		sp := Split{Path: p, End: -1, Offset: offsets[from]}
		check := func(n int, pos []Position) {
			t.Helper()
			if n != len(lines)-from || len(pos) != n {
				t.Fatalf("from line %d: %d records, %d positions", from, n, len(pos))
			}
			for i, ps := range pos {
				if want := (Position{Split: sp.SplitID(), File: p, Offset: offsets[from+i]}); ps != want {
					t.Errorf("from line %d: record %d at %+v, want %+v", from, i, ps, want)
				}
			}
		}
		text, pos := readWithPositions(t, TextLines(), sp)
		check(len(text), pos)
		js, pos := readWithPositions(t, JSONLines[map[string]any](), sp)
		check(len(js), pos)
	}

	if err := NewSource(TextLines(), []string{p}, PositionAs(func(v int, _ Position) int { return v })).Err(); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("PositionAs of another type: %v", err)
	}
	if err := NewSource(TextLines(), []string{p}, PositionAs[string](nil)).Err(); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("PositionAs(nil): %v", err)
	}
	if err := NewSource(TextLines(), []string{p}, PositionAs(func(v string, _ Position) string { return v })).Err(); err != nil {
		t.Errorf("PositionAs of the source's type: %v", err)
	}
}

// TestLineAt: the line that starts at an offset, in a plain and a gzipped
// file; 0 for a file that cannot be read.
func TestLineAt(t *testing.T) {
	dir := t.TempDir()
	data := "a\nbb\n\nccc\n"
	plain := filepath.Join(dir, "a.txt")
	if err := os.WriteFile(plain, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	zipped := filepath.Join(dir, "a.txt.gz")
	var zb bytes.Buffer
	zw := gzip.NewWriter(&zb)
	zw.Write([]byte(data))
	zw.Close()
	if err := os.WriteFile(zipped, zb.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{plain, zipped} {
		for off, want := range map[int64]int64{0: 1, 2: 2, 5: 3, 6: 4} {
			if got := LineAt(p, off); got != want {
				t.Errorf("LineAt(%s, %d) = %d, want %d", filepath.Base(p), off, got, want)
			}
		}
	}
	if got := LineAt(filepath.Join(dir, "gone"), 5); got != 0 {
		t.Errorf("LineAt of a missing file = %d, want 0", got)
	}
}
