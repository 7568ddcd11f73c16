package httpstatus

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/internal/jobstat"
	"github.com/sluice-io/sluice/metrics"
)

// serve starts h on loopback and returns its base URL.
func serve(t *testing.T, h http.Handler, opts ...ServerOption) (*Server, string) {
	t.Helper()
	srv, err := Start("127.0.0.1:0", h, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	return srv, "http://" + srv.Addr()
}

// do sends one request on a fresh connection and returns the status and body.
func do(t *testing.T, method, url string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

type statusJob struct {
	reg *metrics.Registry
	mu  sync.Mutex
	st  engine.Status
}

func (f *statusJob) Status() engine.Status      { f.mu.Lock(); defer f.mu.Unlock(); return f.st }
func (f *statusJob) Metrics() *metrics.Registry { return f.reg }

func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	h, err := Handler(metrics.NewRegistry(), func() *jobstat.View { return nil }, Token("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	_, base := serve(t, h)
	for auth, want := range map[string]int{
		"Bearer s3cret": 200, "bearer s3cret": 200, "BEARER s3cret": 200, "bEaReR  s3cret": 200,
		"Basic s3cret": 401, "Bearer s3cre": 401, "Bearers3cret": 401, "s3cret": 401, "": 401,
	} {
		if code, _ := do(t, "GET", base+"/metrics", map[string]string{"Authorization": auth}); code != want {
			t.Errorf("Authorization %q: got %d, want %d", auth, code, want)
		}
	}
}

func TestWriteActionsNeedAToken(t *testing.T) {
	take := func(context.Context) (checkpoint.Info, error) { return checkpoint.Info{}, nil }
	if _, err := Handler(metrics.NewRegistry(), func() *jobstat.View { return nil }, Savepoints(take, 0, 0)); !errors.Is(err, ErrWriteNeedsToken) {
		t.Fatalf("savepoints without a token: got %v, want ErrWriteNeedsToken", err)
	}
}

// fakeSavepoints writes savepoint-<id> directories under dir.
func fakeSavepoints(t *testing.T, dir string) func(context.Context) (checkpoint.Info, error) {
	var mu sync.Mutex
	id := int64(0)
	return func(context.Context) (checkpoint.Info, error) {
		mu.Lock()
		defer mu.Unlock()
		id++
		p := filepath.Join(dir, fmt.Sprintf("savepoint-%d", id))
		if err := os.MkdirAll(p, 0o700); err != nil {
			return checkpoint.Info{}, err
		}
		return checkpoint.Info{ID: id, Kind: checkpoint.Savepoint, Path: p}, nil
	}
}

func TestSavepointsRefuseCrossSiteRequests(t *testing.T) {
	dir := t.TempDir()
	h, err := Handler(metrics.NewRegistry(), func() *jobstat.View { return nil }, Token("tok"), Savepoints(fakeSavepoints(t, dir), 100, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	srv, base := serve(t, h)
	auth := "Bearer tok"
	for _, c := range []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"no token", map[string]string{}, 401},
		{"cross-site Origin", map[string]string{"Authorization": auth, "Origin": "http://evil.example"}, 403},
		{"cross-site Origin, same port", map[string]string{"Authorization": auth, "Origin": "http://evil.example:" + port(srv.Addr())}, 403},
		{"Origin null", map[string]string{"Authorization": auth, "Origin": "null"}, 403},
		{"Sec-Fetch-Site cross-site", map[string]string{"Authorization": auth, "Sec-Fetch-Site": "cross-site"}, 403},
		{"form post", map[string]string{"Authorization": auth, "Content-Type": "application/x-www-form-urlencoded"}, 415},
		{"multipart form", map[string]string{"Authorization": auth, "Content-Type": "multipart/form-data; boundary=x"}, 415},
		{"text/plain", map[string]string{"Authorization": auth, "Content-Type": "text/plain"}, 415},
		{"curl", map[string]string{"Authorization": auth}, 200},
		{"json", map[string]string{"Authorization": auth, "Content-Type": "application/json; charset=utf-8"}, 200},
		{"same origin", map[string]string{"Authorization": auth, "Origin": base, "Sec-Fetch-Site": "same-origin"}, 200},
	} {
		if code, body := do(t, "POST", base+"/savepoints", c.hdr); code != c.want {
			t.Errorf("%s: got %d %s, want %d", c.name, code, body, c.want)
		}
	}
	if code, _ := do(t, "GET", base+"/savepoints", map[string]string{"Authorization": auth}); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /savepoints: got %d, want 405", code)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 3 {
		t.Errorf("got %d savepoints, want 3 (one per accepted request)", len(ents))
	}
}

func port(addr string) string { _, p, _ := net.SplitHostPort(addr); return p }

func TestSavepointRetention(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "savepoint-0") // not taken through the endpoint: kept
	if err := os.Mkdir(other, 0o700); err != nil {
		t.Fatal(err)
	}
	h, err := Handler(metrics.NewRegistry(), func() *jobstat.View { return nil }, Token("tok"), Savepoints(fakeSavepoints(t, dir), 2, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	_, base := serve(t, h)
	var last struct {
		ID     int64    `json:"id"`
		Pruned []string `json:"pruned"`
	}
	for range 5 {
		code, body := do(t, "POST", base+"/savepoints", map[string]string{"Authorization": "Bearer tok"})
		if code != 200 {
			t.Fatalf("POST: %d %s", code, body)
		}
		if err := json.Unmarshal([]byte(body), &last); err != nil {
			t.Fatal(err)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, " "); got != "savepoint-0 savepoint-4 savepoint-5" {
		t.Errorf("after 5 savepoints with retain 2: got %q, want the other one and the newest two", got)
	}
	if last.ID != 5 || len(last.Pruned) != 1 || filepath.Base(last.Pruned[0]) != "savepoint-3" {
		t.Errorf("last answer: %+v, want savepoint-3 pruned", last)
	}
}

func TestProbes(t *testing.T) {
	f := &statusJob{reg: metrics.NewRegistry(), st: engine.Status{State: engine.Running}}
	var mu sync.Mutex
	var view *jobstat.View
	h, err := Handler(f.reg, func() *jobstat.View { mu.Lock(); defer mu.Unlock(); return view }, Token("tok"), ReadyCheckpointAge(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	_, base := serve(t, h)
	readyz := func() (int, jobstat.Readiness) {
		code, body := do(t, "GET", base+"/readyz", nil) // no token: probes are open
		var r jobstat.Readiness
		if err := json.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("/readyz: %v: %s", err, body)
		}
		return code, r
	}
	if code, body := do(t, "GET", base+"/healthz", nil); code != 200 || !strings.Contains(body, `"ok"`) {
		t.Errorf("/healthz: %d %s", code, body)
	}
	if code, r := readyz(); code != 503 || r.Ready || r.Reason != "the job has not started" {
		t.Errorf("/readyz before the job: %d %+v", code, r)
	}
	mu.Lock()
	view = jobstat.New(f, "src", "snk", time.Now())
	mu.Unlock()
	if code, r := readyz(); code != 200 || !r.Ready || r.State != "RUNNING" {
		t.Errorf("/readyz running: %d %+v", code, r)
	}
	f.mu.Lock()
	f.st.State = engine.Restarting
	f.mu.Unlock()
	if code, r := readyz(); code != 503 || r.Ready || r.Reason != "the job is RESTARTING" {
		t.Errorf("/readyz restarting: %d %+v", code, r)
	}
	if code, _ := do(t, "GET", base+"/status", nil); code != 401 {
		t.Errorf("/status without token: %d, want 401", code)
	}
}

// TestIdleClientsCannotHoldTheServer: 40 clients that connect and send
// nothing hold at most MaxConnections connections of the server, are cut by
// the header timeout, and the endpoint answers afterwards; an idle
// keep-alive connection is cut by the idle timeout.
func TestIdleClientsCannotHoldTheServer(t *testing.T) {
	h, err := Handler(metrics.NewRegistry(), func() *jobstat.View { return nil })
	if err != nil {
		t.Fatal(err)
	}
	srv, base := serve(t, h, MaxConnections(4), Timeouts(300*time.Millisecond, time.Second, time.Second, 300*time.Millisecond))
	lim := srv.ln.(*limitListener)
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range 40 {
		c, err := net.Dial("tcp", srv.Addr())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	peak := 0
	for range 20 {
		peak = max(peak, len(lim.sem))
		time.Sleep(5 * time.Millisecond)
	}
	if peak > 4 {
		t.Fatalf("the server held %d connections, cap 4", peak)
	}
	// Every idle client is cut eventually (the first four by the header
	// timeout, the others once accepted in turn).
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second)) // a hang guard
		if _, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
			t.Fatalf("idle client %d: got %v, want EOF (cut by the server)", i, err)
		}
	}
	if code, _ := do(t, "GET", base+"/healthz", nil); code != 200 {
		t.Errorf("/healthz after the idle clients: %d", code)
	}
	// A keep-alive connection left idle after a request is closed.
	c, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("idle keep-alive connection: got %v, want EOF", err)
	}
}

// TestSlowSavepointOutlivesServerTimeouts: a savepoint that takes longer
// than the server's read and write timeouts is still answered.
func TestSlowSavepointOutlivesServerTimeouts(t *testing.T) {
	dir := t.TempDir()
	fast := fakeSavepoints(t, dir)
	slow := func(ctx context.Context) (checkpoint.Info, error) {
		select {
		case <-time.After(time.Second): // longer than every server timeout below
		case <-ctx.Done():
			return checkpoint.Info{}, ctx.Err()
		}
		return fast(ctx)
	}
	h, err := Handler(metrics.NewRegistry(), func() *jobstat.View { return nil }, Token("tok"), Savepoints(slow, 0, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	_, base := serve(t, h, Timeouts(100*time.Millisecond, 200*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond))
	if code, body := do(t, "POST", base+"/savepoints", map[string]string{"Authorization": "Bearer tok"}); code != 200 {
		t.Errorf("slow savepoint: %d %s, want 200", code, body)
	}
}
