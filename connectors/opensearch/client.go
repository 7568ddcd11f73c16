package opensearch

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	osgo "github.com/opensearch-project/opensearch-go/v4"
)

// client is one connection to the cluster: opensearch-go's client with
// its own retries off (the sink and source retry with their own bounded,
// jittered backoff and count what they retry).
type client struct {
	cfg   *connConfig
	os    *osgo.Client
	nodes string // the URLs without passwords, for messages
	tr    *http.Transport
}

func newClient(ctx context.Context, cfg *connConfig) (*client, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 16
	tlsCfg := cfg.tls
	if tlsCfg != nil {
		tlsCfg = tlsCfg.Clone()
	}
	if cfg.caFile != "" || cfg.skipVerify {
		if tlsCfg == nil {
			tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12}
		}
	}
	if cfg.caFile != "" {
		pem, err := os.ReadFile(cfg.caFile)
		if err != nil {
			return nil, fmt.Errorf("%w: CAFile: %w", ErrInvalidConfig, err)
		}
		pool := tlsCfg.RootCAs
		if pool == nil {
			if pool, err = x509.SystemCertPool(); err != nil || pool == nil {
				pool = x509.NewCertPool()
			}
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: CAFile %s holds no PEM certificate", ErrInvalidConfig, cfg.caFile)
		}
		tlsCfg.RootCAs = pool
	}
	if cfg.skipVerify {
		tlsCfg.InsecureSkipVerify = true
	}
	if tlsCfg != nil {
		tr.TLSClientConfig = tlsCfg
	}
	addrs := make([]string, len(cfg.urls))
	names := make([]string, len(cfg.urls))
	user, pass := cfg.user, cfg.pass
	for i, u := range cfg.urls {
		c := *u
		if c.User != nil && user == "" {
			user = c.User.Username()
			pass, _ = c.User.Password()
		}
		c.User = nil
		addrs[i] = c.String()
		names[i] = c.String()
	}
	h := http.Header{}
	if cfg.apiKey != "" {
		h.Set("Authorization", "ApiKey "+cfg.apiKey)
	}
	noDiscover := false
	oc, err := osgo.NewClient(osgo.Config{
		Addresses:             addrs,
		Username:              user,
		Password:              pass,
		Header:                h,
		Transport:             tr,
		DisableRetry:          true,
		RequestTimeout:        cfg.reqTimeout,
		CompressRequestBody:   cfg.compression,
		DiscoverNodesOnStart:  &noDiscover,
		HealthCheckMaxRetries: -1,
		MaxRetryClusterHealth: -1,
		Context:               context.WithoutCancel(ctx),
	})
	if err != nil {
		tr.CloseIdleConnections()
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return &client{cfg: cfg, os: oc, nodes: strings.Join(names, ","), tr: tr}, nil
}

func (c *client) close() {
	_ = c.os.Close()
	c.tr.CloseIdleConnections()
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

// httpError is a response with an error status.
type httpError struct {
	nodes  string
	method string
	path   string
	status int
	body   string // the server's error type and reason, shortened
}

func (e *httpError) Error() string {
	return fmt.Sprintf("opensearch: %s %s on %s: status %d: %s", e.method, e.path, e.nodes, e.status, e.body)
}

func (e *httpError) Unwrap() error { return ErrRequestFailed }

// retryable reports whether the request may succeed when sent again.
func (e *httpError) retryable() bool {
	switch e.status {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// transportError is a request that got no answer.
type transportError struct {
	nodes string
	err   error
}

func (e *transportError) Error() string {
	return fmt.Sprintf("opensearch: no answer from %s: %v", e.nodes, e.err)
}

func (e *transportError) Unwrap() []error { return []error{ErrUnreachable, e.err} }

// do sends one request once and returns the body of a 2xx answer; any
// other answer is an *httpError, no answer a *transportError.
func (c *client) do(ctx context.Context, method, path string, query url.Values, body []byte, ctype string) ([]byte, error) {
	resp, err := osgo.Do[osgo.NoBody](ctx, c.os, method, rawRequest{path: path, query: query, body: body, ctype: ctype}, nil)
	if resp == nil {
		if err == nil {
			err = errors.New("no response")
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("opensearch: %s %s: %w", method, path, context.Cause(ctx))
		}
		return nil, &transportError{nodes: c.nodes, err: err}
	}
	var data []byte
	if resp.Body != nil {
		data, _ = io.ReadAll(resp.Body)
		_ = resp.Body.Close()
	}
	if err != nil && resp.StatusCode < 300 {
		return nil, &transportError{nodes: c.nodes, err: err}
	}
	if resp.StatusCode >= 300 {
		return nil, &httpError{nodes: c.nodes, method: method, path: path, status: resp.StatusCode, body: errorSummary(data)}
	}
	return data, nil
}

// errorSummary extracts type and reason from an error body.
func errorSummary(data []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(data, &e) == nil && len(e.Error) > 0 {
		var s struct {
			Type     string `json:"type"`
			Reason   string `json:"reason"`
			CausedBy *struct {
				Type   string `json:"type"`
				Reason string `json:"reason"`
			} `json:"caused_by"`
		}
		if json.Unmarshal(e.Error, &s) == nil && s.Type != "" {
			out := s.Type + ": " + s.Reason
			if s.CausedBy != nil {
				out += " (caused by " + s.CausedBy.Type + ": " + s.CausedBy.Reason + ")"
			}
			return out
		}
		var str string
		if json.Unmarshal(e.Error, &str) == nil {
			return str
		}
	}
	s := strings.TrimSpace(string(data))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	if s == "" {
		s = "(empty body)"
	}
	return s
}

// isRetryable reports whether err is worth another attempt.
func isRetryable(err error) bool {
	var he *httpError
	if errors.As(err, &he) {
		return he.retryable()
	}
	var te *transportError
	return errors.As(err, &te)
}

// backoff returns the wait before retry k (1-based), with jitter.
func (c *connConfig) backoff(k int) time.Duration {
	d := c.backoffMin
	for i := 1; i < k && d < c.backoffMax; i++ {
		d *= 2
	}
	d = min(d, c.backoffMax)
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(half)+1))
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// retry calls fn until it succeeds, fails with an error that is not
// retryable, or has been tried maxTries times; onRetry is called before
// each retry.
func (c *client) retry(ctx context.Context, what string, onRetry func(error), fn func() error) error {
	var err error
	for try := 1; ; try++ {
		if err = fn(); err == nil || !isRetryable(err) || ctx.Err() != nil {
			return err
		}
		if try >= c.cfg.maxTries {
			return fmt.Errorf("%s: gave up after %d tries: %w", what, try, err)
		}
		if onRetry != nil {
			onRetry(err)
		}
		if serr := sleep(ctx, c.cfg.backoff(try)); serr != nil {
			return fmt.Errorf("%s: %w (while retrying after: %w)", what, serr, err)
		}
	}
}

// ping checks that a node answers, with retries.
func (c *client) ping(ctx context.Context) error {
	return c.retry(ctx, "opensearch: connect", nil, func() error {
		_, err := c.do(ctx, http.MethodGet, "/", nil, nil, "")
		return err
	})
}
