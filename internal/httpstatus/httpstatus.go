// Package httpstatus serves a running job's metrics and status over HTTP:
//
//	GET /metrics   Prometheus text format (version 0.0.4)
//	GET /status    JSON: job state, checkpoints (duration, size), per-subtask records
//
// Metric names are Flink's (numRecordsIn, lastCheckpointDuration, …) under
// a scope prefix as Flink's Prometheus reporter writes them:
// sluice_job_<name> for job metrics, sluice_operator_<name> for operator
// metrics, with the labels job_name, operator_name and subtask_index
// ("coordinator" for an operator's coordinator). Counters are exposed as
// counters, gauges as gauges.
//
// The server listens on loopback unless given a host, and with a token it
// requires "Authorization: Bearer <token>" on every request.
package httpstatus

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-io/sluice/internal/jobstat"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/runtime/checkpoint"
)

// Prefix starts every exported metric name.
const Prefix = "sluice"

// Handler returns the endpoint's handler. view may be nil until the job
// runs (then /status answers 503). token, if not empty, is required as a
// bearer token. With savepoint set, POST /savepoints takes a savepoint of
// the running job (into the directory the operator configured; a request
// cannot choose it) and answers {"id": …, "path": …}.
func Handler(reg *metrics.Registry, view func() *jobstat.View, token string, savepoint func(context.Context) (checkpoint.Info, error)) http.Handler {
	mux := http.NewServeMux()
	if savepoint != nil {
		mux.HandleFunc("POST /savepoints", func(w http.ResponseWriter, r *http.Request) {
			info, err := savepoint(r.Context())
			if err != nil {
				http.Error(w, "savepoint failed: "+err.Error(), http.StatusConflict)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(struct {
				ID   int64  `json:"id"`
				Path string `json:"path"`
			}{info.ID, info.Path})
		})
	}
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_ = WriteMetrics(w, reg.Snapshot())
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		v := view()
		if v == nil {
			http.Error(w, "job not started", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(v.Current(time.Now()))
	})
	if token == "" {
		return mux
	}
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// family is one metric name with its samples.
type family struct {
	name    string
	gauge   bool
	help    string
	samples []metrics.Sample
}

// WriteMetrics writes samples in the Prometheus text format.
func WriteMetrics(w io.Writer, samples []metrics.Sample) error {
	fams := map[string]*family{}
	for _, s := range samples {
		scope := "job"
		if s.Label("operator") != "" {
			scope = "operator"
		}
		name := Prefix + "_" + scope + "_" + sanitize(s.Name)
		f := fams[name]
		if f == nil {
			f = &family{name: name, gauge: s.Gauge, help: fmt.Sprintf("Flink metric %s (%s scope).", s.Name, scope)}
			fams[name] = f
		}
		if f.gauge != s.Gauge {
			continue // one name, two kinds: keep the first kind (a registration bug elsewhere)
		}
		f.samples = append(f.samples, s)
	}
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		f := fams[n]
		typ := "counter"
		if f.gauge {
			typ = "gauge"
		}
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", f.name, f.help, f.name, typ)
		seen := map[string]bool{}
		for _, s := range f.samples {
			labels := labelString(s.Labels)
			if seen[labels] {
				continue
			}
			seen[labels] = true
			fmt.Fprintf(&b, "%s%s %s\n", f.name, labels, strconv.FormatInt(s.Value, 10))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

var labelNames = map[string]string{"job": "job_name", "operator": "operator_name", "subtask": "subtask_index"}

func labelString(ls []metrics.Label) string {
	if len(ls) == 0 {
		return ""
	}
	type kv struct{ k, v string }
	var out []kv
	seen := map[string]bool{}
	for _, l := range ls {
		k := labelNames[l.Key]
		if k == "" {
			k = sanitize(l.Key)
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, kv{k, l.Value})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].k < out[j].k })
	var b strings.Builder
	b.WriteByte('{')
	for i, l := range out {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(l.k)
		b.WriteString(`="`)
		b.WriteString(escape(l.v))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

func escape(v string) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(v)
}

// sanitize maps a name onto [a-zA-Z_:][a-zA-Z0-9_:]*.
func sanitize(n string) string {
	var b strings.Builder
	for i, r := range n {
		switch {
		case r == '_' || r == ':' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
			b.WriteRune(r)
		case r >= '0' && r <= '9' && i > 0:
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "_"
	}
	return b.String()
}

// ListenAddr completes addr: a bare port ("9249") or ":port" listens on
// 127.0.0.1.
func ListenAddr(addr string) string {
	if !strings.Contains(addr, ":") {
		addr = ":" + addr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "" {
		return addr
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// IsLoopback reports whether addr's host is a loopback address or
// "localhost".
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Server is a running endpoint.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// Start listens on addr (see ListenAddr) and serves h.
func Start(addr string, h http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", ListenAddr(addr))
	if err != nil {
		return nil, fmt.Errorf("http endpoint: %w", err)
	}
	s := &Server{srv: &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}, ln: ln, done: make(chan error, 1)}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Addr returns the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close shuts the server down, waiting for requests in flight up to ctx.
func (s *Server) Close(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if serr := <-s.done; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}
