package print

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/sluice-io/sluice/connectortest/fakes"
	"github.com/sluice-io/sluice/sink"
)

func TestLinePrefix(t *testing.T) {
	tests := []struct {
		prefix  string
		subtask int
		par     int
		want    string
	}{
		{"", 0, 1, "42\n"},
		{"", 2, 3, "3> 42\n"},
		{"out", 0, 1, "out> 42\n"},
		{"out", 1, 2, "out:2> 42\n"},
	}
	for _, tt := range tests {
		var buf bytes.Buffer
		w, err := New[int](To(&buf), Prefix(tt.prefix)).CreateWriter(context.Background(), &fakes.InitContext{Subtask: tt.subtask, Parallel: tt.par})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Write(context.Background(), 42, sink.Meta{}); err != nil {
			t.Fatal(err)
		}
		if buf.String() != tt.want {
			t.Errorf("prefix %q subtask %d/%d: %q, want %q", tt.prefix, tt.subtask, tt.par, buf.String(), tt.want)
		}
	}
}

type failing struct{}

func (failing) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestWriteError(t *testing.T) {
	w, _ := New[int](To(failing{})).CreateWriter(context.Background(), &fakes.InitContext{})
	if err := w.Write(context.Background(), 1, sink.Meta{}); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Fatalf("Write = %v", err)
	}
}

func TestParallelWritersDoNotInterleave(t *testing.T) {
	const writers, lines = 4, 200
	var buf bytes.Buffer
	s := New[string](To(&buf))
	var wg sync.WaitGroup
	for i := range writers {
		w, _ := s.CreateWriter(context.Background(), &fakes.InitContext{Subtask: i, Parallel: writers})
		wg.Go(func() {
			for range lines {
				w.Write(context.Background(), strings.Repeat("x", 100), sink.Meta{})
			}
		})
	}
	wg.Wait()
	got := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(got) != writers*lines {
		t.Fatalf("%d lines, want %d", len(got), writers*lines)
	}
	for _, l := range got {
		if len(l) != len("1> ")+100 {
			t.Fatalf("mangled line %q", l)
		}
	}
}
