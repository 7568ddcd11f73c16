// Package httpstatus serves a running job's metrics and status over HTTP:
//
//	GET  /metrics     Prometheus text format (version 0.0.4)
//	GET  /status      JSON: job state, the last checkpoints as they completed, rates, per-subtask records
//	GET  /healthz     200 while the process serves (liveness)
//	GET  /readyz      200 while the job runs and checkpoints complete within a bound, else 503 with a JSON reason
//	POST /savepoints  take a savepoint (only with a token; see Savepoints)
//
// Metric names are Flink's (numRecordsIn, lastCheckpointDuration, …) under
// a scope prefix as Flink's Prometheus reporter writes them:
// sluice_job_<name> for job metrics, sluice_operator_<name> for operator
// metrics, with the labels job_name, operator_name and subtask_index
// ("coordinator" for an operator's coordinator). Counters are exposed as
// counters, gauges as gauges.
//
// The server listens on loopback unless given a host. With a token,
// /metrics, /status and every write action require "Authorization: Bearer
// <token>" (the scheme in any case). /healthz and /readyz are always open:
// Kubernetes probes cannot send a secret, and they tell no more than
// whether the job is up (as Flink's and Kafka Connect's health endpoints).
// Write actions cannot be enabled without a token, and refuse cross-site
// browser requests (Origin, Sec-Fetch-Site) and form content types.
//
// The server bounds what clients can hold: request headers must arrive
// within ReadHeaderTimeout, idle keep-alive connections are closed after
// IdleTimeout, and at most MaxConnections connections are open at once
// (further ones wait in the listen backlog), so idle or slow clients cannot
// exhaust the process's file descriptors.
package httpstatus

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/internal/jobstat"
	"github.com/sluice-io/sluice/metrics"
)

// Prefix starts every exported metric name.
const Prefix = "sluice"

// ErrWriteNeedsToken is returned by Handler when write actions are asked
// for without a token.
var ErrWriteNeedsToken = errors.New("write actions (POST /savepoints) need a bearer token")

// DefaultSavepointRetain is how many savepoints taken through POST
// /savepoints are kept by default.
const DefaultSavepointRetain = 5

// Option configures Handler.
type Option interface{ apply(*handlerConfig) }

type optionFunc func(*handlerConfig)

func (f optionFunc) apply(c *handlerConfig) { f(c) }

type handlerConfig struct {
	token     string
	take      func(context.Context) (checkpoint.Info, error)
	retain    int
	spTimeout time.Duration
	readyAge  time.Duration
	log       *slog.Logger
}

// Token requires "Authorization: Bearer <token>" on every request but the
// probes. Default: none (then write actions cannot be enabled).
func Token(token string) Option { return optionFunc(func(c *handlerConfig) { c.token = token }) }

// Savepoints enables POST /savepoints: take takes a savepoint of the
// running job (into the directory the operator configured; a request cannot
// choose it), and the handler answers {"id": …, "path": …}. Of the
// savepoints taken through the endpoint, the newest retain are kept and
// older ones deleted (retain <= 0 means DefaultSavepointRetain); savepoints
// written otherwise (on stop, by other runs) are never deleted. A request
// waits for its savepoint up to timeout (default 10 minutes). Default:
// disabled. It needs Token.
func Savepoints(take func(context.Context) (checkpoint.Info, error), retain int, timeout time.Duration) Option {
	return optionFunc(func(c *handlerConfig) { c.take, c.retain, c.spTimeout = take, retain, timeout })
}

// ReadyCheckpointAge makes /readyz fail when no checkpoint completed for
// longer than d (counted from the job's start before the first one).
// Default 0: /readyz only checks that the job runs.
func ReadyCheckpointAge(d time.Duration) Option {
	return optionFunc(func(c *handlerConfig) { c.readyAge = d })
}

// Logger logs savepoint pruning. Default: discard.
func Logger(l *slog.Logger) Option { return optionFunc(func(c *handlerConfig) { c.log = l }) }

// Handler returns the endpoint's handler. view may return nil until the
// job runs (then /status and /readyz answer 503). It fails with
// ErrWriteNeedsToken if Savepoints is given without Token.
func Handler(reg *metrics.Registry, view func() *jobstat.View, opts ...Option) (http.Handler, error) {
	c := handlerConfig{log: slog.New(slog.DiscardHandler), spTimeout: 10 * time.Minute}
	for _, o := range opts {
		o.apply(&c)
	}
	if c.take != nil && c.token == "" {
		return nil, ErrWriteNeedsToken
	}
	if c.retain <= 0 {
		c.retain = DefaultSavepointRetain
	}
	protected := http.NewServeMux()
	if c.take != nil {
		sp := &savepoints{take: c.take, retain: c.retain, timeout: c.spTimeout, log: c.log}
		protected.Handle("POST /savepoints", writeAction(http.HandlerFunc(sp.serve)))
	}
	protected.HandleFunc("GET /metrics", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		_ = WriteMetrics(w, reg.Snapshot())
	})
	protected.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		v := view()
		if v == nil {
			http.Error(w, "job not started", http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, http.StatusOK, v.Current(time.Now()))
	})

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		v := view()
		if v == nil {
			writeJSON(w, http.StatusServiceUnavailable, jobstat.Readiness{Reason: "the job has not started"})
			return
		}
		r := v.Ready(time.Now(), c.readyAge)
		code := http.StatusOK
		if !r.Ready {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, r)
	})
	if c.token == "" {
		mux.Handle("/", protected)
		return mux, nil
	}
	want := []byte(c.token)
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !bearer(r, want) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sluice"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		protected.ServeHTTP(w, r)
	}))
	return mux, nil
}

// bearer reports whether r carries "Authorization: Bearer <want>"; the
// scheme is case-insensitive (RFC 9110, 11.1).
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

// writeAction guards a state-changing handler against cross-site browser
// requests: a cross-origin Origin or Sec-Fetch-Site is refused (403), and
// so is a body of a type an HTML form can send (415; only
// application/json, or no body type at all, is taken). A browser cannot
// send the bearer token cross-site either; this is a second wall.
func writeAction(h http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "cross-origin request refused", http.StatusForbidden)
	}))
	return cop.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if o := r.Header.Get("Origin"); o == "null" {
			http.Error(w, "cross-origin request refused", http.StatusForbidden)
			return
		}
		if ct := r.Header.Get("Content-Type"); ct != "" {
			if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
				http.Error(w, "Content-Type must be application/json", http.StatusUnsupportedMediaType)
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
}

// savepoints serves POST /savepoints and prunes what it wrote.
type savepoints struct {
	take    func(context.Context) (checkpoint.Info, error)
	retain  int
	timeout time.Duration
	log     *slog.Logger

	mu      sync.Mutex
	written []string // paths, oldest first
}

func (s *savepoints) serve(w http.ResponseWriter, r *http.Request) {
	// A savepoint may take longer than the server's read and write
	// timeouts; the read deadline would cancel r.Context() when it passes.
	rc, deadline := http.NewResponseController(w), time.Now().Add(s.timeout+10*time.Second)
	_ = rc.SetReadDeadline(deadline)
	_ = rc.SetWriteDeadline(deadline)
	ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
	defer cancel()
	info, err := s.take(ctx)
	if err != nil {
		http.Error(w, "savepoint failed: "+err.Error(), http.StatusConflict)
		return
	}
	pruned := s.prune(info.Path)
	writeJSON(w, http.StatusOK, struct {
		ID     int64    `json:"id"`
		Path   string   `json:"path"`
		Pruned []string `json:"pruned,omitempty"`
	}{info.ID, info.Path, pruned})
}

// prune records path and deletes the savepoints written before the newest
// retain. It deletes only directories named savepoint-<id>.
func (s *savepoints) prune(path string) (pruned []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.written = append(s.written, path)
	for len(s.written) > s.retain {
		old := s.written[0]
		s.written = s.written[1:]
		if !strings.HasPrefix(filepath.Base(old), "savepoint-") {
			continue
		}
		if err := os.RemoveAll(old); err != nil {
			s.log.Warn("could not delete an old savepoint", "path", old, "error", err)
			continue
		}
		s.log.Info("deleted an old savepoint (savepoint retention)", "path", old, "retain", s.retain)
		pruned = append(pruned, old)
	}
	return pruned
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

// ServerOption configures Start.
type ServerOption interface{ apply(*serverConfig) }

type serverOptionFunc func(*serverConfig)

func (f serverOptionFunc) apply(c *serverConfig) { f(c) }

type serverConfig struct {
	readHeader, read, write, idle time.Duration
	maxConns                      int
}

// Server defaults.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 10 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultMaxConnections    = 64
)

// Timeouts sets the server's timeouts: for the request headers (from the
// connection's start or its last request), the whole request, writing the
// response (POST /savepoints extends its own), and idle keep-alive
// connections. Zero keeps a default (DefaultReadHeaderTimeout, …).
func Timeouts(readHeader, read, write, idle time.Duration) ServerOption {
	return serverOptionFunc(func(c *serverConfig) {
		c.readHeader = cmpOr(readHeader, c.readHeader)
		c.read = cmpOr(read, c.read)
		c.write = cmpOr(write, c.write)
		c.idle = cmpOr(idle, c.idle)
	})
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// MaxConnections caps the open connections; more wait in the listen
// backlog until one closes. Default DefaultMaxConnections; n <= 0 keeps it.
func MaxConnections(n int) ServerOption {
	return serverOptionFunc(func(c *serverConfig) {
		if n > 0 {
			c.maxConns = n
		}
	})
}

// Server is a running endpoint.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// Start listens on addr (see ListenAddr) and serves h.
func Start(addr string, h http.Handler, opts ...ServerOption) (*Server, error) {
	c := serverConfig{readHeader: DefaultReadHeaderTimeout, read: DefaultReadTimeout, write: DefaultWriteTimeout,
		idle: DefaultIdleTimeout, maxConns: DefaultMaxConnections}
	for _, o := range opts {
		o.apply(&c)
	}
	ln, err := net.Listen("tcp", ListenAddr(addr))
	if err != nil {
		return nil, fmt.Errorf("http endpoint: %w", err)
	}
	lim := &limitListener{Listener: ln, sem: make(chan struct{}, c.maxConns), closed: make(chan struct{})}
	s := &Server{srv: &http.Server{Handler: h, ReadHeaderTimeout: c.readHeader, ReadTimeout: c.read, WriteTimeout: c.write,
		IdleTimeout: c.idle, MaxHeaderBytes: 64 << 10}, ln: lim, done: make(chan error, 1)}
	go func() { s.done <- s.srv.Serve(lim) }()
	return s, nil
}

// Addr returns the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close shuts the server down, waiting for requests in flight up to ctx;
// then it closes the connections still open.
func (s *Server) Close(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if err != nil {
		_ = s.srv.Close()
	}
	if serr := <-s.done; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// limitListener accepts a connection only while fewer than cap(sem) are
// open (as golang.org/x/net/netutil.LimitListener).
type limitListener struct {
	net.Listener
	sem       chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.closed) })
	return err
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
