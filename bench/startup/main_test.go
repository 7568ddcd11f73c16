package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseInitTrace(t *testing.T) {
	stderr := `usage: loop [flags]
init internal/bytealg @0.006 ms, 0 ms clock, 0 bytes, 0 allocs
init runtime @0.040 ms, 0.051 ms clock, 0 bytes, 0 allocs
init github.com/x/y @2.5 ms, 1.25 ms clock, 1048576 bytes, 300 allocs
  -h	help
init github.com/x/y @4.0 ms, 0.25 ms clock, 1024 bytes, 2 allocs
`
	var s sample
	if err := parseInitTrace(stderr, &s); err != nil {
		t.Fatal(err)
	}
	if got, want := s.initMS, 0.051+1.25+0.25; abs(got-want) > 1e-9 {
		t.Errorf("initMS = %v, want %v", got, want)
	}
	if got, want := s.initBytes, int64(1048576+1024); got != want {
		t.Errorf("initBytes = %d, want %d", got, want)
	}
	if got, want := s.initAllocs, int64(302); got != want {
		t.Errorf("initAllocs = %d, want %d", got, want)
	}
	if got, want := s.mainAtMS, 4.25; abs(got-want) > 1e-9 {
		t.Errorf("mainAtMS = %v, want %v", got, want)
	}
	if got, want := s.pkgMS["github.com/x/y"], 1.5; abs(got-want) > 1e-9 {
		t.Errorf("pkgMS[x/y] = %v, want %v (both lines summed)", got, want)
	}
	if len(s.pkgMS) != 3 {
		t.Errorf("got %d packages, want 3: %v", len(s.pkgMS), s.pkgMS)
	}

	if err := parseInitTrace("no trace here\n", &s); err == nil {
		t.Error("parseInitTrace without init lines: no error")
	}
}

func TestReadLines(t *testing.T) {
	long := strings.Repeat("x", 10000) // longer than bufio's buffer
	n, first, err := readLines(strings.NewReader("a\n" + long + "\nb\n"))
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 {
		t.Errorf("lines = %d, want 3", n)
	}
	if first.IsZero() {
		t.Error("no time of the first line")
	}
	n, first, err = readLines(strings.NewReader("no newline"))
	if err != nil || n != 0 || !first.IsZero() {
		t.Errorf("readLines(no newline) = %d, %v, %v; want 0, zero time, nil", n, first, err)
	}
}

func TestCountOutputLines(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("part-0-0.jsonl", "1\n2\n")
	write("sub/part-1-0.jsonl", "3\n")
	write(".part-1-1.jsonl.inprogress", "4\n5\n") // in progress: not counted
	write(".staging/part-2-0.jsonl", "6\n")       // hidden directory: not counted
	write("_sluice/state", "7\n")                 // internal: not counted
	got, err := countOutputLines(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got != 3 {
		t.Errorf("countOutputLines = %d, want 3", got)
	}
}

func TestStat(t *testing.T) {
	v := []sample{{wall: 3 * time.Millisecond}, {wall: time.Millisecond}, {wall: 2 * time.Millisecond}, {wall: 10 * time.Millisecond}}
	if got, want := stat(v, func(s sample) float64 { return ms(s.wall) }), "2.5 [1.0–10.0]"; got != want {
		t.Errorf("stat = %q, want %q", got, want)
	}
	if got := stat(nil, func(s sample) float64 { return 0 }); got != "–" {
		t.Errorf("stat(nil) = %q, want –", got)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
