package opensearch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	es "github.com/elastic/go-elasticsearch/v8"
	"github.com/elastic/go-elasticsearch/v8/esapi"
	osgo "github.com/opensearch-project/opensearch-go/v4"
)

// backend is what the sink and the source ask of a cluster, once per
// server flavor: opensearch-go's client for OpenSearch, go-elasticsearch's
// for Elasticsearch (which refuses to talk to anything but Elasticsearch).
// Every method sends one request once; a non-2xx answer is an
// *httpError, no answer a *transportError (the client retries).
type backend interface {
	// info asks the root endpoint who the server is.
	info(ctx context.Context) (serverInfo, error)
	// bulk sends one _bulk body (NDJSON) and returns the response body,
	// filtered to errors and per-item status and error.
	bulk(ctx context.Context, body []byte, refresh string) ([]byte, error)
	// openPIT opens a point in time on index and returns its id.
	openPIT(ctx context.Context, index, keepAlive string) (string, error)
	// closePIT deletes a point in time.
	closePIT(ctx context.Context, id string) error
	// search runs a search whose body names a point in time.
	search(ctx context.Context, body []byte) ([]byte, error)
	// pitSort is the sort of a point-in-time search that orders a
	// slice's hits totally, so search_after resumes it.
	pitSort() []any
}

// serverInfo is what the root endpoint says.
type serverInfo struct {
	Distribution string // "opensearch", or empty for Elasticsearch
	Number       string // the version, if the node told it
	ElasticProd  bool   // the answer carried X-Elastic-Product: Elasticsearch
}

// flavor is the flavor the answer identifies: OpenSearch if
// version.distribution says so, Elasticsearch otherwise.
func (i serverInfo) flavor() Flavor {
	if i.Distribution == "opensearch" {
		return FlavorOpenSearch
	}
	return FlavorElasticsearch
}

const (
	bulkFilter   = "errors,items.*.status,items.*.error"
	searchFilter = "pit_id,hits.hits._index,hits.hits._id,hits.hits._source,hits.hits.sort,_shards.failures"
)

// parseInfo reads the root endpoint's answer.
func parseInfo(data []byte, h http.Header) serverInfo {
	var r struct {
		Version struct {
			Distribution string `json:"distribution"`
			Number       string `json:"number"`
		} `json:"version"`
	}
	_ = json.Unmarshal(data, &r)
	return serverInfo{Distribution: r.Version.Distribution, Number: r.Version.Number, ElasticProd: h.Get("X-Elastic-Product") == "Elasticsearch"}
}

// osBackend talks to OpenSearch through opensearch-go; it also probes a
// node of unknown flavor (it checks no product header).
type osBackend struct {
	os    *osgo.Client
	nodes string
}

// rawRequest is an osgo.Request with a byte body.
type rawRequest struct {
	path  string
	query url.Values
	body  []byte
	ctype string
}

func (r rawRequest) GetRequest(method string) (*http.Request, error) {
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	u := r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		return nil, err
	}
	if r.body != nil {
		req.Header.Set("Content-Type", r.ctype)
	}
	return req, nil
}

// do sends one request once and returns the body and header of a 2xx
// answer; any other answer is an *httpError, no answer a
// *transportError.
func (b *osBackend) do(ctx context.Context, method, path string, query url.Values, body []byte, ctype string) ([]byte, http.Header, error) {
	resp, err := osgo.Do[osgo.NoBody](ctx, b.os, method, rawRequest{path: path, query: query, body: body, ctype: ctype}, nil)
	if resp == nil {
		if err == nil {
			err = errors.New("no response")
		}
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("opensearch: %s %s: %w", method, path, context.Cause(ctx))
		}
		return nil, nil, &transportError{nodes: b.nodes, err: err}
	}
	var data []byte
	if resp.Body != nil {
		data, _ = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
	}
	if err != nil && resp.StatusCode < 300 {
		return nil, nil, &transportError{nodes: b.nodes, err: err}
	}
	if resp.StatusCode >= 300 {
		return nil, resp.Header, &httpError{nodes: b.nodes, method: method, path: path, status: resp.StatusCode, body: errorSummary(data)}
	}
	return data, resp.Header, nil
}

func (b *osBackend) info(ctx context.Context) (serverInfo, error) {
	data, h, err := b.do(ctx, http.MethodGet, "/", nil, nil, "")
	var he *httpError
	if errors.As(err, &he) && he.status == http.StatusMethodNotAllowed && h.Get("X-Elastic-Product") == "Elasticsearch" {
		// Elasticsearch without its rest-root module (the
		// integration-test distribution) has no GET /.
		return serverInfo{ElasticProd: true}, nil
	}
	if err != nil {
		return serverInfo{}, err
	}
	return parseInfo(data, h), nil
}

func (b *osBackend) bulk(ctx context.Context, body []byte, refresh string) ([]byte, error) {
	q := url.Values{"filter_path": {bulkFilter}}
	if refresh != "" {
		q.Set("refresh", refresh)
	}
	data, _, err := b.do(ctx, http.MethodPost, "/_bulk", q, body, "application/x-ndjson")
	return data, err
}

func (b *osBackend) openPIT(ctx context.Context, index, keepAlive string) (string, error) {
	data, _, err := b.do(ctx, http.MethodPost, "/"+url.PathEscape(index)+"/_search/point_in_time", url.Values{"keep_alive": {keepAlive}}, nil, "")
	if err != nil {
		return "", err
	}
	var resp struct {
		PIT string `json:"pit_id"`
	}
	if err := json.Unmarshal(data, &resp); err != nil || resp.PIT == "" {
		return "", fmt.Errorf("opensearch: no pit_id in the answer: %s", errorSummary(data))
	}
	return resp.PIT, nil
}

func (b *osBackend) closePIT(ctx context.Context, id string) error {
	body, _ := json.Marshal(map[string]any{"pit_id": []string{id}})
	_, _, err := b.do(ctx, http.MethodDelete, "/_search/point_in_time", nil, body, "application/json")
	return err
}

func (b *osBackend) search(ctx context.Context, body []byte) ([]byte, error) {
	data, _, err := b.do(ctx, http.MethodPost, "/_search", url.Values{"filter_path": {searchFilter}}, body, "application/json")
	return data, err
}

// pitSort: _doc is unique within a shard only; _id breaks the ties
// between shards.
func (b *osBackend) pitSort() []any {
	return []any{map[string]string{"_doc": "asc"}, map[string]string{"_id": "asc"}}
}

// esBackend talks to Elasticsearch through go-elasticsearch.
type esBackend struct {
	es    *es.Client
	nodes string
	cfg   *connConfig
}

// errNotElasticsearch is go-elasticsearch's product check failing: the
// node is not Elasticsearch.
type errNotElasticsearch struct {
	nodes string
	err   error
}

func (e *errNotElasticsearch) Error() string {
	return fmt.Sprintf("opensearch: %s is not Elasticsearch (go-elasticsearch: %v): use flavor opensearch or auto", e.nodes, e.err)
}

func (e *errNotElasticsearch) Unwrap() error { return ErrRequestFailed }

// do sends one esapi request once, bounded by RequestTimeout.
func (b *esBackend) do(ctx context.Context, method, path string, req esapi.Request) ([]byte, http.Header, error) {
	rctx, cancel := context.WithTimeout(ctx, b.cfg.reqTimeout)
	defer cancel()
	resp, err := req.Do(rctx, b.es)
	if err != nil {
		if resp != nil && resp.Body != nil {
			_ = resp.Body.Close()
		}
		if ctx.Err() != nil {
			return nil, nil, fmt.Errorf("opensearch: %s %s: %w", method, path, context.Cause(ctx))
		}
		if strings.Contains(err.Error(), "server is not Elasticsearch") {
			return nil, nil, &errNotElasticsearch{nodes: b.nodes, err: err}
		}
		return nil, nil, &transportError{nodes: b.nodes, err: err}
	}
	var data []byte
	if resp.Body != nil {
		data, err = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			return nil, nil, &transportError{nodes: b.nodes, err: err}
		}
	}
	if resp.StatusCode >= 300 {
		return nil, resp.Header, &httpError{nodes: b.nodes, method: method, path: path, status: resp.StatusCode, body: errorSummary(data)}
	}
	return data, resp.Header, nil
}

func (b *esBackend) info(ctx context.Context) (serverInfo, error) {
	data, h, err := b.do(ctx, http.MethodGet, "/", esapi.InfoRequest{})
	var he *httpError
	if errors.As(err, &he) && he.status == http.StatusMethodNotAllowed && h.Get("X-Elastic-Product") == "Elasticsearch" {
		return serverInfo{ElasticProd: true}, nil // no rest-root module
	}
	if err != nil {
		return serverInfo{}, err
	}
	return parseInfo(data, h), nil
}

func (b *esBackend) bulk(ctx context.Context, body []byte, refresh string) ([]byte, error) {
	data, _, err := b.do(ctx, http.MethodPost, "/_bulk", esapi.BulkRequest{
		Body:       bytes.NewReader(body),
		Refresh:    refresh,
		FilterPath: []string{bulkFilter},
	})
	return data, err
}

func (b *esBackend) openPIT(ctx context.Context, index, keepAlive string) (string, error) {
	data, _, err := b.do(ctx, http.MethodPost, "/"+index+"/_pit", esapi.OpenPointInTimeRequest{Index: []string{index}, KeepAlive: keepAlive})
	if err != nil {
		return "", err
	}
	var resp struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(data, &resp); err != nil || resp.ID == "" {
		return "", fmt.Errorf("opensearch: no id in the answer: %s", errorSummary(data))
	}
	return resp.ID, nil
}

func (b *esBackend) closePIT(ctx context.Context, id string) error {
	body, _ := json.Marshal(map[string]string{"id": id})
	_, _, err := b.do(ctx, http.MethodDelete, "/_pit", esapi.ClosePointInTimeRequest{Body: bytes.NewReader(body)})
	return err
}

func (b *esBackend) search(ctx context.Context, body []byte) ([]byte, error) {
	data, _, err := b.do(ctx, http.MethodPost, "/_search", esapi.SearchRequest{
		Body:       bytes.NewReader(body),
		FilterPath: []string{searchFilter},
	})
	return data, err
}

// pitSort: Elasticsearch refuses to sort on _id by default; a point in
// time's _shard_doc is unique across shards.
func (b *esBackend) pitSort() []any {
	return []any{map[string]string{"_shard_doc": "asc"}}
}
