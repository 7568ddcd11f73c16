package cliui

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/jobstat"
)

func TestFormat(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := Count(n); got != want {
			t.Errorf("Count(%d) = %q, want %q", n, got, want)
		}
	}
	for n, want := range map[int64]string{10: "10 B", 2048: "2.0 KiB", 3 << 20: "3.0 MiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestTerminal(t *testing.T) {
	var b bytes.Buffer
	now := time.Now()
	p := Terminal(&b)
	p.Update(jobstat.Snapshot{State: "RUNNING", RecordsIn: 1500, InPerSec: 100, HasLag: true, Lag: 7,
		Last: &jobstat.Checkpoint{ID: 4, DurationMS: 12, SizeBytes: 2048, CompletedAt: now}})
	p.Done()
	got := b.String()
	for _, want := range []string{"\r\x1b[K", "RUNNING", "in 1,500 (100/s)", "checkpoint #4 12ms 2.0 KiB", "lag 7", "restarts 0"} {
		if !strings.Contains(got, want) {
			t.Errorf("terminal line %q lacks %q", got, want)
		}
	}
	if !strings.HasSuffix(got, "\n") {
		t.Error("Done did not end the line")
	}
}
