package main

// These tests drive the sluice binary as a user would: they build it
// (CGO_ENABLED=0, as released), run the pipelines in examples/pipelines,
// send SIGTERM, resume, and check the committed output record by record.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/promparse"
	"github.com/sluice-io/sluice/internal/registry"
	"go.uber.org/goleak"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "sluice-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "sluice")
	os.Unsetenv("SLUICE_TEST_UNSET")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building sluice with CGO_ENABLED=0:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

const pipelines = "../../examples/pipelines/"

type result struct {
	code           int
	stdout, stderr string
}

// run runs the binary to its end with extra environment variables.
func run(t *testing.T, env []string, args ...string) result {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), binary, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	code := 0
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("sluice %v: %v", args, err)
	}
	return result{code, out.String(), errb.String()}
}

// proc is a running sluice whose stderr is read line by line.
type proc struct {
	cmd   *exec.Cmd
	lines chan string
	mu    sync.Mutex
	all   strings.Builder
	done  chan struct{}
}

func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, lines: make(chan string, 1024), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer close(p.lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.all.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default: // nobody waits for lines now; they are kept in all
			}
		}
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			<-p.done
			_ = p.cmd.Wait()
		}
	})
	return p
}

// waitLine returns the first submatch of re in a stderr line.
func (p *proc) waitLine(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	guard := time.NewTimer(2 * time.Minute) // a hang guard, not a timing assertion
	defer guard.Stop()
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("sluice ended without printing %v; stderr:\n%s", re, p.stderr())
			}
			if m := re.FindStringSubmatch(line); m != nil {
				return m[1]
			}
		case <-guard.C:
			t.Fatalf("sluice printed no %v in 2 minutes; stderr:\n%s", re, p.stderr())
		}
	}
}

// hasLine reads stderr lines until one matches re (true) or the process
// ended without printing one (false).
func (p *proc) hasLine(t *testing.T, re *regexp.Regexp) bool {
	t.Helper()
	guard := time.NewTimer(2 * time.Minute) // a hang guard, not a timing assertion
	defer guard.Stop()
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				return false
			}
			if re.MatchString(line) {
				return true
			}
		case <-guard.C:
			t.Fatalf("sluice printed no %v and did not end in 2 minutes; stderr:\n%s", re, p.stderr())
		}
	}
}

func (p *proc) wait(t *testing.T) int {
	t.Helper()
	<-p.done
	err := p.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

func (p *proc) stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.all.String()
}

func TestVersion(t *testing.T) {
	r := run(t, nil, "version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "sluice ") || !strings.Contains(r.stdout, "CGO_ENABLED=0") {
		t.Errorf("sluice version: got %d %q", r.code, r.stdout)
	}
}

func TestConnectors(t *testing.T) {
	r := run(t, nil, "connectors")
	for _, want := range []string{"source datagen", "source file", "sink file (exactly-once)", "sink print (at-least-once)",
		"count   int    0  records to generate", "path                    string                             required      base directory", "checkpoint:"} {
		// Column widths follow the longest option name: compare with
		// runs of spaces folded.
		if !strings.Contains(strings.Join(strings.Fields(r.stdout), " "), strings.Join(strings.Fields(want), " ")) {
			t.Errorf("sluice connectors lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := run(t, nil, "connectors", "nope"); r.code != 2 {
		t.Errorf("sluice connectors nope: got exit %d, want 2", r.code)
	}
}

// TestConfigErrors checks the one-line errors of the acceptance criteria
// through the binary.
func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct{ name, yaml, want string }{
		{"unknown connector", "source:\n  type: datagen\nsink:\n  type: kafak\n",
			`:4: sink.type: unknown sink connector "kafak" (known: file, iceberg, kafka, opensearch, postgres, print)`},
		{"unknown field", "source:\n  type: datagen\n  options:\n    rate: 1\n    colour: red\nsink:\n  type: print\n",
			`:5: source.options.colour: unknown field for source datagen (allowed: count, splits, rate)`},
		{"wrong type", "source:\n  type: datagen\n  options:\n    count: ten\nsink:\n  type: print\n",
			`:4: source.options.count: want an integer, got "ten"`},
		{"missing required field", "source:\n  type: datagen\nsink:\n  type: file\n  options:\n    prefix: p\n",
			`:6: sink.options.path: missing required field (base directory of the part files, or s3://bucket/prefix)`},
		{"unset variable", "source:\n  type: datagen\nsink:\n  type: file\n  options:\n    path: ${SLUICE_TEST_UNSET}\n",
			`:6: sink.options.path: environment variable SLUICE_TEST_UNSET is not set`},
		{"secret of wrong type", "source:\n  type: datagen\n  options:\n    count: ${SLUICE_TEST_SECRET}\nsink:\n  type: print\n",
			`:4: source.options.count: want an integer (value from the environment not shown)`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(dir, fmt.Sprintf("p%d.yaml", i))
			if err := os.WriteFile(file, []byte(tt.yaml), 0o644); err != nil {
				t.Fatal(err)
			}
			r := run(t, []string{"SLUICE_TEST_SECRET=hunter2"}, "run", file)
			if r.code != 2 {
				t.Errorf("exit code: got %d, want 2", r.code)
			}
			if want := "sluice: " + file + tt.want + "\n"; r.stderr != want {
				t.Errorf("stderr:\ngot  %q\nwant %q", r.stderr, want)
			}
			if strings.Contains(r.stderr+r.stdout, "hunter2") {
				t.Errorf("the secret appears in the output: %s", r.stderr)
			}
		})
	}
}

func TestRunPrint(t *testing.T) {
	r := run(t, []string{"COUNT=25"}, "run", "--progress", "off", pipelines+"datagen-print.yaml")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 25 {
		t.Fatalf("got %d lines, want 25:\n%s", len(lines), r.stdout)
	}
	seen := map[int64]bool{}
	for _, l := range lines {
		var rec struct {
			ID       int64
			Greeting string
			Big      bool
		}
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		want := registry.DatagenValue(rec.ID)
		if seen[rec.ID] || rec.Greeting != "hello "+want["user"].(string) || rec.Big != (want["amount"].(int64) > 500) {
			t.Errorf("bad or repeated line %q", l)
		}
		seen[rec.ID] = true
	}
}

// eachCommittedRecord calls fn with every JSON record of the committed
// (not hidden) part files directly under dir; a missing dir has none.
func eachCommittedRecord(t *testing.T, dir string, fn func(file string, rec map[string]any)) {
	t.Helper()
	eachCommittedLine(t, dir, func(file, line string) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("%s: %q: %v", file, line, err)
		}
		fn(file, rec)
	})
}

// eachCommittedLine calls fn with every line (without its newline) of the
// committed (not hidden) part files directly under dir; a missing dir has
// none.
func eachCommittedLine(t *testing.T, dir string, fn func(file, line string)) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for l := range strings.Lines(string(b)) {
			fn(e.Name(), strings.TrimSuffix(l, "\n"))
		}
	}
}

// countCommittedLines counts the lines of the committed part files directly
// under dir (a missing dir has none): for JSON lines, the records, at a
// fraction of the CPU of decoding them, for the waits that poll a running
// job's output (the decoding polls took the CPU the job under test
// needed on two cores).
func countCommittedLines(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	eachCommittedLine(t, dir, func(string, string) { n++ })
	return n
}

// readOutput reads the committed part files under dir into a count per key.
func readOutput(t *testing.T, dir, key string) map[int64]int {
	t.Helper()
	counts := map[int64]int{}
	eachCommittedRecord(t, dir, func(file string, rec map[string]any) {
		id, ok := rec[key].(float64)
		if !ok {
			t.Fatalf("%s: %v has no numeric %q", file, rec, key)
		}
		counts[int64(id)]++
	})
	return counts
}

var (
	httpRE    = regexp.MustCompile(`msg="http endpoint" metrics=(http://\S+)/metrics`)
	stoppedRE = regexp.MustCompile(`stopped cleanly: output is committed up to the final checkpoint (\d+)`)
)

func getURL(t *testing.T, url, token string) string {
	t.Helper()
	body, ok := tryGetURL(t, url, token)
	if !ok {
		t.Fatalf("GET %s: 503 Service Unavailable", url)
	}
	return body
}

// tryGetURL is getURL that reports 503 Service Unavailable as not ok.
func tryGetURL(t *testing.T, url, token string) (string, bool) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return string(b), true
	case http.StatusServiceUnavailable:
		return "", false
	}
	t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	return "", false
}

// TestStopResumeExactlyOnce runs examples/pipelines/datagen-to-file.yaml,
// scrapes /metrics and /status while it runs, stops it with SIGTERM,
// resumes it with --from, and checks that the committed output holds
// every expected record exactly once.
func TestStopResumeExactlyOnce(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	defer http.DefaultClient.CloseIdleConnections()
	out := t.TempDir()
	const count = 40000
	env := []string{"OUT=" + out, fmt.Sprint("COUNT=", count), "RATE=8000", "SLUICE_TEST_TOKEN=t0ken"}
	file := pipelines + "datagen-to-file.yaml"
	p := start(t, env, "run", "--http", "127.0.0.1:0", "--http-token-env", "SLUICE_TEST_TOKEN", "--progress-interval", "100ms", file)
	base := p.waitLine(t, httpRE)

	// Wait (bounded) for a completed checkpoint, seen through /status.
	var st struct {
		State     string `json:"state"`
		Completed int    `json:"checkpoints_completed"`
		Last      *struct {
			ID        int64 `json:"id"`
			SizeBytes int64 `json:"size_bytes"`
		} `json:"last_checkpoint"`
		Subtasks []struct {
			Operator  string `json:"operator"`
			RecordsIn int64  `json:"records_in"`
		} `json:"subtasks"`
	}
	for i := 0; i < 400 && st.Completed < 1; i++ {
		body, ok := tryGetURL(t, base+"/status", "t0ken")
		if !ok { // 503 until the job has started
			time.Sleep(25 * time.Millisecond)
			continue
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			t.Fatal(err)
		}
		if st.Completed < 1 {
			time.Sleep(25 * time.Millisecond)
		}
	}
	if st.Completed < 1 || st.Last == nil || st.Last.SizeBytes <= 0 || len(st.Subtasks) == 0 {
		t.Fatalf("/status never showed a completed checkpoint: %+v\n%s", st, p.stderr())
	}

	fams, err := promparse.Parse(strings.NewReader(getURL(t, base+"/metrics", "t0ken")))
	if err != nil {
		t.Fatalf("/metrics does not parse (reference parser %v): %v", promparse.Reference, err)
	}
	in := fams["sluice_operator_numRecordsIn"]
	if in == nil || in.Type != "counter" {
		t.Fatalf("no counter sluice_operator_numRecordsIn in /metrics: %v", fams)
	}
	if _, ok := in.Get(map[string]string{"job_name": "orders-to-files", "operator_name": "orders", "subtask_index": "0"}); !ok {
		t.Errorf("numRecordsIn has no sample for orders/0: %+v", in.Samples)
	}
	if f := fams["sluice_job_numberOfCompletedCheckpoints"]; f == nil || f.Sum() < 1 {
		t.Errorf("sluice_job_numberOfCompletedCheckpoints: got %+v, want >= 1", f)
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("after SIGTERM: exit %d\n%s", code, p.stderr())
	}
	if !stoppedRE.MatchString(p.stderr()) {
		t.Fatalf("no clean stop reported:\n%s", p.stderr())
	}
	first := readOutput(t, filepath.Join(out, "output"), "order")
	for id, n := range first {
		if n != 1 {
			t.Fatalf("after the stop, order %d is there %d times", id, n)
		}
	}

	// Running again without --from must not start over into the same output.
	if r := run(t, env, "run", file); r.code != 2 || !strings.Contains(r.stderr, "resume with `sluice run --from") {
		t.Fatalf("rerun without --from: exit %d\n%s", r.code, r.stderr)
	}
	if r := run(t, nil, "checkpoints", filepath.Join(out, "checkpoints")); r.code != 0 || !strings.Contains(r.stdout, "orders-to-files") {
		t.Errorf("sluice checkpoints: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}

	r := run(t, env, "run", "--progress", "off", "--from", filepath.Join(out, "checkpoints"), file)
	if r.code != 0 {
		t.Fatalf("resume: exit %d\n%s", r.code, r.stderr)
	}
	got, want := checkOrdersOnce(t, out, count)
	t.Logf("stopped with %d of %d records committed; resumed to all %d", len(first), want, got)
}

func TestFileToFile(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	in, out := t.TempDir(), t.TempDir()
	var b strings.Builder
	for i := range 300 {
		level := []string{"info", "warn", "error"}[i%3]
		fmt.Fprintf(&b, `{"ts": %d, "level": %q, "msg": "m%d", "host": "h"}`+"\n", i, level, i)
	}
	if err := os.WriteFile(filepath.Join(in, "events.jsonl"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, []string{"IN=" + in, "OUT=" + out}, "run", "--progress", "off", pipelines+"file-to-file.yaml")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	got := readOutput(t, filepath.Join(out, "output"), "ts")
	if len(got) != 200 {
		t.Errorf("got %d records, want 200 (warn and error)", len(got))
	}
	for ts, n := range got {
		if ts%3 == 0 || n != 1 {
			t.Errorf("ts %d: %d times", ts, n)
		}
	}
}

func TestDemo(t *testing.T) {
	dir := t.TempDir()
	r := run(t, nil, "demo", "--dir", dir, "--records", "20000", "--rate", "0", "--progress-interval", "100ms")
	if r.code != 0 || !strings.Contains(r.stdout, "verified: output equals input — all 10000 even-amount records of 20000") {
		t.Fatalf("demo: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "output: "+filepath.Join(dir, "output")) {
		t.Errorf("the demo does not say where its output is:\n%s", r.stdout)
	}
}

func TestDemoPipelineIsTheExample(t *testing.T) {
	a, err := os.ReadFile(pipelines + "demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../../internal/cli/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Error("internal/cli/demo.yaml (embedded by sluice demo) differs from examples/pipelines/demo.yaml; copy it over")
	}
}

func TestTransformFailure(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	file := filepath.Join(t.TempDir(), "bad.yaml")
	yaml := "restart: {strategy: none}\nsource:\n  type: datagen\n  options: {count: 10}\ntransforms:\n  - map: id + 1\nsink:\n  type: print\n"
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	r := run(t, nil, "run", "--progress", "off", file)
	if r.code != 1 || !strings.Contains(r.stderr, `transform map "map-1" (`+file+`:6): map returned int, want an object`) {
		t.Errorf("exit %d, stderr:\n%s", r.code, r.stderr)
	}
}

func TestValidate(t *testing.T) {
	r := run(t, []string{"OUT=/tmp/x"}, "validate", pipelines+"datagen-to-file.yaml")
	if r.code != 0 || !strings.Contains(r.stdout, "ok: job \"orders-to-files\": source datagen → filter → map → select → rename → sink file (exactly-once, parallelism 2)") {
		t.Errorf("validate: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestSavepointsThroughTheBinary: with --savepoint-dir, POST /savepoints
// takes a savepoint of the running job, SIGTERM stops it with a savepoint,
// and a run resumed --from that savepoint (moved elsewhere first) commits
// every remaining record, so the output holds each expected record once.
func TestSavepointsThroughTheBinary(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	defer http.DefaultClient.CloseIdleConnections()
	out, spDir := t.TempDir(), t.TempDir()
	const count = 30000
	env := []string{"OUT=" + out, fmt.Sprint("COUNT=", count), "RATE=6000", "SLUICE_TEST_TOKEN=t0ken"}
	file := pipelines + "datagen-to-file.yaml"
	p := start(t, env, "run", "--http", "127.0.0.1:0", "--http-token-env", "SLUICE_TEST_TOKEN", "--savepoint-dir", spDir, "--progress-interval", "100ms", file)
	base := p.waitLine(t, httpRE)
	var sp struct {
		ID   int64  `json:"id"`
		Path string `json:"path"`
	}
	for i := 0; i < 400 && sp.Path == ""; i++ { // 409 until the job runs
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/savepoints", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer t0ken") // write actions need the token
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal(body, &sp); err != nil {
				t.Fatalf("POST /savepoints: %v: %s", err, body)
			}
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if sp.Path == "" || !strings.HasPrefix(sp.Path, spDir) {
		t.Fatalf("POST /savepoints never succeeded (got %+v)\n%s", sp, p.stderr())
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("after SIGTERM: exit %d\n%s", code, p.stderr())
	}
	m := regexp.MustCompile(`resume with: sluice run --from (\S+) `).FindStringSubmatch(p.stderr())
	if m == nil || !strings.HasPrefix(m[1], spDir) || m[1] == sp.Path {
		t.Fatalf("no stop savepoint reported:\n%s", p.stderr())
	}
	moved := filepath.Join(t.TempDir(), "moved")
	if err := os.Rename(m[1], moved); err != nil {
		t.Fatal(err)
	}
	r := run(t, env, "run", "--progress", "off", "--from", moved, file)
	if r.code != 0 {
		t.Fatalf("resume: exit %d\n%s", r.code, r.stderr)
	}
	checkOrdersOnce(t, out, count)
}

// checkOrdersOnce checks that the output of datagen-to-file.yaml under out
// holds every large order (amount >= 500) of count once, and returns how
// many distinct orders it holds and how many it should.
func checkOrdersOnce(t *testing.T, out string, count int64) (got, want int) {
	t.Helper()
	seen := readOutput(t, filepath.Join(out, "output"), "order")
	for i := range count {
		if registry.DatagenValue(i)["amount"].(int64) < 500 {
			continue
		}
		want++
		if seen[i] != 1 {
			t.Errorf("order %d: committed %d times, want once", i, seen[i])
		}
	}
	if len(seen) != want {
		t.Errorf("got %d distinct orders, want %d", len(seen), want)
	}
	return len(seen), want
}
