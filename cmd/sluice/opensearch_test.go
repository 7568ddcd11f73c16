package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The opensearch sink through the binary, on the real node of
// scripts/opensearch.sh (SLUICE_OPENSEARCH_URL) and the real broker.

func osNode(t *testing.T) string {
	t.Helper()
	u := os.Getenv("SLUICE_OPENSEARCH_URL")
	if u == "" {
		t.Skip("SLUICE_OPENSEARCH_URL is not set: start a node with `eval \"$(scripts/opensearch.sh start)\"; export SLUICE_OPENSEARCH_URL`")
	}
	return strings.TrimSuffix(u, "/")
}

var osIndexSeq atomic.Int64 // parallel tests make indexes

func osIndexName(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano(), osIndexSeq.Add(1))
}

// osHTTP is a plain HTTP client of the node (no connection is kept: the
// test binary checks for leaked goroutines).
var osHTTP = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: time.Minute}

// osDo sends a request and returns status and body.
func osDo(t *testing.T, method, u, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := osHTTP.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func osCount(t *testing.T, node, index string) int {
	t.Helper()
	if code, _ := osDo(t, http.MethodPost, node+"/"+index+"/_refresh", ""); code == http.StatusNotFound {
		return 0
	}
	code, b := osDo(t, http.MethodGet, node+"/"+index+"/_count", "")
	if code == http.StatusNotFound {
		return 0
	}
	var c struct{ Count int }
	if code != http.StatusOK || json.Unmarshal(b, &c) != nil {
		t.Fatalf("count %s: %d %s", index, code, b)
	}
	return c.Count
}

type osHit struct {
	ID     string         `json:"_id"`
	Source map[string]any `json:"_source"`
}

// osAll reads every document of index (refreshed) with a scroll.
func osAll(t *testing.T, node, index string) []osHit {
	t.Helper()
	osDo(t, http.MethodPost, node+"/"+index+"/_refresh", "")
	code, b := osDo(t, http.MethodPost, node+"/"+index+"/_search?scroll=2m", `{"size": 5000, "sort": ["_doc"]}`)
	var out []osHit
	for range 10_000 { // bounded: 50M documents
		var page struct {
			ScrollID string `json:"_scroll_id"`
			Hits     struct{ Hits []osHit }
		}
		if code != http.StatusOK || json.Unmarshal(b, &page) != nil {
			t.Fatalf("search %s: %d %s", index, code, b)
		}
		if len(page.Hits.Hits) == 0 {
			osDo(t, http.MethodDelete, node+"/_search/scroll", `{"scroll_id": "`+page.ScrollID+`"}`)
			return out
		}
		out = append(out, page.Hits.Hits...)
		code, b = osDo(t, http.MethodPost, node+"/_search/scroll", `{"scroll": "2m", "scroll_id": "`+page.ScrollID+`"}`)
	}
	t.Fatal("scroll did not end")
	return nil
}

// failingProxy forwards to node and answers 503 to every every-th bulk
// request, at most max times.
type failingProxy struct {
	srv                  *httptest.Server
	mu                   sync.Mutex
	bulks, failed        int
	every, max           int
	transport            *http.Transport
	passedBulksSinceMark int
}

func newFailingProxy(t *testing.T, node string, every, max int) *failingProxy {
	t.Helper()
	target, err := url.Parse(node)
	if err != nil {
		t.Fatal(err)
	}
	p := &failingProxy{every: every, max: max, transport: &http.Transport{}}
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = p.transport
	rp.ErrorLog = log.New(io.Discard, "", 0) // a killed sluice cancels its requests
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/_bulk") {
			p.mu.Lock()
			p.bulks++
			fail := p.bulks%p.every == 0 && p.failed < p.max
			if fail {
				p.failed++
			} else {
				p.passedBulksSinceMark++
			}
			p.mu.Unlock()
			time.Sleep(20 * time.Millisecond) // paces the job so that the kills fall mid-run
			if fail {
				io.Copy(io.Discard, r.Body)
				http.Error(w, `{"error":"injected by the test"}`, http.StatusServiceUnavailable)
				return
			}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		p.srv.CloseClientConnections()
		p.srv.Close()
		p.transport.CloseIdleConnections()
	})
	return p
}

func (p *failingProxy) stats() (bulks, failed, passedSinceMark int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bulks, p.failed, p.passedBulksSinceMark
}

func (p *failingProxy) mark() {
	p.mu.Lock()
	p.passedBulksSinceMark = 0
	p.mu.Unlock()
}

// waitFor polls cond every 100ms for at most limit (a hang guard).
func waitFor(t *testing.T, p *proc, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v\n%s", what, limit, p.stderr())
		}
		select {
		case <-p.done:
			t.Fatalf("%s: sluice ended first\n%s", what, p.stderr())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// osOrders produces count orders to a new topic of 8 partitions, keyed
// by id: ids 0..count/3-1, each in versions 0, 1, 2 (in this order, so
// the last version of each id is the last in its partition).
func osOrders(t *testing.T, brokers string, count int) (topic string, ids int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topic = fmt.Sprintf("cli-os-%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 8, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic: %v", err)
	}
	ids = count / 3
	var errMu sync.Mutex
	var perr error
	for i := range ids * 3 {
		id, v := i%ids, i/ids
		rec := &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(id)),
			Value: fmt.Appendf(nil, `{"id": %d, "v": %d, "amount": %d}`, id, v, i)}
		cl.Produce(ctx, rec, func(_ *kgo.Record, err error) {
			if err != nil {
				errMu.Lock()
				perr = err
				errMu.Unlock()
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if perr != nil {
		t.Fatalf("produce: %v", perr)
	}
	return topic, ids
}

// TestOpenSearchEndToEndFailuresKill9 is issue 16's end to end, through
// examples/pipelines/kafka-to-opensearch.yaml: JSON orders from an
// 8-partition topic → map → opensearch at parallelism 2, checkpoints
// every 500ms; the sink's node is behind a proxy that answers 503 to every
// 5th bulk request (12 times) while the sink has no retries, so each is
// a task failure and a restart of its region from the last checkpoint
// (the CLI has no fault-injection hook); the process is killed with SIGKILL twice and
// resumed with --from. The index then holds every order once with the
// fields of its last version. SLUICE_OS_E2E_RECORDS sets the count
// (default 30000; the is 300000).
func TestOpenSearchEndToEndFailuresKill9(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	node := osNode(t)
	brokers := kafkaBrokers(t)
	count := 30_000
	if s := os.Getenv("SLUICE_OS_E2E_RECORDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 3000 {
			t.Fatalf("SLUICE_OS_E2E_RECORDS=%q: want a number from 3000", s)
		}
		count = n
	}
	topic, ids := osOrders(t, brokers, count)
	index := osIndexName("cli-e2e")
	proxy := newFailingProxy(t, node, 5, 12)
	work := t.TempDir()
	ckpt := filepath.Join(work, "checkpoints")
	file := pipelines + "kafka-to-opensearch.yaml"
	env := []string{"KAFKA_BROKERS=" + brokers, "TOPIC=" + topic, "KAFKA_BOUNDED=latest-offset",
		"OPENSEARCH_HOSTS=" + proxy.srv.URL, "OPENSEARCH_INDEX=" + index, "CHECKPOINTS=" + ckpt,
		"CHECKPOINT_INTERVAL=500ms", "RESTART_ATTEMPTS=1000", "RESTART_DELAY=50ms",
		"OPENSEARCH_MAX_RETRIES=0", "BULK_ACTIONS=200"}

	restarts := 0
	// Two runs killed with SIGKILL, each after some bulk requests passed.
	for i, from := range [][]string{nil, {"--from", ckpt}} {
		proxy.mark()
		latest := func() string { b, _ := os.ReadFile(filepath.Join(ckpt, "_latest")); return string(b) }
		before := latest()
		args := append(append([]string{"run", "--progress", "off"}, from...), file)
		p := start(t, env, args...)
		waitFor(t, p, fmt.Sprintf("run %d: bulk requests written and a checkpoint completed", i+1), 2*time.Minute, func() bool {
			_, _, passed := proxy.stats()
			return passed >= 3 && latest() != before
		})
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		p.wait(t)
		restarts += countRestarts(p.stderr())
		bulks, failed, _ := proxy.stats()
		t.Logf("run %d killed: %d documents in the index, %d bulk requests, %d failed", i+1, osCount(t, node, index), bulks, failed)
	}

	r := run(t, env, "run", "--progress", "off", "--from", ckpt, file)
	if r.code != 0 {
		t.Fatalf("resumed run: exit %d\n%s", r.code, r.stderr)
	}
	bulks, failed, _ := proxy.stats()
	t.Logf("%d bulk requests, %d failed by the proxy; last run: %s", bulks, failed, firstMatch(r.stderr, `job .* restarts`))
	restarts += countRestarts(r.stderr)
	t.Logf("%d restarts in the three runs", restarts)
	if failed < 10 || restarts < failed {
		t.Fatalf("%d injected failures and %d restarts, want at least 10 of each", failed, restarts)
	}

	hits := osAll(t, node, index)
	if len(hits) != ids {
		t.Errorf("the index holds %d documents, want %d", len(hits), ids)
	}
	seen := make(map[string]bool, len(hits))
	for _, h := range hits {
		if seen[h.ID] {
			t.Fatalf("id %s twice", h.ID)
		}
		seen[h.ID] = true
		id, err := strconv.Atoi(h.ID)
		if err != nil || id < 0 || id >= ids {
			t.Fatalf("unexpected id %q", h.ID)
		}
		want := map[string]any{"id": float64(id), "version": float64(2), "customer": fmt.Sprintf("customer-%d", id%100),
			"amount_cents": float64((2*ids + id) * 100)}
		if fmt.Sprint(h.Source) != fmt.Sprint(want) {
			t.Fatalf("document %s is %v, want %v (its last version)", h.ID, h.Source, want)
		}
	}
	for id := range ids {
		if !seen[strconv.Itoa(id)] {
			t.Fatalf("order %d is missing", id)
		}
	}
}

// countRestarts counts the restarts a run logged: of the job, or of a
// region (the failed task and those connected to it).
func countRestarts(stderr string) int {
	return strings.Count(stderr, "job failed; restarting") + strings.Count(stderr, "task failed; restarting its region")
}

func firstMatch(s, re string) string { return regexp.MustCompile(re).FindString(s) }

// genToOpenSearch is a pipeline from a file of JSON lines to opensearch.
func fileToOpenSearch(sinkOpts, extra string) string {
	return `name: ${NAME}
restart:
  strategy: fixed-delay
  attempts: 1
  delay: 100ms
checkpoint:
  interval: 200ms
source:
  type: file
  options:
    paths: ["${IN}"]
transforms:
  - map: '{"id": id, "amount": id == 5 ? "not-a-number" : id}'
sink:
  type: opensearch
  options:
    hosts: ["${HOSTS}"]
` + sinkOpts + extra
}

func osInput(t *testing.T, dir string, n int) string {
	t.Helper()
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "{\"id\": %d}\n", i)
	}
	p := filepath.Join(dir, "in.jsonl")
	if err := os.WriteFile(p, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOpenSearchBadInput: an unreachable node, a document the mapping
// rejects (fail and drop), an index expression that fails, exactly-once
// without an id.
func TestOpenSearchBadInput(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	dir := t.TempDir()
	in := osInput(t, dir, 20)

	t.Run("unreachable", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		file := writePipeline(t, t.TempDir(), fileToOpenSearch(`    index: x
    id: string(id)
    sink.bulk-flush.backoff.max-retries: 1
    sink.bulk-flush.backoff.delay: 10ms
    sink.bulk-flush.backoff.max-delay: 20ms
`, ""))
		// The host is written in the file: a value from the environment
		// would be shown as ${HOSTS}.
		yaml, _ := os.ReadFile(file)
		file = writePipeline(t, t.TempDir(), strings.ReplaceAll(string(yaml), "${HOSTS}", "http://"+addr))
		r := run(t, []string{"NAME=unreachable", "IN=" + in}, "run", "--progress", "off", file)
		if r.code != 1 || !strings.Contains(r.stderr, "no answer from http://"+addr) {
			t.Fatalf("exit %d, want 1 and a message naming %s\n%s", r.code, addr, r.stderr)
		}
	})

	t.Run("exactly-once needs an id", func(t *testing.T) {
		file := writePipeline(t, t.TempDir(), fileToOpenSearch("    index: x\n", ""))
		r := run(t, []string{"NAME=noid", "IN=" + in, "HOSTS=http://127.0.0.1:9"}, "validate", file)
		if r.code != 2 || !strings.Contains(r.stderr, "sink: id: ") || !strings.Contains(r.stderr, "exactly-once needs a document id") {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		file = writePipeline(t, t.TempDir(), "delivery: at-least-once\n"+fileToOpenSearch("    index: x\n", ""))
		if r := run(t, []string{"NAME=noid", "IN=" + in, "HOSTS=http://127.0.0.1:9"}, "validate", file); r.code != 0 {
			t.Fatalf("at-least-once without id: exit %d\n%s", r.code, r.stderr)
		}
	})

	node := osNode(t)
	mapped := func(t *testing.T) string {
		index := osIndexName("cli-bad")
		code, b := osDo(t, http.MethodPut, node+"/"+index, `{"mappings": {"properties": {"amount": {"type": "integer"}}}}`)
		if code != http.StatusOK {
			t.Fatalf("create index: %d %s", code, b)
		}
		return index
	}

	t.Run("mapping rejects under fail", func(t *testing.T) {
		index := mapped(t)
		file := writePipeline(t, t.TempDir(), fileToOpenSearch("    index: "+index+"\n    id: '\"doc-\" + string(id)'\n", ""))
		r := run(t, []string{"NAME=rejectfail", "IN=" + in, "HOSTS=" + node}, "run", "--progress", "off", file)
		checkFailedFast(t, r, index, `"doc-5"`, "mapper_parsing_exception")
	})

	t.Run("mapping rejects under drop", func(t *testing.T) {
		index := mapped(t)
		file := writePipeline(t, t.TempDir(), fileToOpenSearch("    index: ${INDEX}\n    id: string(id)\n    on-item-error: drop\n", ""))
		r := run(t, []string{"NAME=rejectdrop", "IN=" + in, "HOSTS=" + node, "INDEX=" + index}, "run", "--progress", "off", file)
		if r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		if n := osCount(t, node, index); n != 19 {
			t.Fatalf("%d documents, want 19", n)
		}
		if !strings.Contains(r.stderr, "mapper_parsing_exception") {
			t.Errorf("the drop is not logged with its reason\n%s", r.stderr)
		}
	})

	t.Run("index expression fails", func(t *testing.T) {
		file := writePipeline(t, t.TempDir(), fileToOpenSearch("    index-expr: 'id == 7 ? 42 : \"cli-ok\"'\n    id: string(id)\n", ""))
		r := run(t, []string{"NAME=indexfail", "IN=" + in, "HOSTS=" + node}, "run", "--progress", "off", file)
		checkFailedFast(t, r, `sink "opensearch" option index-expr at file ${IN} offset 70`, "returned a int, want a string")
	})

	t.Run("index expression fails under on-error dead-letter", func(t *testing.T) {
		dir := t.TempDir()
		dead := filepath.Join(dir, "dead")
		index := osIndexName("cli-dl")
		file := writePipeline(t, dir, fileToOpenSearch("    index-expr: 'id == 7 ? 42 : \""+index+"\"'\n    id: string(id)\n    on-item-error: drop\n", `on-error: dead-letter
dead-letter:
  type: file
  options:
    path: ${DEAD}
`))
		r := run(t, []string{"NAME=indexdead", "IN=" + in, "HOSTS=" + node, "DEAD=" + dead}, "run", "--progress", "off", file)
		if r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		// 18: id 7 is a dead letter, id 5 (amount "not-a-number") is
		// rejected by the dynamic mapping and dropped.
		if n := osCount(t, node, index); n != 18 {
			t.Fatalf("%d documents, want 18", n)
		}
		letters := 0
		eachCommittedRecord(t, dead, func(name string, rec map[string]any) {
			letters++
			r, _ := rec["record"].(map[string]any)
			if fmt.Sprint(r["id"]) != "7" || !strings.Contains(fmt.Sprint(rec["error"]), "option index-expr") || fmt.Sprint(rec["offset"]) != "70" {
				t.Fatalf("%s: dead letter %v", name, rec)
			}
		})
		if letters != 1 {
			t.Fatalf("%d dead letters, want 1", letters)
		}
	})

	t.Run("index pattern without a timestamp", func(t *testing.T) {
		file := writePipeline(t, t.TempDir(), fileToOpenSearch("    index: 'cli-{yyyy.MM.dd}'\n    id: string(id)\n", ""))
		r := run(t, []string{"NAME=nots", "IN=" + in, "HOSTS=" + node}, "run", "--progress", "off", file)
		checkFailedFast(t, r, `sink "opensearch" option index at file ${IN} offset 0`, "no meta.timestamp")
	})
}

// TestOpenSearchWrongCredentials: the secured node of scripts/opensearch.sh
// start-secure refuses a wrong password; the error names the node, not
// the password.
func TestOpenSearchWrongCredentials(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	cf := os.Getenv("SLUICE_OPENSEARCH_SECURE")
	if cf == "" {
		t.Skip("SLUICE_OPENSEARCH_SECURE is not set: start a node with `eval \"$(scripts/opensearch.sh start-secure)\"; export SLUICE_OPENSEARCH_SECURE`")
	}
	b, err := os.ReadFile(cf)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		URL      string `json:"url"`
		CAFile   string `json:"ca_file"`
		Username string `json:"user"`
		Password string `json:"password"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	in := osInput(t, dir, 5)
	file := writePipeline(t, dir, fileToOpenSearch(`    index: cli-secure
    id: string(id)
    username: ${OS_USER}
    password: ${OS_PASSWORD}
    tls.ca-file: ${OS_CA}
`, ""))
	// The host is written in the file: a value from the environment is
	// shown as ${HOSTS}.
	yaml, _ := os.ReadFile(file)
	file = writePipeline(t, dir, strings.ReplaceAll(string(yaml), "${HOSTS}", c.URL))
	wrong := "wrong-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	r := run(t, []string{"NAME=wrongpw", "IN=" + in, "OS_USER=" + c.Username, "OS_PASSWORD=" + wrong, "OS_CA=" + c.CAFile},
		"run", "--progress", "off", file)
	u, _ := url.Parse(c.URL)
	if r.code != 1 || !strings.Contains(r.stderr, "401") || !strings.Contains(r.stderr, u.Host) {
		t.Fatalf("exit %d, want 1 with a 401 naming %s\n%s", r.code, u.Host, r.stderr)
	}
	if strings.Contains(r.stderr, wrong) {
		t.Fatalf("the password is printed\n%s", r.stderr)
	}
	r = run(t, []string{"NAME=rightpw", "IN=" + in, "OS_USER=" + c.Username, "OS_PASSWORD=" + c.Password, "OS_CA=" + c.CAFile},
		"run", "--progress", "off", file)
	if r.code != 0 {
		t.Fatalf("right password: exit %d\n%s", r.code, r.stderr)
	}
}

// TestOpenSearchSourceToPrint reads an index with the opensearch source
// (two slices) into the print sink: every document once, its id as
// meta.key.
func TestOpenSearchSourceToPrint(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	node := osNode(t)
	index := osIndexName("cli-src")
	var bulk strings.Builder
	const n = 250
	for i := range n {
		fmt.Fprintf(&bulk, "{\"index\": {\"_index\": %q, \"_id\": \"d%d\"}}\n{\"n\": %d}\n", index, i, i)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, node+"/_bulk?refresh=true", strings.NewReader(bulk.String()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-ndjson")
	resp, err := osHTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || bytes.Contains(b, []byte(`"errors":true`)) {
		t.Fatalf("bulk: %d %s", resp.StatusCode, b)
	}
	file := writePipeline(t, t.TempDir(), `name: os-read
parallelism: 2
source:
  type: opensearch
  options:
    hosts: ["${HOSTS}"]
    index: ${INDEX}
    slices: 2
    page-size: 40
    query: '{"range": {"n": {"gte": 50}}}'
transforms:
  - map: '{"doc": meta.key, "n": n}'
sink:
  type: print
`)
	r := run(t, []string{"HOSTS=" + node, "INDEX=" + index}, "run", "--progress", "off", file)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	seen := map[int]int{}
	for l := range strings.Lines(r.stdout) {
		var v struct {
			Doc string
			N   int
		}
		_, l, _ = strings.Cut(l, "> ") // the print sink's "<subtask>> " at parallelism 2
		if err := json.Unmarshal([]byte(l), &v); err != nil || v.Doc != fmt.Sprintf("d%d", v.N) {
			t.Fatalf("line %q: %v", l, err)
		}
		seen[v.N]++
	}
	for i := 50; i < n; i++ {
		if seen[i] != 1 {
			t.Fatalf("document %d read %d times", i, seen[i])
		}
	}
	if len(seen) != n-50 {
		t.Fatalf("%d documents, want %d", len(seen), n-50)
	}
}
