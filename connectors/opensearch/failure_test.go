package opensearch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// genRec is a generated record: one version of the document with id ID.
type genRec struct {
	K       int64  `json:"k"` // the datagen index: later versions have larger ones
	ID      string `json:"-"`
	Split   int    `json:"split"`
	Seq     int64  `json:"seq"`
	Payload string `json:"payload"`
}

// versions returns a generator of n records in splits splits where records
// seq and seq+per/2 of a split are two versions of one document: the
// later one must be what the index ends with.
func versions(n int64, splits int) func(int64) genRec {
	per := n / int64(splits)
	half := per / 2
	return func(k int64) genRec {
		split, seq := int(k/per), k%per
		return genRec{K: k, ID: fmt.Sprintf("d-%d-%d", split, seq%half), Split: split, Seq: seq,
			Payload: strings.Repeat(strconv.FormatInt(k*7919%100003, 36), 4)}
	}
}

// lastVersions returns the document each id must end with.
func lastVersions(gen func(int64) genRec, n int64) map[string]genRec {
	want := map[string]genRec{}
	for k := range n {
		r := gen(k)
		if old, ok := want[r.ID]; !ok || old.K < r.K {
			want[r.ID] = r
		}
	}
	return want
}

type jobSpec struct {
	n        int64
	splits   int
	par      int
	rate     float64
	plan     *faultinject.Plan
	restarts int
	timeout  time.Duration
	reg      *metrics.Registry
}

// runJob runs datagen → opensearch sink.
func runJob(t *testing.T, js jobSpec, gen func(int64) genRec, snk sink.Sink[genRec]) (*stream.Result, error) {
	t.Helper()
	if js.timeout == 0 {
		js.timeout = 2 * time.Minute
	}
	opts := []stream.Option{stream.Parallelism(js.par), stream.CheckpointEvery(50 * time.Millisecond),
		stream.Restart(restart.FixedDelay(js.restarts, 0)), stream.Logger(stream.DiscardLogger())}
	if js.reg != nil {
		opts = append(opts, stream.Metrics(js.reg))
	}
	env := stream.New(opts...)
	dopts := []datagen.Option{datagen.Count(js.n), datagen.Splits(js.splits)}
	if js.rate > 0 {
		dopts = append(dopts, datagen.RatePerSecond(js.rate))
	}
	src := faultinject.WrapSource(datagen.New(gen, dopts...), js.plan)
	stream.SinkTo(stream.FromSource(env, src, watermark.None[genRec](), "gen"), faultinject.WrapSink(snk, js.plan), "opensearch")
	ctx, cancel := context.WithTimeout(t.Context(), js.timeout)
	defer cancel()
	return env.Execute(ctx, "gen-to-opensearch")
}

// indexDoc is the sink's document function for genRec in index.
func indexDoc(index string, op Op, external bool) func(genRec, sink.Meta) (Action, error) {
	return func(r genRec, _ sink.Meta) (Action, error) {
		doc, err := json.Marshal(r)
		return Action{Op: op, Index: index, ID: r.ID, Doc: doc, Version: r.K, ExternalVersion: external}, err
	}
}

// checkIndex compares the index with want: count, every id once, fields
// equal.
func checkIndex(t *testing.T, a admin, index string, want map[string]genRec) {
	t.Helper()
	hits, err := a.readAll(index)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	bad := 0
	for _, h := range hits {
		if seen[h.ID] {
			t.Errorf("id %s twice", h.ID)
		}
		seen[h.ID] = true
		w, ok := want[h.ID]
		if !ok {
			t.Errorf("unexpected document %s", h.ID)
			continue
		}
		var got genRec
		if err := json.Unmarshal(h.Source, &got); err != nil {
			t.Fatalf("document %s: %v", h.ID, err)
		}
		got.ID = h.ID
		if got != w {
			if bad++; bad <= 5 {
				t.Errorf("document %s = %+v, want the last version %+v", h.ID, got, w)
			}
		}
	}
	missing := 0
	for id := range want {
		if !seen[id] {
			if missing++; missing <= 5 {
				t.Errorf("document %s missing", id)
			}
		}
	}
	if len(hits) != len(want) || bad > 0 || missing > 0 {
		t.Errorf("index %s: %d documents, want %d; %d missing, %d with wrong fields", index, len(hits), len(want), missing, bad)
	}
}

var genProps = map[string]any{
	"k": map[string]any{"type": "long"}, "split": map[string]any{"type": "integer"},
	"seq": map[string]any{"type": "long"}, "payload": map[string]any{"type": "keyword"},
}

// TestExactlyOnceUnderFailures: datagen → opensearch at parallelism 3
// with checkpoints every 50 ms and seeded random failures of readers
// (after N records, during a snapshot) and writers (after N records),
// each restoring from the last checkpoint. Every document is written in
// two versions; the index must end with every id once holding its last
// version — for index, update (doc_as_upsert) and index with external
// versions (the datagen index as the version).
func TestExactlyOnceUnderFailures(t *testing.T) {
	forEachNode(t, func(t *testing.T, base string) {
		a := admin{base: base}
		cases := []struct {
			name     string
			op       Op
			external bool
			seed     int64
		}{
			{"index", Index, false, 1},
			{"update", Update, false, 2},
			{"external-version", Index, true, 3},
		}
		const n, splits, par = 12_000, 4, 3
		gen := versions(n, splits)
		want := lastVersions(gen, n)
		kinds := []faultinject.Kind{faultinject.AfterRecords, faultinject.DuringSnapshot, faultinject.WriterAfterRecords}
		fired := 0
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				index := uniqueIndex("eo")
				if err := a.createIndex(index, genProps); err != nil {
					t.Fatal(err)
				}
				defer a.deleteIndex(index)
				snk, err := NewSink([]string{base}, indexDoc(index, c.op, c.external), BulkActions(300))
				if err != nil {
					t.Fatal(err)
				}
				plan := faultinject.RandomPlan(c.seed, 5, kinds, par, n/par/2, 20)
				res, err := runJob(t, jobSpec{n: n, splits: splits, par: par, rate: 6000, plan: plan, restarts: 10}, gen, snk)
				if err != nil {
					t.Fatalf("job: %v (fired %v)", err, plan.Fired())
				}
				fired += len(plan.Fired())
				t.Logf("fired %v; %d restarts, %d checkpoints", plan.Fired(), res.Restarts, res.Checkpoints.Completed)
				checkIndex(t, a, index, want)
			})
		}
		if fired < 10 {
			t.Errorf("only %d injected failures fired, want at least 10", fired)
		}
	})
}

// TestItemFailurePolicies: documents whose field "k" is not a number are
// rejected by the mapping (k: long). Fail fails the job with an error
// naming index, id and reason; DeadLetter hands exactly those documents
// over; Drop counts them; the other documents are written in every case.
func TestItemFailurePolicies(t *testing.T) {
	forEachNode(t, func(t *testing.T, base string) {
		a := admin{base: base}
		const n = 3000
		isBad := func(k int64) bool { return k%500 == 77 }
		doc := func(index string) func(int64, sink.Meta) (Action, error) {
			return func(k int64, _ sink.Meta) (Action, error) {
				d := fmt.Sprintf(`{"k":%d}`, k)
				if isBad(k) {
					d = fmt.Sprintf(`{"k":"not a number %d"}`, k)
				}
				return Action{Index: index, ID: "id-" + strconv.FormatInt(k, 10), Doc: []byte(d)}, nil
			}
		}
		var wantBad, wantGood []string
		for k := range int64(n) {
			if isBad(k) {
				wantBad = append(wantBad, "id-"+strconv.FormatInt(k, 10))
			} else {
				wantGood = append(wantGood, "id-"+strconv.FormatInt(k, 10))
			}
		}
		run := func(t *testing.T, index string, reg *metrics.Registry, opts ...SinkOption) error {
			if err := a.createIndex(index, map[string]any{"k": map[string]any{"type": "long"}}); err != nil {
				t.Fatal(err)
			}
			snk, err := NewSink([]string{base}, doc(index), opts...)
			if err != nil {
				t.Fatal(err)
			}
			env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(50*time.Millisecond),
				stream.Restart(restart.None()), stream.Logger(stream.DiscardLogger()), stream.Metrics(reg))
			stream.SinkTo(stream.FromSource(env, datagen.New(func(k int64) int64 { return k }, datagen.Count(n), datagen.Splits(2)),
				watermark.None[int64](), "gen"), snk, "opensearch")
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			_, err = env.Execute(ctx, "policies")
			return err
		}
		ids := func(t *testing.T, index string) []string {
			hits, err := a.readAll(index)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, h := range hits {
				out = append(out, h.ID)
			}
			slices.Sort(out)
			return out
		}
		sorted := func(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

		t.Run("fail", func(t *testing.T) {
			index := uniqueIndex("pol-fail")
			defer a.deleteIndex(index)
			err := run(t, index, metrics.NewRegistry())
			var ie *ItemError
			if !errors.As(err, &ie) || !errors.Is(err, ErrItemFailed) {
				t.Fatalf("job error = %v, want an *ItemError", err)
			}
			if ie.Index != index || !slices.Contains(wantBad, ie.ID) || !isParseError(ie.Type) || ie.Status != 400 {
				t.Errorf("item error = %+v, want index %s, one of the bad ids, status 400 mapper_parsing_exception (document_parsing_exception on Elasticsearch)", ie, index)
			}
			for _, s := range []string{index, ie.ID, ie.Type, "failed to parse field [k]"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not name %q", err, s)
				}
			}
		})
		t.Run("dead-letter", func(t *testing.T) {
			index := uniqueIndex("pol-dlq")
			defer a.deleteIndex(index)
			var mu sync.Mutex
			var got []string
			reg := metrics.NewRegistry()
			err := run(t, index, reg, DeadLetterTo(func(_ context.Context, act Action, ie *ItemError) error {
				if ie.ID != act.ID || ie.Index != index || !isParseError(ie.Type) {
					return fmt.Errorf("item error %+v does not match action %s", ie, act.ID)
				}
				mu.Lock()
				got = append(got, act.ID)
				mu.Unlock()
				return nil
			}))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(sorted(got), sorted(wantBad)) {
				t.Errorf("dead-lettered %v, want %v", sorted(got), sorted(wantBad))
			}
			if g := reg.Sum(MetricDeadLettered); g != int64(len(wantBad)) {
				t.Errorf("%s = %d, want %d", MetricDeadLettered, g, len(wantBad))
			}
			if g := ids(t, index); !slices.Equal(g, sorted(wantGood)) {
				t.Errorf("index holds %d documents, want the %d good ones", len(g), len(wantGood))
			}
		})
		t.Run("drop", func(t *testing.T) {
			index := uniqueIndex("pol-drop")
			defer a.deleteIndex(index)
			reg := metrics.NewRegistry()
			if err := run(t, index, reg, OnItemFailure(Drop)); err != nil {
				t.Fatal(err)
			}
			if g := reg.Sum(MetricDropped); g != int64(len(wantBad)) {
				t.Errorf("%s = %d, want %d", MetricDropped, g, len(wantBad))
			}
			if g := reg.Sum(MetricItemFailures); g != int64(len(wantBad)) {
				t.Errorf("%s = %d, want %d", MetricItemFailures, g, len(wantBad))
			}
			if g := ids(t, index); !slices.Equal(g, sorted(wantGood)) {
				t.Errorf("index holds %d documents, want the %d good ones", len(g), len(wantGood))
			}
		})
	})
}

// TestRetriesTooManyRequests puts a proxy in front of the real node that
// answers 429 to the first bulk requests; the sink retries them and the
// index ends with every document once.
func TestRetriesTooManyRequests(t *testing.T) {
	forEachNode(t, func(t *testing.T, base string) {
		a := admin{base: base}
		target, err := url.Parse(base)
		if err != nil {
			t.Fatal(err)
		}
		const rejects = 5
		var bulks atomic.Int64
		rp := httputil.NewSingleHostReverseProxy(target)
		tr := http.DefaultTransport.(*http.Transport).Clone()
		defer tr.CloseIdleConnections()
		rp.Transport = tr
		proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/_bulk") && bulks.Add(1) <= rejects {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = w.Write([]byte(`{"error":{"type":"rejected_execution_exception","reason":"rejected execution (queue full)"},"status":429}`))
				return
			}
			rp.ServeHTTP(w, r)
		}))
		defer proxy.Close()
		index := uniqueIndex("retry")
		if err := a.createIndex(index, genProps); err != nil {
			t.Fatal(err)
		}
		defer a.deleteIndex(index)
		const n, splits = 4000, 2
		gen := versions(n, splits)
		reg := metrics.NewRegistry()
		snk, err := NewSink([]string{proxy.URL}, indexDoc(index, Index, false), Backoff(10*time.Millisecond, 100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := runJob(t, jobSpec{n: n, splits: splits, par: 1, reg: reg}, gen, snk); err != nil {
			t.Fatal(err)
		}
		if g := reg.Sum(MetricBulkRetries); g != rejects {
			t.Errorf("%s = %d, want %d (the 429 answers)", MetricBulkRetries, g, rejects)
		}
		checkIndex(t, a, index, lastVersions(gen, n))
	})
}

// startOwnNode starts a node of the test's own with scripts/opensearch.sh
// (a test that kills its node must not kill the shared one) and stops it
// at the end. It returns the URL and a function running the script's
// other commands on that node.
func startOwnNode(t *testing.T) (string, func(cmd string)) {
	t.Helper()
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "SLUICE_OPENSEARCH_RUN=") })
	cmd := exec.CommandContext(t.Context(), "../../scripts/opensearch.sh", "start")
	cmd.Env = env
	out, err := cmd.Output()
	var url, run string
	for line := range strings.SplitSeq(string(out), "\n") {
		if v, ok := strings.CutPrefix(line, "SLUICE_OPENSEARCH_URL="); ok {
			url = v
		}
		if v, ok := strings.CutPrefix(line, "SLUICE_OPENSEARCH_RUN="); ok {
			run = v
		}
	}
	script := func(c string) {
		t.Helper()
		cmd := exec.Command("../../scripts/opensearch.sh", c)
		cmd.Env = append(slices.Clone(env), "SLUICE_OPENSEARCH_RUN="+run)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("scripts/opensearch.sh %s: %v\n%s", c, err, out)
		}
	}
	if run != "" {
		t.Cleanup(func() { script("stop") })
	}
	if err != nil || url == "" {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("scripts/opensearch.sh start: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("scripts/opensearch.sh start: %v (output %q)", err, out)
	}
	return url, script
}

// TestNodeKilledAndRestarted kills a node of its own with -9 while a job
// writes, keeps it down for 20 s and restarts it (scripts/opensearch.sh
// kill9 and restart): the sink backs off and retries, the job continues
// without a restart of its own, and the index ends with every document
// once.
func TestNodeKilledAndRestarted(t *testing.T) {
	nodeURL(t) // a node environment (Java, Maven, the cache) is there
	if testing.Short() {
		t.Skip("-short: the node stays down for 20 s")
	}
	base, script := startOwnNode(t)
	a := admin{base: base}
	index := uniqueIndex("kill")
	if err := a.createIndex(index, genProps); err != nil {
		t.Fatal(err)
	}
	const n, splits = 12_000, 2
	gen := versions(n, splits)
	reg := metrics.NewRegistry()
	// The default 10 tries wait 40–80 s in all; on a loaded machine the
	// restart alone can take 30 s, so give the outage more room.
	snk, err := NewSink([]string{base}, indexDoc(index, Index, false), RequestTimeout(10*time.Second), MaxTries(14), Logger(discardLogger()))
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		res *stream.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := runJob(t, jobSpec{n: n, splits: splits, par: 2, rate: 600, timeout: 3 * time.Minute, reg: reg}, gen, snk)
		done <- outcome{res, err}
	}()
	// Wait until documents arrive, then kill the node.
	deadline := time.Now().Add(time.Minute)
	for {
		hits, err := a.must(http.MethodGet, "/"+index+"/_count", nil)
		if err == nil && !strings.Contains(string(hits), `"count":0`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no document arrived within a minute")
		}
		time.Sleep(200 * time.Millisecond)
	}
	script("kill9")
	t.Logf("node killed")
	time.Sleep(20 * time.Second)
	script("restart")
	t.Logf("node restarted")
	o := <-done
	if o.err != nil {
		t.Fatalf("job: %v", o.err)
	}
	t.Logf("%d restarts, %d checkpoints; %s=%d", o.res.Restarts, o.res.Checkpoints.Completed, MetricBulkRetries, reg.Sum(MetricBulkRetries))
	if o.res.Restarts != 0 {
		t.Errorf("the job restarted %d times; want the sink to ride the outage out with retries", o.res.Restarts)
	}
	if reg.Sum(MetricBulkRetries) == 0 {
		t.Errorf("no bulk request was retried: the outage was not seen")
	}
	checkIndex(t, a, index, lastVersions(gen, n))
}

// isParseError reports whether typ is the error type of a document the
// mapping rejects: OpenSearch's and Elasticsearch's names.
func isParseError(typ string) bool {
	return typ == "mapper_parsing_exception" || typ == "document_parsing_exception"
}
