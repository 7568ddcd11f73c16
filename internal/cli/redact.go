package cli

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/sluice-io/sluice/internal/cliui"
	"github.com/sluice-io/sluice/internal/pipeline"
)

// redacted returns a copy of a whose stderr and HTTP responses hide the
// values r knows (nil: a unchanged). The terminal is detected before
// stderr is wrapped.
func (a *App) redacted(r *pipeline.Redactor) *App {
	if r == nil {
		return a
	}
	c := *a
	if c.Terminal == nil {
		term := false
		if f, ok := a.Stderr.(*os.File); ok {
			term = cliui.IsTerminal(f)
		}
		c.Terminal = &term
	}
	c.Stderr = r.Writer(a.Stderr)
	c.redact = r
	return &c
}

// redactHTTP hides r's values in the responses of h (headers and body).
// Each response is buffered whole, which suits /status and /metrics.
func redactHTTP(r *pipeline.Redactor, h http.Handler) http.Handler {
	if r == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b := &bufferedResponse{w: w, header: http.Header{}, code: http.StatusOK}
		h.ServeHTTP(b, req)
		for k, vs := range b.header {
			for i, v := range vs {
				vs[i] = r.String(v)
			}
			w.Header()[k] = vs
		}
		w.Header().Del("Content-Length") // the body's length may change
		w.WriteHeader(b.code)
		_, _ = w.Write(r.Bytes(b.body.Bytes()))
	})
}

type bufferedResponse struct {
	w      http.ResponseWriter
	header http.Header
	code   int
	wrote  bool
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) WriteHeader(code int) {
	if !b.wrote {
		b.code, b.wrote = code, true
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	b.wrote = true
	return b.body.Write(p)
}

// Unwrap lets http.ResponseController reach the connection (deadlines).
func (b *bufferedResponse) Unwrap() http.ResponseWriter { return b.w }

// summarizeJSON logs the summary as one record (--log-format json).
func (a *App) summarizeJSON(spec *pipeline.Spec, out *outcome, file, state string, last int64) {
	s := out.snap
	skipped, dead := recordsWithErrors(spec, out.res)
	attrs := []any{"job", spec.Name, "state", state,
		"records_in", s.RecordsIn, "records_out", s.RecordsOut,
		"records_skipped", skipped, "records_dead_lettered", dead,
		"checkpoints", s.Completed, "last_checkpoint", last, "restarts", s.Restarts,
		"uptime", s.Uptime.Round(time.Millisecond).String()}
	if out.savepoint != "" {
		attrs = append(attrs, "savepoint", out.savepoint)
	}
	resumable := out.stopped && out.savepoint != "" || spec.CheckpointDir != "" && (out.stopped || out.signalled || out.err != nil && last > 0)
	if resumable {
		from := spec.CheckpointDir
		if out.savepoint != "" {
			from = out.savepoint
		}
		attrs = append(attrs, "resume", fmt.Sprintf("sluice run --from %s %s", from, file))
	}
	level := slog.LevelInfo
	if out.err != nil && !out.signalled {
		level = slog.LevelError
		attrs = append(attrs, "error", firstLine(out.err.Error()))
	}
	out.jsonLog.Log(context.Background(), level, "job ended", attrs...)
}
