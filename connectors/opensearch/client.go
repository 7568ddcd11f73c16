package opensearch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"time"

	es "github.com/elastic/go-elasticsearch/v8"
	osgo "github.com/opensearch-project/opensearch-go/v4"
)

// client is one connection to the cluster: opensearch-go's or
// go-elasticsearch's client (by flavor) with its own retries off (the
// sink and source retry with their own bounded, jittered backoff and
// count what they retry).
type client struct {
	cfg    *connConfig
	be     backend // nil until ping resolved an automatic flavor
	flavor Flavor  // FlavorAuto until resolved
	probe  *osBackend
	nodes  string // the URLs without passwords, for messages
	tr     *http.Transport

	addrs      []string
	user, pass string
	hdr        http.Header
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
	c := &client{cfg: cfg, tr: tr, flavor: cfg.flavor, user: cfg.user, pass: cfg.pass, hdr: http.Header{}}
	names := make([]string, len(cfg.urls))
	for i, u := range cfg.urls {
		cu := *u
		if cu.User != nil && c.user == "" {
			c.user = cu.User.Username()
			c.pass, _ = cu.User.Password()
		}
		cu.User = nil
		c.addrs = append(c.addrs, cu.String())
		names[i] = cu.String()
	}
	c.nodes = strings.Join(names, ",")
	if cfg.apiKey != "" {
		c.hdr.Set("Authorization", "ApiKey "+cfg.apiKey)
	}
	var err error
	switch c.flavor {
	case FlavorElasticsearch:
		c.be, err = c.newES()
	case FlavorOpenSearch:
		c.probe, err = c.newOS(ctx)
		c.be = c.probe
	default:
		c.probe, err = c.newOS(ctx)
	}
	if err != nil {
		tr.CloseIdleConnections()
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return c, nil
}

func (c *client) newOS(ctx context.Context) (*osBackend, error) {
	noDiscover := false
	oc, err := osgo.NewClient(osgo.Config{
		Addresses:             c.addrs,
		Username:              c.user,
		Password:              c.pass,
		Header:                c.hdr,
		Transport:             c.tr,
		DisableRetry:          true,
		RequestTimeout:        c.cfg.reqTimeout,
		CompressRequestBody:   c.cfg.compression,
		DiscoverNodesOnStart:  &noDiscover,
		HealthCheckMaxRetries: -1,
		MaxRetryClusterHealth: -1,
		Context:               context.WithoutCancel(ctx),
	})
	if err != nil {
		return nil, err
	}
	return &osBackend{os: oc, nodes: c.nodes}, nil
}

func (c *client) newES() (*esBackend, error) {
	ec, err := es.NewClient(es.Config{
		Addresses:           c.addrs,
		Username:            c.user,
		Password:            c.pass,
		Header:              c.hdr,
		Transport:           c.tr,
		DisableRetry:        true,
		CompressRequestBody: c.cfg.compression,
		DisableMetaHeader:   true,
	})
	if err != nil {
		return nil, err
	}
	return &esBackend{es: ec, nodes: c.nodes, cfg: c.cfg}, nil
}

func (c *client) close() {
	if c.probe != nil {
		_ = c.probe.os.Close()
	}
	c.tr.CloseIdleConnections()
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

// ping checks that a node answers and accepts the credentials, with
// retries, and resolves an automatic flavor: the root endpoint's
// version.distribution "opensearch" is OpenSearch, anything else
// Elasticsearch.
func (c *client) ping(ctx context.Context) error {
	be := c.be
	if be == nil {
		be = c.probe
	}
	var info serverInfo
	err := c.retry(ctx, "opensearch: connect", nil, func() error {
		var err error
		info, err = be.info(ctx)
		return err
	})
	if err != nil {
		return err
	}
	if c.be == nil {
		c.flavor = info.flavor()
		if c.flavor == FlavorOpenSearch {
			c.be = c.probe
		} else if c.be, err = c.newES(); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		c.cfg.logger.Debug("opensearch: flavor chosen by the node's answer", "nodes", c.nodes, "flavor", c.flavor.String(), "version", info.Number)
	}
	return nil
}
