package node_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/internal/cluster/coord"
	"github.com/sluice-io/sluice/internal/cluster/memcoord"
	"github.com/sluice-io/sluice/internal/cluster/node"
	"github.com/sluice-io/sluice/internal/promparse"
)

// startMetered starts node id of h with metrics m.
func (h *harness) startMetered(ctx context.Context, id string, m *node.Metrics) {
	errc := make(chan error, 1)
	h.errs[id] = errc
	cfg := node.Config{NodeID: id, Connect: h.s.connect(id), Logger: quiet, RetryDelay: 10 * time.Millisecond, Metrics: m,
		Lead: func(ctx context.Context, t node.Term) error {
			l := &led{node: id, term: t, ctx: ctx, release: make(chan error, 1)}
			h.terms <- l
			select {
			case err := <-l.release:
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}}
	h.wg.Go(func() { errc <- node.Run(ctx, cfg) })
}

// awaitStatus polls m until ok holds (bounded: 1000 looks, 10s).
func awaitStatus(t *testing.T, m *node.Metrics, what string, ok func(node.Status) bool) node.Status {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; i < 1000 && time.Now().Before(deadline); i++ {
		if st := m.Status(); ok(st) {
			return st
		}
		time.Sleep(10 * time.Millisecond)
	}
	st := m.Status()
	t.Fatalf("node %s: %s never held; status %+v", st.Node, what, st)
	return st
}

// scrape parses m's Prometheus output with the reference parser.
func scrape(t *testing.T, m *node.Metrics) map[string]*promparse.Family {
	t.Helper()
	var b strings.Builder
	if err := m.WritePrometheus(&b); err != nil {
		t.Fatal(err)
	}
	fams, err := promparse.Parse(strings.NewReader(b.String()))
	if err != nil {
		t.Fatalf("the node metrics do not parse: %v\n%s", err, b.String())
	}
	return fams
}

func value(t *testing.T, fams map[string]*promparse.Family, name string, labels map[string]string) float64 {
	t.Helper()
	f := fams[name]
	if f == nil {
		t.Fatalf("no metric %s", name)
	}
	v, ok := f.Get(labels)
	if !ok {
		t.Fatalf("no sample %s%v", name, labels)
	}
	return v
}

// TestMetricsFollowFailover: the metrics of two nodes through a failover:
// the leader's term, role, election and publishes; the standby's view of
// the leader; the expired leader's lost term (cause session) and lost
// session; the successor's election and leader change.
func TestMetricsFollowFailover(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer func() { cancel(); h.wg.Wait() }()
	m1, m2 := node.NewMetrics("n1"), node.NewMetrics("n2")
	if st := m1.Status(); st.Role != node.RoleJoining {
		t.Fatalf("a new node's role is %q, want joining", st.Role)
	}
	h.startMetered(ctx, "n1", m1)
	first := h.nextTerm()
	h.startMetered(ctx, "n2", m2)
	term := first.term.Leadership.Term()
	st := m1.Status()
	if st.Role != node.RoleLeader || st.Term != term || st.ElectionsWon != 1 || st.Leader != "n1" {
		t.Fatalf("leader status %+v, want leader of term %d", st, term)
	}
	awaitStatus(t, m2, "standby knows leader n1", func(s node.Status) bool {
		return s.Role == node.RoleStandby && s.Leader == "n1" && s.LeaderTerm == term
	})
	inner := checkpoint.NewMemory(checkpoint.Retain(0))
	for id := int64(1); id <= 3; id++ {
		if _, err := publish(t, first, inner, id); err != nil {
			t.Fatal(err)
		}
	}
	fams := scrape(t, m1)
	n1 := map[string]string{"node": "n1"}
	if v := value(t, fams, "sluice_node_is_leader", n1); v != 1 {
		t.Errorf("is_leader %v, want 1", v)
	}
	if v := value(t, fams, "sluice_node_term", n1); v != float64(term) {
		t.Errorf("term %v, want %d", v, term)
	}
	if v := value(t, fams, "sluice_node_elections_won_total", n1); v != 1 {
		t.Errorf("elections won %v, want 1", v)
	}
	if f := fams["sluice_node_checkpoint_publish_seconds"]; f == nil || f.Type != "histogram" {
		t.Errorf("publish latency family %+v, want a histogram", f)
	}
	if st := m1.Status(); st.Published != 3 {
		t.Errorf("published %d, want 3", st.Published)
	}

	h.s.expire("n1")
	second := h.nextTerm()
	if second.node != "n2" {
		t.Fatalf("node %s leads after n1 expired, want n2", second.node)
	}
	st2 := awaitStatus(t, m2, "n2 leads", func(s node.Status) bool { return s.Role == node.RoleLeader })
	if st2.ElectionsWon != 1 || st2.Leader != "n2" || st2.LeaderChanges < 1 || st2.Term != second.term.Leadership.Term() {
		t.Errorf("successor status %+v, want leader n2 with one election and a leader change", st2)
	}
	st1 := awaitStatus(t, m1, "n1 stands by under n2", func(s node.Status) bool {
		return s.Role == node.RoleStandby && s.Leader == "n2" && s.SessionLosses >= 1
	})
	if st1.TermsLost[node.LostSession] != 1 || st1.Term != 0 {
		t.Errorf("expired leader status %+v, want one term lost to its session and no term", st1)
	}
	fams = scrape(t, m1)
	if v := value(t, fams, "sluice_node_leadership_lost_total", map[string]string{"node": "n1", "cause": "session"}); v != 1 {
		t.Errorf("leadership lost (session) %v, want 1", v)
	}
	if v := value(t, fams, "sluice_node_is_leader", n1); v != 0 {
		t.Errorf("is_leader of the expired leader %v, want 0", v)
	}
}

// TestPublishFailureMetrics: a fenced publish and publishes refused while
// the store is unavailable are counted by reason.
func TestPublishFailureMetrics(t *testing.T) {
	c := memcoord.NewCluster()
	ctx := t.Context()
	a, b := c.Node(), c.Node()
	defer a.Close()
	defer b.Close()
	for i, n := range []*memcoord.Node{a, b} {
		if err := n.Join(ctx, coord.Member{ID: []string{"a", "b"}[i]}); err != nil {
			t.Fatal(err)
		}
	}
	la, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := node.NewMetrics("a")
	fl := &flakyLeadership{Leadership: la, n: 2}
	st := node.NewStorage(checkpoint.NewMemory(checkpoint.Retain(0)), node.Term{Leadership: fl, Metrics: m}, node.WithLogger(quiet))
	if _, err := st.Save(ctx, &checkpoint.Snapshot{ID: 1}); err != nil {
		t.Fatal(err)
	}
	c.Expire(a)
	if _, err := b.Campaign(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Save(ctx, &checkpoint.Snapshot{ID: 2}); !errors.Is(err, coord.ErrFenced) {
		t.Fatalf("Save of a fenced leader: %v, want ErrFenced", err)
	}
	s := m.Status()
	if s.Published != 1 || s.PublishFails["unavailable"] != 2 || s.PublishFails["fenced"] != 1 {
		t.Fatalf("status %+v, want 1 published, 2 unavailable, 1 fenced", s)
	}
	fams := scrape(t, m)
	if v := value(t, fams, "sluice_node_checkpoint_publish_failures_total", map[string]string{"node": "a", "reason": "fenced"}); v != 1 {
		t.Errorf("fenced publishes %v, want 1", v)
	}
	if v := value(t, fams, "sluice_node_checkpoint_publish_failures_total", map[string]string{"node": "a", "reason": "unavailable"}); v != 2 {
		t.Errorf("unavailable publishes %v, want 2", v)
	}
}

func get(t *testing.T, url, token string) (int, string) {
	t.Helper()
	return do(t, http.MethodGet, url, token)
}

func do(t *testing.T, method, url, token string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Close = true // no idle connection outlives the test (goleak)
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
	return resp.StatusCode, string(b)
}

// fakeJob is a job handler: its metrics, status and readiness.
var fakeJob = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/metrics":
		fmt.Fprint(w, "# HELP sluice_job_numRecordsIn x\n# TYPE sluice_job_numRecordsIn counter\nsluice_job_numRecordsIn{job_name=\"j\"} 42\n")
	case "/status":
		fmt.Fprint(w, `{"state":"RUNNING"}`)
	case "/readyz":
		w.WriteHeader(http.StatusOK)
		fmt.Fprint(w, `{"ready":true}`)
	case "/savepoints":
		fmt.Fprint(w, `{"id":7}`)
	default:
		http.NotFound(w, r)
	}
})

// TestEndpoint serves the endpoint of a standby and of a leader (with and
// without its job plugged in), with a token: probes are open, /metrics and
// /status need the token; a standby is ready and names the leader; the
// leader is ready only with its job, whose metrics and status it serves
// after its own.
func TestEndpoint(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer func() { cancel(); h.wg.Wait() }()
	m1, m2 := node.NewMetrics("n1"), node.NewMetrics("n2")
	e1, e2 := node.NewEndpoint(m1, node.EndpointToken("tok")), node.NewEndpoint(m2, node.EndpointToken("tok"))
	s1, s2 := httptest.NewServer(e1), httptest.NewServer(e2)
	defer s1.Close()
	defer s2.Close()
	if code, body := get(t, s2.URL+"/readyz", ""); code != http.StatusServiceUnavailable || !strings.Contains(body, "joining") {
		t.Errorf("readyz of a node that has not joined: %d %s, want 503 joining", code, body)
	}
	h.startMetered(ctx, "n1", m1)
	h.nextTerm()
	h.startMetered(ctx, "n2", m2)
	awaitStatus(t, m2, "standby knows leader n1", func(s node.Status) bool { return s.Role == node.RoleStandby && s.Leader == "n1" })

	// Standby.
	if code, body := get(t, s2.URL+"/healthz", ""); code != http.StatusOK || !strings.Contains(body, `"standby"`) {
		t.Errorf("standby healthz: %d %s", code, body)
	}
	if code, body := get(t, s2.URL+"/readyz", ""); code != http.StatusOK || !strings.Contains(body, `"n1"`) {
		t.Errorf("standby readyz: %d %s, want 200 naming leader n1", code, body)
	}
	if code, _ := get(t, s2.URL+"/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("metrics without the token: %d, want 401", code)
	}
	if code, _ := get(t, s2.URL+"/status", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("status with a wrong token: %d, want 401", code)
	}
	if code, body := get(t, s2.URL+"/status", "tok"); code != http.StatusOK || !strings.Contains(body, `"role": "standby"`) || !strings.Contains(body, `"leader": "n1"`) {
		t.Errorf("standby status: %d %s", code, body)
	}
	if code, body := do(t, http.MethodPost, s2.URL+"/savepoints", "tok"); code != http.StatusServiceUnavailable || !strings.Contains(body, "the leader is n1") {
		t.Errorf("savepoint on a standby: %d %s, want 503 naming the leader", code, body)
	}
	code, body := get(t, s2.URL+"/metrics", "tok")
	if code != http.StatusOK || !strings.Contains(body, `sluice_node_is_leader{node="n2"} 0`) || strings.Contains(body, "sluice_job_") {
		t.Errorf("standby metrics: %d\n%s", code, body)
	}
	// A worker adds the metrics of the subtasks it runs.
	unwork := e2.SetWorkerMetrics(func(w io.Writer) error {
		_, err := io.WriteString(w, "sluice_operator_numRecordsIn{node=\"n2\"} 5\n")
		return err
	})
	if code, body := get(t, s2.URL+"/metrics", "tok"); code != http.StatusOK || !strings.Contains(body, `sluice_operator_numRecordsIn{node="n2"} 5`) ||
		!strings.Contains(body, `sluice_node_is_leader{node="n2"} 0`) {
		t.Errorf("worker metrics: %d\n%s", code, body)
	}
	unwork()
	if _, body := get(t, s2.URL+"/metrics", "tok"); strings.Contains(body, "sluice_operator_") {
		t.Errorf("worker metrics after the work ended:\n%s", body)
	}

	// Leader, before and after its job is plugged in.
	if code, body := get(t, s1.URL+"/readyz", ""); code != http.StatusServiceUnavailable || !strings.Contains(body, "not started") {
		t.Errorf("leader readyz without a job: %d %s, want 503", code, body)
	}
	unset := e1.SetJob(fakeJob)
	if code, _ := get(t, s1.URL+"/readyz", ""); code != http.StatusOK {
		t.Errorf("leader readyz with its job: %d, want 200", code)
	}
	code, body = get(t, s1.URL+"/metrics", "tok")
	fams, err := promparse.Parse(strings.NewReader(body))
	if code != http.StatusOK || err != nil {
		t.Fatalf("leader metrics: %d %v\n%s", code, err, body)
	}
	if v := value(t, fams, "sluice_node_is_leader", map[string]string{"node": "n1"}); v != 1 {
		t.Errorf("leader is_leader %v", v)
	}
	if v := value(t, fams, "sluice_job_numRecordsIn", map[string]string{"job_name": "j"}); v != 42 {
		t.Errorf("the leader's endpoint does not serve its job's metrics:\n%s", body)
	}
	if code, body := get(t, s1.URL+"/status", "tok"); code != http.StatusOK || !strings.Contains(body, `"role": "leader"`) || !strings.Contains(body, `"RUNNING"`) {
		t.Errorf("leader status: %d %s", code, body)
	}
	if code, body := do(t, http.MethodPost, s1.URL+"/savepoints", "tok"); code != http.StatusOK || !strings.Contains(body, `"id":7`) {
		t.Errorf("savepoint on the leader: %d %s", code, body)
	}
	unset()
	if code, _ := get(t, s1.URL+"/readyz", ""); code != http.StatusServiceUnavailable {
		t.Errorf("leader readyz after its job ended: %d, want 503", code)
	}
}
