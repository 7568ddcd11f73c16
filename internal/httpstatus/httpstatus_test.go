package httpstatus

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/internal/jobstat"
	"github.com/sluice-io/sluice/internal/promparse"
	"github.com/sluice-io/sluice/metrics"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func testRegistry() *metrics.Registry {
	reg := metrics.NewRegistry()
	job := reg.Root().With("job", "orders")
	job.Counter(metrics.NumRestarts).Add(2)
	job.Gauge(metrics.LastCheckpointDuration, func() int64 { return 12 })
	for i, op := range []string{`gen"erator`, "sink"} {
		for sub := range 2 {
			g := job.With("operator", op).With("subtask", string(rune('0'+sub)))
			g.Counter(metrics.NumRecordsIn).Add(int64(100*i + sub))
			g.Counter(metrics.NumRecordsSend).Add(int64(10 * sub))
		}
	}
	job.With("operator", "sink").With("subtask", "coordinator").Counter(metrics.NumCommittablesSuccess).Inc()
	return reg
}

func TestWriteMetricsParses(t *testing.T) {
	var b strings.Builder
	if err := WriteMetrics(&b, testRegistry().Snapshot()); err != nil {
		t.Fatal(err)
	}
	fams, err := promparse.Parse(strings.NewReader(b.String()))
	if err != nil {
		t.Fatalf("parse (reference parser: %v): %v\n%s", promparse.Reference, err, b.String())
	}
	in := fams["sluice_operator_numRecordsIn"]
	if in == nil || in.Type != "counter" || len(in.Samples) != 4 {
		t.Fatalf("sluice_operator_numRecordsIn: got %+v\n%s", in, b.String())
	}
	if v, ok := in.Get(map[string]string{"job_name": "orders", "operator_name": `gen"erator`, "subtask_index": "1"}); !ok || v != 1 {
		t.Errorf("numRecordsIn of gen\"erator/1: got %v, %v; want 1", v, ok)
	}
	if f := fams["sluice_job_numRestarts"]; f == nil || f.Sum() != 2 {
		t.Errorf("sluice_job_numRestarts: got %+v, want 2", f)
	}
	if f := fams["sluice_job_lastCheckpointDuration"]; f == nil || f.Type != "gauge" || f.Sum() != 12 {
		t.Errorf("sluice_job_lastCheckpointDuration: got %+v, want gauge 12", f)
	}
	if f := fams["sluice_operator_numCommittablesSuccess"]; f == nil || f.Samples[0].Labels["subtask_index"] != "coordinator" {
		t.Errorf("coordinator metric: got %+v", f)
	}
}

type fakeJob struct{ reg *metrics.Registry }

func (f fakeJob) Status() engine.Status {
	return engine.Status{Name: "orders", State: engine.Running, Restarts: 2,
		Checkpoints: engine.CheckpointStats{Completed: 3, LastID: 3, LastDuration: 12 * time.Millisecond, LastSize: 999}}
}
func (f fakeJob) Metrics() *metrics.Registry { return f.reg }

func get(t *testing.T, url, token string) (int, string) {
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
	return resp.StatusCode, string(b)
}

func TestServer(t *testing.T) {
	reg := testRegistry()
	v := jobstat.New(fakeJob{reg}, `gen"erator`, "sink", time.Now())
	h, err := Handler(reg, func() *jobstat.View { return v }, Token("tok"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := Start("127.0.0.1:0", h)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Close(t.Context()); err != nil {
			t.Error(err)
		}
		http.DefaultClient.CloseIdleConnections()
	}()
	base := "http://" + srv.Addr()
	if code, _ := get(t, base+"/metrics", ""); code != http.StatusUnauthorized {
		t.Errorf("without token: got %d, want 401", code)
	}
	if code, _ := get(t, base+"/metrics", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("wrong token: got %d, want 401", code)
	}
	code, body := get(t, base+"/metrics", "tok")
	if code != http.StatusOK {
		t.Fatalf("/metrics: got %d", code)
	}
	if _, err := promparse.Parse(strings.NewReader(body)); err != nil {
		t.Errorf("/metrics does not parse: %v", err)
	}
	code, body = get(t, base+"/status", "tok")
	var st jobstat.Snapshot
	if err := json.Unmarshal([]byte(body), &st); err != nil || code != http.StatusOK {
		t.Fatalf("/status: %d %v\n%s", code, err, body)
	}
	if st.State != "RUNNING" || st.Restarts != 2 || st.Last == nil || st.Last.SizeBytes != 999 || st.Last.DurationMS != 12 ||
		st.RecordsIn != 1 || st.RecordsOut != 10 || len(st.Subtasks) != 4 {
		t.Errorf("/status: got %+v", st)
	}
}

func TestListenAddr(t *testing.T) {
	for in, want := range map[string]string{"9249": "127.0.0.1:9249", ":9249": "127.0.0.1:9249", "0.0.0.0:1": "0.0.0.0:1", "[::1]:2": "[::1]:2"} {
		if got := ListenAddr(in); got != want {
			t.Errorf("ListenAddr(%q) = %q, want %q", in, got, want)
		}
	}
	if !IsLoopback("127.0.0.1:1") || !IsLoopback("[::1]:1") || IsLoopback("0.0.0.0:1") {
		t.Error("IsLoopback is wrong")
	}
}
