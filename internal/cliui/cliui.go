// Package cliui renders a job's progress: one line rewritten in place on a
// terminal, plain log lines otherwise.
package cliui

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/sluice-io/sluice/internal/jobstat"
)

// IsTerminal reports whether f is a character device (a terminal).
func IsTerminal(f *os.File) bool {
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// Progress prints snapshots. Use it from one goroutine.
type Progress struct {
	w     io.Writer    // terminal mode
	log   *slog.Logger // plain mode
	dirty bool
}

// Terminal returns a Progress that rewrites one line of w.
func Terminal(w io.Writer) *Progress { return &Progress{w: w} }

// Plain returns a Progress that logs one line per update.
func Plain(l *slog.Logger) *Progress { return &Progress{log: l} }

// Update shows s.
func (p *Progress) Update(s jobstat.Snapshot) {
	if p == nil {
		return
	}
	if p.w != nil {
		fmt.Fprintf(p.w, "\r\x1b[K%s", Line(s, time.Now()))
		p.dirty = true
		return
	}
	args := []any{"state", s.State, "records_in", s.RecordsIn, "in_per_s", int64(s.InPerSec),
		"records_out", s.RecordsOut, "out_per_s", int64(s.OutPerSec), "checkpoints", s.Completed}
	if s.Last != nil {
		args = append(args, "last_checkpoint", s.Last.ID, "last_checkpoint_ms", s.Last.DurationMS, "last_checkpoint_bytes", s.Last.SizeBytes)
	}
	if s.HasLag {
		args = append(args, "lag", s.Lag)
	}
	args = append(args, "restarts", s.Restarts)
	p.log.Info("progress", args...)
}

// Done ends the progress line (terminal mode), so that what follows starts
// on a line of its own.
func (p *Progress) Done() {
	if p != nil && p.w != nil && p.dirty {
		fmt.Fprintln(p.w)
		p.dirty = false
	}
}

// Line renders s for a terminal.
func Line(s jobstat.Snapshot, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-9s in %s (%s/s)  out %s (%s/s)", s.State, Count(s.RecordsIn), Count(int64(s.InPerSec)),
		Count(s.RecordsOut), Count(int64(s.OutPerSec)))
	if s.Last != nil {
		fmt.Fprintf(&b, "  checkpoint #%d %dms %s %s ago", s.Last.ID, s.Last.DurationMS, Bytes(s.Last.SizeBytes),
			now.Sub(s.Last.CompletedAt).Round(time.Second))
	} else {
		b.WriteString("  no checkpoint yet")
	}
	if s.HasLag {
		fmt.Fprintf(&b, "  lag %s", Count(s.Lag))
	}
	fmt.Fprintf(&b, "  restarts %d", s.Restarts)
	return b.String()
}

// Count renders n with thousands separators.
func Count(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Bytes renders a size in B, KiB, MiB or GiB.
func Bytes(n int64) string {
	const k = 1024
	switch {
	case n < k:
		return fmt.Sprintf("%d B", n)
	case n < k*k:
		return fmt.Sprintf("%.1f KiB", float64(n)/k)
	case n < k*k*k:
		return fmt.Sprintf("%.1f MiB", float64(n)/(k*k))
	}
	return fmt.Sprintf("%.1f GiB", float64(n)/(k*k*k))
}
