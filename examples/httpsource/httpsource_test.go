package httpsource_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectortest"
	"github.com/sluice-io/sluice/examples/httpsource"
	"github.com/sluice-io/sluice/source"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// server is the external system: one growing list of lines per split,
// served with the tail protocol at /split/<i>?from=n.
type server struct {
	settings connectortest.SourceSettings
	srv      *httptest.Server
	mu       sync.Mutex
	lines    [][]string
}

func newServer(s connectortest.SourceSettings) *server {
	sv := &server{settings: s, lines: make([][]string, s.Splits)}
	sv.srv = httptest.NewServer(http.HandlerFunc(sv.serve))
	return sv
}

func (sv *server) serve(w http.ResponseWriter, r *http.Request) {
	i, err1 := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/split/"))
	from, err2 := strconv.Atoi(r.URL.Query().Get("from"))
	if err1 != nil || err2 != nil || i < 0 || i >= len(sv.lines) {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	sv.mu.Lock()
	lines := sv.lines[i][min(from, len(sv.lines[i])):]
	lines = lines[:min(len(lines), 300)] // pages, as real endpoints do
	sv.mu.Unlock()
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

func (sv *server) Write(split int, recs []connectortest.Record) error {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	for _, r := range recs {
		sv.lines[split] = append(sv.lines[split], r.String())
	}
	return nil
}

func (sv *server) Source() (source.Source[string, httpsource.Split, []httpsource.Split], error) {
	urls := make([]string, sv.settings.Splits)
	for i := range urls {
		urls[i] = fmt.Sprintf("%s/split/%d", sv.srv.URL, i)
	}
	return &httpsource.Source{URLs: urls, Bounded: sv.settings.Bounded, PollInterval: 10 * time.Millisecond}, nil
}

func (sv *server) Record(line string) (connectortest.Record, error) {
	return connectortest.ParseRecord(line)
}

func (sv *server) Close() error {
	sv.srv.Close()
	return nil
}

func TestConformance(t *testing.T) {
	connectortest.TestSource(t, func(s connectortest.SourceSettings) (connectortest.SourceContext[string, httpsource.Split, []httpsource.Split], error) {
		return newServer(s), nil
	})
}
