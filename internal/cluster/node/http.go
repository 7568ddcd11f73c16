package node

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// Endpoint is the HTTP endpoint of a node, served on every node, standbys
// included:
//
//	GET /healthz  200 while the process serves: {"status","node","role"}
//	GET /readyz   a standby: 200; the leader: its job's readiness (503
//	              until the job runs); a node without a session: 503
//	GET /metrics  the node's metrics (Metrics.WritePrometheus), then, on
//	              the leader, its job's metrics, and on a worker the
//	              metrics of the leader's subtasks it runs
//	GET /status   the node's Status as JSON; on the leader with "job": the
//	              job's status
//
// Every other request goes to the leader's job handler (POST /savepoints,
// when enabled); a node that does not lead answers 503 naming the leader it
// knows. With a token, /metrics and /status need "Authorization: Bearer
// <token>" (the job handler checks its own); the probes are open, as in
// package httpstatus.
type Endpoint struct {
	m     *Metrics
	token []byte
	job   atomic.Pointer[http.Handler]
	work  atomic.Pointer[func(io.Writer) error]
}

// EndpointOption configures NewEndpoint.
type EndpointOption func(*Endpoint)

// EndpointToken requires "Authorization: Bearer <token>" on /metrics and
// /status. Default: none.
func EndpointToken(token string) EndpointOption {
	return func(e *Endpoint) {
		if token != "" {
			e.token = []byte(token)
		}
	}
}

// NewEndpoint returns the endpoint of the node whose metrics are m.
func NewEndpoint(m *Metrics, opts ...EndpointOption) *Endpoint {
	e := &Endpoint{m: m}
	for _, o := range opts {
		o(e)
	}
	return e
}

// SetJob serves h — the handler of the job this node runs as leader (as
// httpstatus.Handler builds it) — until the returned function is called.
func (e *Endpoint) SetJob(h http.Handler) (clear func()) {
	p := &h
	e.job.Store(p)
	return func() { e.job.CompareAndSwap(p, nil) }
}

// SetWorkerMetrics appends what write writes — the Prometheus text of the
// subtasks this node runs for another leader — to /metrics until the
// returned function is called.
func (e *Endpoint) SetWorkerMetrics(write func(io.Writer) error) (clear func()) {
	p := &write
	e.work.Store(p)
	return func() { e.work.CompareAndSwap(p, nil) }
}

func (e *Endpoint) jobHandler() http.Handler {
	if p := e.job.Load(); p != nil {
		return *p
	}
	return nil
}

// ServeHTTP serves the endpoint.
func (e *Endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	st := e.m.Status()
	job := e.jobHandler()
	switch {
	case r.URL.Path == "/healthz" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "node": st.Node, "role": st.Role})
		return
	case r.URL.Path == "/readyz" && r.Method == http.MethodGet:
		switch {
		case st.Role == RoleLeader && job != nil:
			job.ServeHTTP(w, r)
		case st.Role == RoleLeader:
			writeJSON(w, http.StatusServiceUnavailable, readiness{Role: st.Role, Reason: "leading; the job has not started"})
		case st.Role == RoleStandby:
			writeJSON(w, http.StatusOK, readiness{Ready: true, Role: st.Role, Leader: st.Leader})
		default:
			writeJSON(w, http.StatusServiceUnavailable, readiness{Role: st.Role, Reason: "not joined to the cluster (no coordination session)"})
		}
		return
	}
	if (r.URL.Path == "/metrics" || r.URL.Path == "/status") && r.Method == http.MethodGet {
		if e.token != nil && !bearer(r, e.token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if r.URL.Path == "/metrics" {
			e.serveMetrics(w, r, job)
		} else {
			e.serveStatus(w, r, st, job)
		}
		return
	}
	if job != nil {
		job.ServeHTTP(w, r)
		return
	}
	msg := "this node does not lead the cluster"
	if st.Leader != "" {
		msg += "; the leader is " + st.Leader
	}
	http.Error(w, msg, http.StatusServiceUnavailable)
}

type readiness struct {
	Ready  bool   `json:"ready"`
	Role   string `json:"role"`
	Leader string `json:"leader,omitempty"`
	Reason string `json:"reason,omitempty"`
}

func (e *Endpoint) serveMetrics(w http.ResponseWriter, r *http.Request, job http.Handler) {
	var b bytes.Buffer
	_ = e.m.WritePrometheus(&b)
	if job != nil {
		if rec := record(job, r); rec.code == http.StatusOK {
			b.Write(rec.body.Bytes())
		}
	}
	if p := e.work.Load(); p != nil {
		var wb bytes.Buffer
		if (*p)(&wb) == nil {
			b.Write(wb.Bytes())
		}
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = w.Write(b.Bytes())
}

func (e *Endpoint) serveStatus(w http.ResponseWriter, r *http.Request, st Status, job http.Handler) {
	out := struct {
		Status
		Job json.RawMessage `json:"job,omitempty"`
	}{Status: st}
	if job != nil && st.Role == RoleLeader {
		if rec := record(job, r); rec.code == http.StatusOK && json.Valid(rec.body.Bytes()) {
			out.Job = json.RawMessage(bytes.TrimSpace(rec.body.Bytes()))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// recorder is a minimal in-memory http.ResponseWriter.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(code int)        { r.code = code }

// record serves req with h into memory.
func record(h http.Handler, req *http.Request) *recorder {
	rec := &recorder{header: http.Header{}, code: http.StatusOK}
	h.ServeHTTP(rec, req)
	return rec
}

// bearer reports whether r carries "Authorization: Bearer <want>" (the
// scheme in any case).
func bearer(r *http.Request, want []byte) bool {
	scheme, cred, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	return ok && strings.EqualFold(scheme, "Bearer") && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(cred)), want) == 1
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
