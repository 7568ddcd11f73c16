package opensearch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectortest/fakes"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// secured is the secured node of scripts/opensearch.sh start-secure.
type secured struct {
	URL      string `json:"url"`
	CAFile   string `json:"ca_file"`
	User     string `json:"user"`
	Password string `json:"password"`
}

func securedNode(t *testing.T) secured {
	t.Helper()
	p := os.Getenv("SLUICE_OPENSEARCH_SECURE")
	if p == "" {
		t.Skip("SLUICE_OPENSEARCH_SECURE is not set: start the secured node with `eval \"$(scripts/opensearch.sh start-secure)\"; export SLUICE_OPENSEARCH_SECURE SLUICE_OPENSEARCH_SECURE_RUN` (scripts/test.sh does)")
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var s secured
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	return s
}

// count reads an index's document count with a client of its own.
func (s secured) count(t *testing.T, index string) string {
	t.Helper()
	pem, err := os.ReadFile(s.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	defer tr.CloseIdleConnections()
	do := func(method, path string) string {
		req, _ := http.NewRequestWithContext(t.Context(), method, s.URL+path, nil)
		req.SetBasicAuth(s.User, s.Password)
		req.Close = true
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
		}
		return string(data)
	}
	do(http.MethodPost, "/"+index+"/_refresh")
	var c struct {
		Count int64 `json:"count"`
	}
	_ = json.Unmarshal([]byte(do(http.MethodGet, "/"+index+"/_count")), &c)
	return fmt.Sprint(c.Count)
}

// TestSecuredNode runs the sink and the source against a real node with
// TLS and basic authentication (OpenSearch 2.19.4 with the security
// plugin's demo configuration): the CA file is trusted, an unknown CA is
// refused unless InsecureSkipVerify, a wrong password is a 401 naming the
// node but not the password.
func TestSecuredNode(t *testing.T) {
	s := securedNode(t)
	index := uniqueIndex("secure")
	conn := []ConnOption{CAFile(s.CAFile), BasicAuth(s.User, s.Password)}
	var opts []SinkOption
	for _, o := range conn {
		opts = append(opts, o)
	}
	opts = append(opts, Logger(discardLogger()))
	const n = 2000
	snk, err := NewSink([]string{s.URL}, func(k int64, _ sink.Meta) (Action, error) {
		return Action{Index: index, ID: fmt.Sprint(k), Doc: fmt.Appendf(nil, `{"k":%d}`, k)}, nil
	}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(50*time.Millisecond), stream.Logger(stream.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, datagen.New(func(k int64) int64 { return k }, datagen.Count(n), datagen.Splits(2)),
		watermark.None[int64](), "gen"), snk, "opensearch")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if _, err := env.Execute(ctx, "secure"); err != nil {
		t.Fatal(err)
	}
	if got := s.count(t, index); got != fmt.Sprint(n) {
		t.Errorf("index holds %s documents, want %d", got, n)
	}

	// The source reads them back over the same connection options.
	var sopts []SourceOption
	for _, o := range conn {
		sopts = append(sopts, o)
	}
	src, err := NewSource(t.Context(), []string{s.URL}, index, append(sopts, Slices(2))...)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close(context.Background())
	out := &collect{}
	env = stream.New(stream.Parallelism(2), stream.Logger(stream.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, src, watermark.None[Hit](), "os"), out, "mem")
	if _, err := env.Execute(ctx, "secure-read"); err != nil {
		t.Fatal(err)
	}
	if len(out.hits) != n {
		t.Errorf("the source read %d hits, want %d", len(out.hits), n)
	}

	writer := func(opts ...SinkOption) error {
		snk, err := NewSink([]string{s.URL}, func(int64, sink.Meta) (Action, error) { return Action{}, nil },
			append(opts, MaxTries(2), Backoff(time.Millisecond, time.Millisecond), Logger(discardLogger()))...)
		if err != nil {
			return err
		}
		w, err := snk.CreateWriter(t.Context(), &fakes.InitContext{})
		if err == nil {
			_ = w.Close()
		}
		return err
	}
	err = writer(CAFile(s.CAFile), BasicAuth(s.User, "wrong-"+s.Password))
	if err == nil || !errors.Is(err, ErrRequestFailed) || !strings.Contains(err.Error(), "status 401") || !strings.Contains(err.Error(), s.URL) {
		t.Errorf("wrong password: %v, want a 401 naming %s", err, s.URL)
	}
	if err != nil && strings.Contains(err.Error(), s.Password) {
		t.Errorf("the error shows the password: %v", err)
	}
	if err := writer(BasicAuth(s.User, s.Password)); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("without the CA: %v, want a certificate error", err)
	}
	if err := writer(InsecureSkipVerify(), BasicAuth(s.User, s.Password)); err != nil {
		t.Errorf("InsecureSkipVerify: %v", err)
	}
	if err := writer(CAFile(s.CAFile)); err == nil || !strings.Contains(err.Error(), "status 401") {
		t.Errorf("no credentials: %v, want a 401", err)
	}
}
