package opensearch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// nodeURL returns the real node's URL or skips t.
func nodeURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv("SLUICE_OPENSEARCH_URL")
	if u == "" {
		t.Skip("SLUICE_OPENSEARCH_URL is not set: start a node with `eval \"$(scripts/opensearch.sh start)\"; export SLUICE_OPENSEARCH_URL SLUICE_OPENSEARCH_RUN` (scripts/test.sh does)")
	}
	return strings.TrimRight(u, "/")
}

var indexSeq atomic.Int64

// uniqueIndex returns a fresh index name.
func uniqueIndex(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1e9, indexSeq.Add(1))
}

// admin is a plain HTTP client for the tests' own reads and setup,
// independent of the connector's code.
type admin struct{ base string }

func (a admin) req(method, path string, body any) ([]byte, int, error) {
	var rd io.Reader
	if body != nil {
		switch b := body.(type) {
		case string:
			rd = strings.NewReader(b)
		case []byte:
			rd = bytes.NewReader(b)
		default:
			data, err := json.Marshal(b)
			if err != nil {
				return nil, 0, err
			}
			rd = bytes.NewReader(data)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, a.base+path, rd)
	if err != nil {
		return nil, 0, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Close = true // no idle connection outlives the test (goleak)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return data, resp.StatusCode, err
}

// must sends a request that must succeed.
func (a admin) must(method, path string, body any) ([]byte, error) {
	data, status, err := a.req(method, path, body)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if status >= 300 {
		return nil, fmt.Errorf("%s %s: status %d: %s", method, path, status, data)
	}
	return data, nil
}

// createIndex creates an index with one shard, no replicas (green on one
// node) and the given properties.
func (a admin) createIndex(name string, props map[string]any) error {
	body := map[string]any{
		"settings": map[string]any{"number_of_shards": 1, "number_of_replicas": 0},
	}
	if props != nil {
		body["mappings"] = map[string]any{"properties": props}
	}
	_, err := a.must(http.MethodPut, "/"+name, body)
	return err
}

func (a admin) deleteIndex(name string) {
	_, _, _ = a.req(http.MethodDelete, "/"+name, nil)
}

type hit struct {
	Index  string          `json:"_index"`
	ID     string          `json:"_id"`
	Source json.RawMessage `json:"_source"`
}

// readAll refreshes index and reads every document with the scroll API.
func (a admin) readAll(index string) ([]hit, error) {
	if _, err := a.must(http.MethodPost, "/"+index+"/_refresh", nil); err != nil {
		return nil, err
	}
	type page struct {
		ScrollID string `json:"_scroll_id"`
		Hits     struct {
			Hits []hit `json:"hits"`
		} `json:"hits"`
	}
	data, err := a.must(http.MethodPost, "/"+index+"/_search?scroll=1m&size=5000", `{"sort":["_doc"]}`)
	if err != nil {
		return nil, err
	}
	var out []hit
	var scrollID string
	defer func() {
		if scrollID != "" {
			_, _, _ = a.req(http.MethodDelete, "/_search/scroll", map[string]any{"scroll_id": scrollID})
		}
	}()
	for range 10_000 {
		var p page
		if err := json.Unmarshal(data, &p); err != nil {
			return nil, err
		}
		scrollID = p.ScrollID
		if len(p.Hits.Hits) == 0 {
			return out, nil
		}
		out = append(out, p.Hits.Hits...)
		if data, err = a.must(http.MethodPost, "/_search/scroll", map[string]any{"scroll": "1m", "scroll_id": scrollID}); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("readAll %s: more than 10000 pages", index)
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// testNodes are the real nodes the connector's tests run against, each
// only where its variable is set.
var testNodes = []struct{ name, env, script string }{
	{"opensearch", "SLUICE_OPENSEARCH_URL", "opensearch"},
	{"elasticsearch", "SLUICE_ELASTICSEARCH_URL", "elasticsearch"},
}

// forEachNode runs f as a subtest per real node (OpenSearch,
// Elasticsearch), with the node's URL; a node whose variable is unset is
// skipped with the reason.
func forEachNode(t *testing.T, f func(t *testing.T, base string)) {
	t.Helper()
	for _, n := range testNodes {
		t.Run(n.name, func(t *testing.T) {
			u := os.Getenv(n.env)
			if u == "" {
				t.Skipf("%s is not set: start a node with `eval \"$(scripts/%s.sh start)\"; export %s` (scripts/test.sh does)", n.env, n.script, n.env)
			}
			f(t, strings.TrimRight(u, "/"))
		})
	}
}
