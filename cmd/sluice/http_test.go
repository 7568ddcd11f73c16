package main

// Binary tests of the hardened HTTP endpoint (issue 12): idle clients
// cannot take the process's descriptors, write actions need the token and
// refuse cross-site requests, the probes answer without a token, and
// /status lists checkpoints as they completed.

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// request sends one request on a fresh connection and returns the status
// code and body.
func request(t *testing.T, method, url string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 2 * time.Minute} // a hang guard
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

// openFDs counts the open descriptors of process pid.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestHTTPIdleClients: 300 clients connect to the endpoint of a running job
// and send nothing. The process holds at most 64 of their connections (the
// cap); the rest wait in the listen backlog. The endpoint answers once the
// held ones are cut by the header timeout, and the job runs on to its end
// with every record committed once.
func TestHTTPIdleClients(t *testing.T) {
	t.Parallel() // mostly waits on its processes; its topics, tables and dirs are its own
	if runtime.GOOS != "linux" {
		t.Skip("counts descriptors in /proc")
	}
	out := t.TempDir()
	const count, idle, maxConns = 60000, 300, 64
	env := []string{"OUT=" + out, fmt.Sprint("COUNT=", count), "RATE=4000"}
	p := start(t, env, "run", "--http", "127.0.0.1:0", "--progress-interval", "100ms", pipelines+"datagen-to-file.yaml")
	base := p.waitLine(t, httpRE)
	addr := strings.TrimPrefix(base, "http://")
	pid := p.cmd.Process.Pid
	before := openFDs(t, pid)

	conns := make([]net.Conn, 0, idle)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range idle {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	// The process accepts them at once if nothing caps it: look a few times.
	peak := 0
	for range 20 {
		peak = max(peak, openFDs(t, pid))
		time.Sleep(20 * time.Millisecond)
	}
	if peak > before+maxConns+32 { // 32: the job's own files come and go
		t.Fatalf("with %d idle clients the process holds %d descriptors (%d before); want at most the cap of %d more", idle, peak, before, maxConns)
	}
	// Keep the cap full with idle clients; the rest leave.
	for _, c := range conns[maxConns:] {
		c.Close()
	}
	conns = conns[:maxConns]
	code, body := request(t, "GET", base+"/status", nil)
	if code != http.StatusOK {
		t.Fatalf("/status behind %d idle clients: %d %s", maxConns, code, body)
	}
	var st struct {
		State string `json:"state"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.State != "RUNNING" {
		t.Fatalf("/status after the idle clients were cut: %v %s; want the job RUNNING", err, body)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.stderr())
	}
	got, want := checkOrdersOnce(t, out, count)
	t.Logf("peak %d descriptors (%d before %d idle clients); %d of %d orders committed once", peak, before, idle, got, want)
}

// TestHTTPWriteActionsNeedAToken: --savepoint-dir with an HTTP endpoint
// (which enables POST /savepoints) and no token is refused at startup.
func TestHTTPWriteActionsNeedAToken(t *testing.T) {
	r := run(t, []string{"OUT=" + t.TempDir()}, "run", "--http", "127.0.0.1:0", "--savepoint-dir", t.TempDir(), pipelines+"datagen-to-file.yaml")
	if r.code != 2 || !strings.Contains(r.stderr, "POST /savepoints, which needs a token: set --http-token-env VAR") {
		t.Fatalf("exit %d, want 2 naming --http-token-env:\n%s", r.code, r.stderr)
	}
}

const httpPipeline = `name: http-rules
parallelism: 2
delivery: exactly-once
checkpoint:
  interval: ${INTERVAL}
  dir: ${OUT}/checkpoints
source:
  type: datagen
  name: orders
  options:
    count: ${COUNT}
    splits: 4
    rate: ${RATE}
sink:
  type: file
  name: order-files
  options:
    path: ${OUT}/output
http:
  token: ${SLUICE_TEST_TOKEN}
  ready-checkpoint-age: ${READY_AGE}
`

// TestHTTPTokenOriginAndProbes drives a running job's endpoint: POST
// /savepoints refuses requests without the token, cross-site ones and form
// posts, accepts "bearer" in any case, and keeps only the newest
// --savepoint-retain of its savepoints; /status lists them as they
// completed, with rates in the first read; /healthz and /readyz answer
// without the token, /readyz with 503 and a reason once no checkpoint
// completed within http.ready-checkpoint-age.
func TestHTTPTokenOriginAndProbes(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "http.yaml")
	if err := os.WriteFile(file, []byte(httpPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	out, spDir := filepath.Join(dir, "out"), filepath.Join(dir, "savepoints")
	// A checkpoint every 3s and a readiness bound of 1s make /readyz flip
	// to 503 between checkpoints.
	env := []string{"OUT=" + out, "COUNT=1000000", "RATE=2000", "INTERVAL=3s", "READY_AGE=1s", "SLUICE_TEST_TOKEN=t0ken"}
	p := start(t, env, "run", "--http", "127.0.0.1:0", "--savepoint-dir", spDir, "--savepoint-retain", "1", "--progress", "off", file)
	base := p.waitLine(t, httpRE)

	// /status from the first read: rates are there.
	var st struct {
		State     string  `json:"state"`
		RecordsIn int64   `json:"records_in"`
		InPerSec  float64 `json:"records_in_per_second"`
		Ckpts     []struct {
			ID          int64     `json:"id"`
			Kind        string    `json:"kind"`
			DurationMS  int64     `json:"duration_ms"`
			SizeBytes   int64     `json:"size_bytes"`
			CompletedAt time.Time `json:"completed_at"`
		} `json:"checkpoints"`
	}
	readStatus := func() {
		t.Helper()
		code, body := request(t, "GET", base+"/status", map[string]string{"Authorization": "Bearer t0ken"})
		if code != http.StatusOK && code != http.StatusServiceUnavailable {
			t.Fatalf("/status: %d %s", code, body)
		}
		if code == http.StatusOK {
			if err := json.Unmarshal([]byte(body), &st); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := 0; i < 400 && st.RecordsIn == 0; i++ {
		readStatus()
		time.Sleep(10 * time.Millisecond)
	}
	if st.RecordsIn == 0 || st.InPerSec <= 0 {
		t.Errorf("first /status with records: %+v; want a rate", st)
	}

	if code, body := request(t, "GET", base+"/healthz", nil); code != http.StatusOK {
		t.Errorf("/healthz without token: %d %s", code, body)
	}
	if code, _ := request(t, "GET", base+"/status", nil); code != http.StatusUnauthorized {
		t.Errorf("/status without token: %d, want 401", code)
	}
	// /readyz flips to 503 with a reason in the 3s between checkpoints
	// (bound 1s), and back to 200 after one.
	seen := map[int]string{}
	for i := 0; i < 1000 && (seen[200] == "" || seen[503] == ""); i++ {
		code, body := request(t, "GET", base+"/readyz", nil)
		if code == 503 || seen[503] != "" { // a 200 counts after a 503: a checkpoint completed
			seen[code] = body
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(seen[503], `"reason": "no checkpoint completed for`) || !strings.Contains(seen[200], `"ready": true`) {
		t.Errorf("/readyz: want 503 with a reason, then 200; got %v", seen)
	}

	post := func(hdr map[string]string) (int, string) { return request(t, "POST", base+"/savepoints", hdr) }
	for name, c := range map[string]struct {
		hdr  map[string]string
		want int
	}{
		"no token":          {map[string]string{"Content-Type": "application/json"}, 401},
		"wrong token":       {map[string]string{"Authorization": "Bearer nope"}, 401},
		"cross-site origin": {map[string]string{"Authorization": "bearer t0ken", "Origin": "http://evil.example"}, 403},
		"cross-site fetch":  {map[string]string{"Authorization": "bearer t0ken", "Sec-Fetch-Site": "cross-site"}, 403},
		"form post":         {map[string]string{"Authorization": "bearer t0ken", "Content-Type": "application/x-www-form-urlencoded"}, 415},
	} {
		if code, body := post(c.hdr); code != c.want {
			t.Errorf("POST /savepoints, %s: %d %s, want %d", name, code, body, c.want)
		}
	}
	var paths []string
	for i := 0; i < 400 && len(paths) < 2; i++ {
		code, body := post(map[string]string{"Authorization": "BEARER t0ken", "Content-Type": "application/json"})
		if code != http.StatusOK {
			time.Sleep(25 * time.Millisecond) // 409 while the job starts
			continue
		}
		var sp struct {
			Path string `json:"path"`
		}
		if err := json.Unmarshal([]byte(body), &sp); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, sp.Path)
	}
	if len(paths) != 2 {
		t.Fatalf("POST /savepoints: %d savepoints taken, want 2\n%s", len(paths), p.stderr())
	}
	ents, err := os.ReadDir(spDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || filepath.Join(spDir, ents[0].Name()) != paths[1] {
		t.Errorf("with --savepoint-retain 1, %s holds %v; want only %s", spDir, ents, paths[1])
	}
	readStatus()
	kinds := map[string]int{}
	for i, c := range st.Ckpts {
		kinds[c.Kind]++
		if c.SizeBytes <= 0 || c.CompletedAt.IsZero() || i > 0 && c.ID <= st.Ckpts[i-1].ID {
			t.Errorf("/status checkpoint %d: %+v", i, c)
		}
	}
	if kinds["savepoint"] != 2 || kinds["checkpoint"] < 1 {
		t.Errorf("/status checkpoints: %+v; want both savepoints and the checkpoints", st.Ckpts)
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("after SIGTERM: exit %d\n%s", code, p.stderr())
	}
	if strings.Contains(p.stderr(), "t0ken") {
		t.Errorf("the token appears in the log:\n%s", p.stderr())
	}
}
