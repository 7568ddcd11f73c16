package opensearch

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectortest/fakes"
	"github.com/sluice-io/sluice/sink"
)

func TestActionLines(t *testing.T) {
	cases := []struct {
		a    Action
		want string
	}{
		{Action{Index: "i", ID: "1", Doc: []byte(`{"a":1}`)}, `{"index":{"_index":"i","_id":"1"}}` + "\n" + `{"a":1}` + "\n"},
		{Action{Op: Create, Index: "i", Routing: "r", Pipeline: "p", Doc: []byte(`{"a":1}`)}, `{"create":{"_index":"i","routing":"r","pipeline":"p"}}` + "\n" + `{"a":1}` + "\n"},
		{Action{Op: Update, Index: "i", ID: "x\"y\n", Doc: []byte("{\n  \"a\": 1\n}\n")}, `{"update":{"_index":"i","_id":"x\"y\n"}}` + "\n" + `{"doc":{"a":1},"doc_as_upsert":true}` + "\n"},
		{Action{Op: Delete, Index: "i", ID: "7", Version: 42, ExternalVersion: true}, `{"delete":{"_index":"i","_id":"7","version":42,"version_type":"external"}}` + "\n"},
		{Action{Index: "i", ID: "\x01é\xff", Doc: []byte(`{}`)}, `{"index":{"_index":"i","_id":"\u0001é\ufffd"}}` + "\n{}\n"},
	}
	for _, c := range cases {
		if err := c.a.validate(false, true); err != nil {
			t.Errorf("%+v: %v", c.a, err)
			continue
		}
		got, err := c.a.appendTo(nil)
		if err != nil || string(got) != c.want {
			t.Errorf("%+v:\n got %q, %v\nwant %q", c.a, got, err, c.want)
		}
		// every line is JSON
		for line := range strings.SplitSeq(strings.TrimSuffix(string(got), "\n"), "\n") {
			if !json.Valid([]byte(line)) {
				t.Errorf("line %q is not JSON", line)
			}
		}
	}
	if _, err := (&Action{Index: "i", ID: "1", Doc: []byte("{\n\"a\": }")}).appendTo(nil); err == nil {
		t.Errorf("invalid pretty-printed JSON accepted")
	}
}

func TestActionValidation(t *testing.T) {
	cases := []struct {
		a       Action
		exactly bool
		want    string
	}{
		{Action{Index: "i", Doc: []byte(`{}`)}, true, "exactly-once needs a deterministic document id"},
		{Action{Op: Update, Index: "i", Doc: []byte(`{}`)}, false, "update needs a document id"},
		{Action{Op: Delete, Index: "i"}, false, "delete needs a document id"},
		{Action{Index: "", ID: "1", Doc: []byte(`{}`)}, false, "index name is empty"},
		{Action{Index: "Logs", ID: "1", Doc: []byte(`{}`)}, false, `index name "Logs" is invalid: must be lowercase`},
		{Action{Index: "_x", ID: "1", Doc: []byte(`{}`)}, false, "must not start with"},
		{Action{Index: "a b", ID: "1", Doc: []byte(`{}`)}, false, "must not contain"},
		{Action{Index: "i", ID: "1"}, false, "has no document"},
		{Action{Op: Delete, Index: "i", ID: "1", Doc: []byte(`{}`)}, false, "delete takes none"},
		{Action{Op: Update, Index: "i", ID: "1", Doc: []byte(`{}`), Pipeline: "p"}, false, "pipelines apply to index and create only"},
		{Action{Op: Update, Index: "i", ID: "1", Doc: []byte(`{}`), ExternalVersion: true}, false, "external versioning applies to index and delete only"},
		{Action{Op: Op(9), Index: "i", ID: "1"}, false, "unknown operation"},
	}
	for _, c := range cases {
		err := c.a.validate(c.exactly, true)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one containing %q", c.a, err, c.want)
		}
	}
	if err := (&Action{Index: "i", Doc: []byte(`{}`)}).validate(false, true); err != nil {
		t.Errorf("auto id under at-least-once: %v", err)
	}
}

func TestIndexPattern(t *testing.T) {
	ts := time.Date(2026, 3, 7, 9, 5, 2, 0, time.FixedZone("x", 3600))
	for pattern, want := range map[string]string{
		"logs-{yyyy.MM.dd}":       "logs-2026.03.07",
		"logs-{yyyy-MM-dd_HH}":    "logs-2026-03-07_08",
		"m-{yy}{MM}":              "m-2603",
		"w-{yyyy}-{ww}":           "w-2026-10",
		"plain":                   "plain",
		"t-{HH.mm.ss}-x":          "t-08.05.02-x",
		"a-{yyyy}-b-{dd}-c-{MM}-": "a-2026-b-07-c-03-",
	} {
		p, err := ParseIndexPattern(pattern)
		if err != nil {
			t.Errorf("%s: %v", pattern, err)
			continue
		}
		if got := p.Format(ts); got != want {
			t.Errorf("%s: got %s, want %s", pattern, got, want)
		}
		if got := p.FormatMillis(ts.UnixMilli()); got != want {
			t.Errorf("%s (millis): got %s, want %s", pattern, got, want)
		}
	}
	for pattern, want := range map[string]string{
		"logs-{yyyy.MM.dd":  "{ without }",
		"logs-}":            "} without {",
		"logs-{}":           "empty {}",
		"logs-{yyyy.QQ}":    `unknown date part "QQ"`,
		"Logs-{yyyy}":       "must be lowercase",
		"logs-{yyyy}}":      "} without {",
		"x}-{yyyy}":         "} without {",
		"logs {yyyy.MM.dd}": "must not contain",
	} {
		if _, err := ParseIndexPattern(pattern); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), pattern) {
			t.Errorf("%s: error %v, want one naming the pattern and %q", pattern, err, want)
		}
	}
}

func TestConfigErrors(t *testing.T) {
	doc := func(int, sink.Meta) (Action, error) { return Action{}, nil }
	cases := []struct {
		urls []string
		opts []SinkOption
		want string
	}{
		{nil, nil, "no node URLs"},
		{[]string{"ftp://x"}, nil, "scheme must be http or https"},
		{[]string{"http://u:secret@"}, nil, "has no host"},
		{[]string{"http://x"}, []SinkOption{AutoIDs()}, "AutoIDs with ExactlyOnce"},
		{[]string{"http://x"}, []SinkOption{BulkActions(0)}, "BulkActions is 0"},
		{[]string{"http://x"}, []SinkOption{BulkBytes(10)}, "BulkBytes is 10"},
		{[]string{"http://x"}, []SinkOption{MaxInFlightRequests(0)}, "MaxInFlightRequests is 0"},
		{[]string{"http://x"}, []SinkOption{MaxTries(0)}, "MaxTries is 0"},
		{[]string{"http://x"}, []SinkOption{Backoff(time.Second, time.Millisecond)}, "Backoff"},
		{[]string{"http://x"}, []SinkOption{OnItemFailure(DeadLetter)}, "without DeadLetterTo"},
		{[]string{"http://x"}, []SinkOption{BasicAuth("u", "secret"), APIKey("k")}, "both BasicAuth and APIKey"},
		{[]string{"http://x"}, []SinkOption{Refresh("now")}, `Refresh is "now"`},
		{[]string{"http://x"}, []SinkOption{DeliveryGuarantee(Guarantee(7))}, "DeliveryGuarantee"},
	}
	for _, c := range cases {
		_, err := NewSink(c.urls, doc, c.opts...)
		if err == nil || !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %d opts: error %v, want ErrInvalidConfig with %q", c.urls, len(c.opts), err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("error %q shows the password", err)
		}
	}
	if _, err := NewSink[int]([]string{"http://x"}, nil); err == nil || !strings.Contains(err.Error(), "document function is nil") {
		t.Errorf("nil doc: %v", err)
	}
	if _, err := NewSink([]string{"http://x"}, doc, AutoIDs(), DeliveryGuarantee(AtLeastOnce)); err != nil {
		t.Errorf("AutoIDs with AtLeastOnce: %v", err)
	}
}

// fakeNode is an httptest OpenSearch: it answers GET / and _bulk with
// what its bulk function returns, and records bulk bodies.
type fakeNode struct {
	mu     sync.Mutex
	bodies []string
	hdrs   []http.Header
	bulk   func(n int, body string) (int, string) // n: 1-based bulk request count
	count  atomic.Int64
}

func (f *fakeNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.hdrs = append(f.hdrs, r.Header.Clone())
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/" && r.Method == http.MethodGet:
		_, _ = w.Write([]byte(`{"version":{"distribution":"opensearch","number":"2.19.6"}}`))
	case r.URL.Path == "/_bulk":
		f.mu.Lock()
		f.bodies = append(f.bodies, string(body))
		f.mu.Unlock()
		n := int(f.count.Add(1))
		status, resp := http.StatusOK, ""
		if f.bulk != nil {
			status, resp = f.bulk(n, string(body))
		}
		if resp == "" {
			resp = okResponse(string(body))
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(resp))
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func (f *fakeNode) bulkBodies() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.bodies...)
}

// actionLines returns the action lines of a bulk body.
func actionLines(body string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, `{"index":{`) || strings.HasPrefix(l, `{"create":{`) || strings.HasPrefix(l, `{"update":{`) || strings.HasPrefix(l, `{"delete":{`) {
			out = append(out, l)
		}
	}
	return out
}

func okResponse(body string) string {
	n := len(actionLines(body))
	items := make([]string, n)
	for i := range items {
		items[i] = `{"index":{"status":201}}`
	}
	return `{"errors":false,"items":[` + strings.Join(items, ",") + `]}`
}

func intDoc(index string) func(int, sink.Meta) (Action, error) {
	return func(v int, _ sink.Meta) (Action, error) {
		return Action{Index: index, ID: fmt.Sprint(v), Doc: fmt.Appendf(nil, `{"v":%d}`, v)}, nil
	}
}

func newWriter(t *testing.T, url string, doc func(int, sink.Meta) (Action, error), opts ...SinkOption) (sink.Writer[int], *fakes.InitContext) {
	t.Helper()
	s, err := NewSink([]string{url}, doc, append([]SinkOption{Logger(discardLogger())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ic := &fakes.InitContext{}
	w, err := s.CreateWriter(t.Context(), ic)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w, ic
}

// TestItemsRejectedWith429AreRetried: the fake answers the first bulk
// request with 429 for two of its documents; only those are sent again.
func TestItemsRejectedWith429AreRetried(t *testing.T) {
	f := &fakeNode{bulk: func(n int, body string) (int, string) {
		if n == 1 {
			return 200, `{"errors":true,"items":[{"index":{"status":201}},{"index":{"status":429,"error":{"type":"es_rejected_execution_exception","reason":"queue full"}}},{"index":{"status":201}},{"index":{"status":503,"error":{"type":"unavailable_shards_exception","reason":"primary not active"}}}]}`
		}
		return 200, ""
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	w, ic := newWriter(t, srv.URL, intDoc("i"), Backoff(time.Millisecond, time.Millisecond))
	for v := range 4 {
		if err := w.Write(t.Context(), v, sink.Meta{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	b := f.bulkBodies()
	if len(b) != 2 {
		t.Fatalf("%d bulk requests, want 2", len(b))
	}
	if got := actionLines(b[1]); len(got) != 2 || !strings.Contains(got[0], `"_id":"1"`) || !strings.Contains(got[1], `"_id":"3"`) {
		t.Errorf("retry carried %v, want ids 1 and 3", got)
	}
	if !strings.Contains(b[1], `{"v":1}`) || !strings.Contains(b[1], `{"v":3}`) {
		t.Errorf("retry body %q lacks the documents", b[1])
	}
	if g := ic.Registry.Sum(MetricRejectedItems); g != 1 {
		t.Errorf("%s = %d, want 1", MetricRejectedItems, g)
	}
}

// TestItemRetriesAreBounded: documents rejected with 429 on every try
// fail the writer after MaxTries, naming the document.
func TestItemRetriesAreBounded(t *testing.T) {
	f := &fakeNode{bulk: func(int, string) (int, string) {
		return 200, `{"errors":true,"items":[{"index":{"status":429,"error":{"type":"es_rejected_execution_exception","reason":"queue full"}}}]}`
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	w, _ := newWriter(t, srv.URL, intDoc("i"), Backoff(time.Millisecond, time.Millisecond), MaxTries(3))
	if err := w.Write(t.Context(), 5, sink.Meta{}); err != nil {
		t.Fatal(err)
	}
	err := w.Flush(t.Context(), false)
	if err == nil || !strings.Contains(err.Error(), "after 3 tries") || !strings.Contains(err.Error(), `id "5"`) {
		t.Errorf("Flush = %v, want a failure after 3 tries naming id 5", err)
	}
	if n := len(f.bulkBodies()); n != 3 {
		t.Errorf("%d bulk requests, want 3", n)
	}
	if err := w.Write(t.Context(), 6, sink.Meta{}); err == nil {
		t.Errorf("Write after a failed request succeeded")
	}
}

// TestRequestStatusNotRetried: 400 and 401 fail at once, with the
// server's reason and without the password.
func TestRequestStatusNotRetried(t *testing.T) {
	for _, status := range []int{400, 401, 413} {
		f := &fakeNode{bulk: func(int, string) (int, string) {
			return status, `{"error":{"type":"some_exception","reason":"because"},"status":` + fmt.Sprint(status) + `}`
		}}
		srv := httptest.NewServer(f)
		w, _ := newWriter(t, srv.URL, intDoc("i"), BasicAuth("user", "hunter2"), Backoff(time.Millisecond, time.Millisecond))
		_ = w.Write(t.Context(), 1, sink.Meta{})
		err := w.Flush(t.Context(), false)
		if err == nil || !errors.Is(err, ErrRequestFailed) || !strings.Contains(err.Error(), fmt.Sprintf("status %d: some_exception: because", status)) || !strings.Contains(err.Error(), srv.URL) {
			t.Errorf("status %d: Flush = %v, want ErrRequestFailed naming node, status and reason", status, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error shows the password: %v", err)
		}
		if n := len(f.bulkBodies()); n != 1 {
			t.Errorf("status %d: %d requests, want 1 (not retried)", status, n)
		}
		_ = w.Close()
		srv.Close()
	}
}

// TestUnreachableNode: CreateWriter gives up after MaxTries with an error
// naming the node.
func TestUnreachableNode(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	s, err := NewSink([]string{"http://user:hunter2@" + addr}, intDoc("i"), MaxTries(2), Backoff(time.Millisecond, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateWriter(t.Context(), &fakes.InitContext{})
	if err == nil || !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "after 2 tries") {
		t.Errorf("CreateWriter = %v, want ErrUnreachable naming %s after 2 tries", err, addr)
	}
	if err != nil && strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error shows the password: %v", err)
	}
}

// TestFlushWaitsForAcknowledgement: Flush returns only after the node
// answered every request: a checkpoint never completes before its data
// is written.
func TestFlushWaitsForAcknowledgement(t *testing.T) {
	release := make(chan struct{})
	var answered atomic.Int64
	f := &fakeNode{bulk: func(int, string) (int, string) {
		<-release
		answered.Add(1)
		return 200, ""
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	w, _ := newWriter(t, srv.URL, intDoc("i"), BulkActions(2), MaxInFlightRequests(2))
	for v := range 5 {
		if err := w.Write(t.Context(), v, sink.Meta{}); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- w.Flush(t.Context(), false) }()
	// Flush must not return while the node holds the requests.
	select {
	case err := <-done:
		t.Fatalf("Flush returned (%v) before the node answered", err)
	case <-time.After(200 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := answered.Load(); got != 3 {
		t.Errorf("%d requests answered when Flush returned, want 3", got)
	}
}

// TestBackpressure: with the node holding one request, a writer with one
// request in flight fills one more batch and then blocks in Write.
func TestBackpressure(t *testing.T) {
	release := make(chan struct{})
	f := &fakeNode{bulk: func(int, string) (int, string) { <-release; return 200, "" }}
	srv := httptest.NewServer(f)
	defer srv.Close()
	defer close(release)
	w, _ := newWriter(t, srv.URL, intDoc("i"), BulkActions(10), FlushInterval(0))
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	var err error
	written := 0
	for v := range 1000 {
		if err = w.Write(ctx, v, sink.Meta{}); err != nil {
			break
		}
		written++
	}
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Write never blocked (err %v)", err)
	}
	// one batch in flight, one waiting for a slot; the 20th record filled it
	if written != 19 {
		t.Errorf("%d records accepted before Write blocked, want 19", written)
	}
}

// TestFlushInterval: a partly filled batch is sent without a checkpoint
// once it is FlushInterval old.
func TestFlushInterval(t *testing.T) {
	f := &fakeNode{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	w, _ := newWriter(t, srv.URL, intDoc("i"), FlushInterval(20*time.Millisecond))
	if err := w.Write(t.Context(), 1, sink.Meta{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(f.bulkBodies()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the batch was not sent within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestBulkBytes: a batch is sent once its body reaches BulkBytes.
func TestBulkBytes(t *testing.T) {
	f := &fakeNode{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	big := strings.Repeat("x", 600)
	w, _ := newWriter(t, srv.URL, func(v int, _ sink.Meta) (Action, error) {
		return Action{Index: "i", ID: fmt.Sprint(v), Doc: []byte(`{"s":"` + big + `"}`)}, nil
	}, BulkBytes(2048), FlushInterval(0))
	for v := range 10 {
		if err := w.Write(t.Context(), v, sink.Meta{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(t.Context(), false); err != nil {
		t.Fatal(err)
	}
	b := f.bulkBodies()
	if len(b) != 3 { // 4 actions (about 645 bytes each) reach 2048 bytes; the last 2 go at the flush
		t.Fatalf("%d bulk requests, want 3", len(b))
	}
	for i, body := range b[:len(b)-1] {
		if len(body) < 2048 || len(body) > 2048+700 {
			t.Errorf("request %d: %d bytes, want 2048 plus at most one action", i, len(body))
		}
	}
}

// TestReplayConflictsCountAsWritten: a create whose id exists and an
// external version not above the stored one are replays, not failures.
func TestReplayConflictsCountAsWritten(t *testing.T) {
	f := &fakeNode{bulk: func(int, string) (int, string) {
		return 200, `{"errors":true,"items":[{"create":{"status":409,"error":{"type":"version_conflict_engine_exception","reason":"document already exists"}}},{"index":{"status":409,"error":{"type":"version_conflict_engine_exception","reason":"current version [9] is higher"}}},{"index":{"status":409,"error":{"type":"version_conflict_engine_exception","reason":"internal"}}}]}`
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	acts := []Action{
		{Op: Create, Index: "i", ID: "a", Doc: []byte(`{}`)},
		{Index: "i", ID: "b", Doc: []byte(`{}`), Version: 3, ExternalVersion: true},
		{Index: "i", ID: "c", Doc: []byte(`{}`)},
	}
	w, ic := newWriter(t, srv.URL, func(v int, _ sink.Meta) (Action, error) { return acts[v], nil })
	for v := range acts {
		_ = w.Write(t.Context(), v, sink.Meta{})
	}
	err := w.Flush(t.Context(), false)
	var ie *ItemError
	if !errors.As(err, &ie) || ie.ID != "c" || ie.Status != 409 {
		t.Errorf("Flush = %v, want the item error of c only (a plain index conflict is a failure)", err)
	}
	if g := ic.Registry.Sum(MetricConflictsSkipped); g != 2 {
		t.Errorf("%s = %d, want 2", MetricConflictsSkipped, g)
	}
}

// TestTLSAndAuthHeaders: against an httptest TLS server (the integration
// distribution has no security plugin, so TLS and authentication are
// tested here): the CA file is trusted, an unknown CA is refused unless
// InsecureSkipVerify, basic auth and API key reach the server, and a 401
// names the node but not the password.
func TestTLSAndAuthHeaders(t *testing.T) {
	f := &fakeNode{}
	var wantAuth atomic.Value
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != wantAuth.Load().(string) {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"type":"security_exception","reason":"missing authentication credentials"},"status":401}`))
			return
		}
		f.ServeHTTP(w, r)
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("alice:s3cret"))
	write := func(opts ...SinkOption) error {
		s, err := NewSink([]string{srv.URL}, intDoc("i"), append([]SinkOption{MaxTries(1), Logger(discardLogger())}, opts...)...)
		if err != nil {
			return err
		}
		w, err := s.CreateWriter(t.Context(), &fakes.InitContext{})
		if err != nil {
			return err
		}
		defer w.Close()
		if err := w.Write(t.Context(), 1, sink.Meta{}); err != nil {
			return err
		}
		return w.Flush(t.Context(), false)
	}
	wantAuth.Store(basic)
	if err := write(CAFile(ca), BasicAuth("alice", "s3cret")); err != nil {
		t.Errorf("CA file + basic auth: %v", err)
	}
	if err := write(BasicAuth("alice", "s3cret")); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("unknown CA: %v, want a certificate error", err)
	}
	if err := write(InsecureSkipVerify(), BasicAuth("alice", "s3cret")); err != nil {
		t.Errorf("InsecureSkipVerify: %v", err)
	}
	err := write(CAFile(ca), BasicAuth("alice", "wrong-pass"))
	if err == nil || !strings.Contains(err.Error(), "status 401") || !strings.Contains(err.Error(), srv.URL) || strings.Contains(err.Error(), "wrong-pass") {
		t.Errorf("wrong password: %v, want a 401 naming the node and not the password", err)
	}
	wantAuth.Store("ApiKey a2V5OnNlY3JldA==")
	if err := write(CAFile(ca), APIKey("a2V5OnNlY3JldA==")); err != nil {
		t.Errorf("API key: %v", err)
	}
	if err := write(CAFile(filepath.Join(t.TempDir(), "missing.pem"))); err == nil || !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("missing CA file: %v", err)
	}
	if n := len(f.bulkBodies()); n != 3 {
		t.Errorf("%d bulk requests reached the node, want 3", n)
	}
	if !bytes.Contains([]byte(strings.Join(f.bulkBodies(), "")), []byte(`{"v":1}`)) {
		t.Errorf("bodies lack the document")
	}
}

// TestDocumentFunctionErrors: an error from the document function or an
// invalid action fails Write with a message naming it.
func TestDocumentFunctionErrors(t *testing.T) {
	f := &fakeNode{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	w, _ := newWriter(t, srv.URL, func(v int, _ sink.Meta) (Action, error) {
		if v == 1 {
			return Action{}, errors.New("field ts missing")
		}
		return Action{Index: "Bad-Index", ID: "x", Doc: []byte(`{}`)}, nil
	})
	if err := w.Write(t.Context(), 1, sink.Meta{}); err == nil || !strings.Contains(err.Error(), "document function failed: field ts missing") {
		t.Errorf("Write = %v", err)
	}
	if err := w.Write(t.Context(), 2, sink.Meta{}); err == nil || !errors.Is(err, ErrInvalidAction) || !strings.Contains(err.Error(), `"Bad-Index"`) {
		t.Errorf("Write = %v, want ErrInvalidAction naming the index", err)
	}
}

// TestCloseDoesNotWaitForStuckRequests: with a request stuck on the node
// and the interval ticker waiting for a request slot, Close cancels the
// request and returns instead of waiting for the node.
func TestCloseDoesNotWaitForStuckRequests(t *testing.T) {
	release := make(chan struct{})
	got := make(chan struct{}, 16)
	f := &fakeNode{bulk: func(int, string) (int, string) {
		got <- struct{}{}
		<-release
		return 200, ""
	}}
	srv := httptest.NewServer(f)
	defer srv.Close()
	defer close(release) // before srv.Close, which waits for the handlers
	s, err := NewSink([]string{srv.URL}, intDoc("i"), FlushInterval(10*time.Millisecond), Logger(discardLogger()))
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.CreateWriter(t.Context(), &fakes.InitContext{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(t.Context(), 1, sink.Meta{}); err != nil {
		t.Fatal(err)
	}
	<-got // the first request is in flight and stays there
	if err := w.Write(t.Context(), 2, sink.Meta{}); err != nil {
		t.Fatal(err)
	}
	wr := w.(*writer[int])
	// Wait (bounded) until the ticker took the second batch and waits for the slot.
	for i := 0; ; i++ {
		wr.mu.Lock()
		taken := wr.cur == nil
		wr.mu.Unlock()
		if taken {
			break
		}
		if i > 2000 {
			t.Fatal("the ticker did not take the batch within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	closed := make(chan error, 1)
	go func() { closed <- w.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Close still waits for the stuck request after 20 s")
	}
}

// TestBadDocumentSendsNothing: a document that is not valid JSON fails
// Write naming it, and the empty batch it leaves is not sent.
func TestBadDocumentSendsNothing(t *testing.T) {
	f := &fakeNode{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	w, _ := newWriter(t, srv.URL, func(v int, _ sink.Meta) (Action, error) {
		return Action{Index: "i", ID: fmt.Sprint(v), Doc: []byte("{\n\"a\": }")}, nil
	})
	if err := w.Write(t.Context(), 3, sink.Meta{}); err == nil || !errors.Is(err, ErrInvalidAction) || !strings.Contains(err.Error(), `id "3"`) {
		t.Errorf("Write = %v, want ErrInvalidAction naming id 3", err)
	}
	if err := w.Flush(t.Context(), false); err != nil {
		t.Errorf("Flush = %v", err)
	}
	if n := len(f.bulkBodies()); n != 0 {
		t.Errorf("%d bulk requests sent, want none", n)
	}
}

// TestEmptyIndexRefused: an action without an index fails Write, also as
// the writer's first action.
func TestEmptyIndexRefused(t *testing.T) {
	f := &fakeNode{}
	srv := httptest.NewServer(f)
	defer srv.Close()
	w, _ := newWriter(t, srv.URL, func(v int, _ sink.Meta) (Action, error) {
		return Action{ID: fmt.Sprint(v), Doc: []byte(`{}`)}, nil
	})
	if err := w.Write(t.Context(), 1, sink.Meta{}); err == nil || !errors.Is(err, ErrInvalidAction) || !strings.Contains(err.Error(), "index name is empty") {
		t.Errorf("Write = %v, want ErrInvalidAction: index name is empty", err)
	}
}
