package opensearch

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"time"
)

// Sentinel errors; the errors returned wrap them with details.
var (
	// ErrInvalidConfig is wrapped by every configuration error; the
	// message names the option and what is allowed.
	ErrInvalidConfig = errors.New("opensearch: invalid configuration")
	// ErrInvalidAction is wrapped when the document function's action
	// cannot be sent (no index, no id under exactly-once, a bad index
	// name); the message names the action.
	ErrInvalidAction = errors.New("opensearch: invalid action")
	// ErrItemFailed is wrapped by an *ItemError: OpenSearch rejected one
	// document of a bulk request (mapping, parse, version conflict) and
	// the policy is [Fail].
	ErrItemFailed = errors.New("opensearch: document rejected")
	// ErrUnreachable is wrapped when no node answered within the retries.
	ErrUnreachable = errors.New("opensearch: node unreachable")
	// ErrRequestFailed is wrapped when a request failed with a status
	// that is not retried (401, 403, 400, 413, ...) or still failed after
	// the last retry.
	ErrRequestFailed = errors.New("opensearch: request failed")
)

// Guarantee is the sink's delivery guarantee.
type Guarantee int

const (
	// AtLeastOnce flushes at every checkpoint and allows actions without
	// ids (OpenSearch generates them): after a failure the replayed
	// records are written again, so with auto ids a document may be in
	// the index twice.
	AtLeastOnce Guarantee = iota + 1
	// ExactlyOnce flushes at every checkpoint and requires an id on every
	// action: a replay after a failure rewrites the same documents, so
	// the index ends with each record once (idempotent writes, not
	// transactions: a document is visible as soon as its bulk request
	// succeeded, before the checkpoint completes).
	ExactlyOnce
)

func (g Guarantee) String() string {
	switch g {
	case AtLeastOnce:
		return "at-least-once"
	case ExactlyOnce:
		return "exactly-once"
	}
	return "Guarantee(" + strconv.Itoa(int(g)) + ")"
}

// Flavor is the kind of server, and so the client library the connector
// talks to it with.
type Flavor int

const (
	// FlavorAuto asks the node's root endpoint when a writer or the
	// source connects: version.distribution "opensearch" is OpenSearch,
	// anything else (or an answer with X-Elastic-Product:
	// Elasticsearch) is Elasticsearch. The default.
	FlavorAuto Flavor = iota
	// FlavorOpenSearch talks through opensearch-go.
	FlavorOpenSearch
	// FlavorElasticsearch talks through go-elasticsearch (v8), which
	// refuses any server that does not say it is Elasticsearch.
	FlavorElasticsearch
)

func (f Flavor) String() string {
	switch f {
	case FlavorAuto:
		return "auto"
	case FlavorOpenSearch:
		return "opensearch"
	case FlavorElasticsearch:
		return "elasticsearch"
	}
	return "Flavor(" + strconv.Itoa(int(f)) + ")"
}

// ParseFlavor parses "auto", "opensearch" or "elasticsearch".
func ParseFlavor(s string) (Flavor, error) {
	for _, f := range []Flavor{FlavorAuto, FlavorOpenSearch, FlavorElasticsearch} {
		if s == f.String() {
			return f, nil
		}
	}
	return 0, fmt.Errorf("%w: flavor %q; allowed: auto, opensearch, elasticsearch", ErrInvalidConfig, s)
}

// Policy says what happens to a document OpenSearch rejects for good
// (mapping or parse errors, a version conflict that is not a replay).
type Policy int

const (
	// Fail fails the job with an *ItemError naming index, id, operation,
	// status, error type and reason (the default).
	Fail Policy = iota
	// DeadLetter hands the action and its *ItemError to the function of
	// [DeadLetterTo] and goes on.
	DeadLetter
	// Drop counts the document in numRecordsDropped, logs it (at most
	// once per 10 s per writer) and goes on.
	Drop
)

func (p Policy) String() string {
	switch p {
	case Fail:
		return "fail"
	case DeadLetter:
		return "dead-letter"
	case Drop:
		return "drop"
	}
	return "Policy(" + strconv.Itoa(int(p)) + ")"
}

// ItemError is one document OpenSearch rejected.
type ItemError struct {
	Op     Op
	Index  string
	ID     string // empty for an auto id
	Status int
	Type   string // the error type, e.g. mapper_parsing_exception
	Reason string
}

func (e *ItemError) Error() string {
	id := e.ID
	if id == "" {
		id = "(auto)"
	}
	return fmt.Sprintf("opensearch: %s into index %q id %q rejected: status %d %s: %s", e.Op, e.Index, id, e.Status, e.Type, e.Reason)
}

// Unwrap returns ErrItemFailed.
func (e *ItemError) Unwrap() error { return ErrItemFailed }

// SinkOption configures a sink; see the functions that return one.
type SinkOption interface{ apply(*sinkConfig) }

type sinkOptionFunc func(*sinkConfig)

func (f sinkOptionFunc) apply(c *sinkConfig) { f(c) }

type sinkConfig struct {
	guarantee  Guarantee
	autoIDs    bool
	maxActions int
	maxBytes   int
	interval   time.Duration
	inFlight   int
	policy     Policy
	deadLetter func(ctx context.Context, a Action, err *ItemError) error
	dlIndex    string
	refresh    string
	conn       connConfig
}

// connConfig is what the sink and the source share: nodes, TLS,
// authentication, timeouts.
type connConfig struct {
	urls        []*url.URL
	tls         *tls.Config
	caFile      string
	skipVerify  bool
	user, pass  string
	apiKey      string
	reqTimeout  time.Duration
	maxTries    int
	backoffMin  time.Duration
	backoffMax  time.Duration
	logger      *slog.Logger
	compression bool
	flavor      Flavor
}

func defaultSinkConfig() sinkConfig {
	return sinkConfig{
		guarantee:  ExactlyOnce,
		maxActions: 1000,
		maxBytes:   5 << 20,
		interval:   time.Second,
		inFlight:   1,
		conn:       defaultConnConfig(),
	}
}

func (c *sinkConfig) validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: sink: %s", ErrInvalidConfig, fmt.Sprintf(format, a...))
	}
	switch {
	case c.guarantee != AtLeastOnce && c.guarantee != ExactlyOnce:
		return bad("DeliveryGuarantee is %v; allowed: AtLeastOnce, ExactlyOnce", c.guarantee)
	case c.guarantee == ExactlyOnce && c.autoIDs:
		return bad("AutoIDs with ExactlyOnce: documents without ids cannot be written exactly once (a replay writes them again under new ids); give every action an id, or use DeliveryGuarantee(AtLeastOnce)")
	case c.maxActions < 1:
		return bad("BulkActions is %d; must be >= 1", c.maxActions)
	case c.maxBytes < 1024:
		return bad("BulkBytes is %d; must be >= 1024", c.maxBytes)
	case c.interval < 0:
		return bad("FlushInterval is %v; must be >= 0 (0: flush only by size and at checkpoints)", c.interval)
	case c.inFlight < 1 || c.inFlight > 64:
		return bad("MaxInFlightRequests is %d; allowed: 1 to 64", c.inFlight)
	case c.policy < Fail || c.policy > Drop:
		return bad("OnItemFailure is %v; allowed: Fail, DeadLetter, Drop", c.policy)
	case c.policy == DeadLetter && c.deadLetter == nil && c.dlIndex == "":
		return bad("OnItemFailure(DeadLetter) without DeadLetterTo or DeadLetterIndex")
	case c.dlIndex != "" && ValidIndexName(c.dlIndex) != nil:
		return bad("DeadLetterIndex: %v", ValidIndexName(c.dlIndex))
	case c.refresh != "" && c.refresh != "true" && c.refresh != "wait_for" && c.refresh != "false":
		return bad("Refresh is %q; allowed: true, wait_for, false", c.refresh)
	}
	return c.conn.validate("sink")
}

func defaultConnConfig() connConfig {
	return connConfig{reqTimeout: time.Minute, maxTries: 10, backoffMin: 200 * time.Millisecond, backoffMax: 30 * time.Second, logger: slog.Default()}
}

func (c *connConfig) validate(what string) error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, what, fmt.Sprintf(format, a...))
	}
	switch {
	case len(c.urls) == 0:
		return bad("no node URLs: pass at least one, e.g. http://127.0.0.1:9200")
	case c.reqTimeout <= 0:
		return bad("RequestTimeout is %v; must be positive", c.reqTimeout)
	case c.maxTries < 1:
		return bad("MaxTries is %d; must be >= 1", c.maxTries)
	case c.backoffMin <= 0 || c.backoffMax < c.backoffMin:
		return bad("Backoff(%v, %v): want 0 < min <= max", c.backoffMin, c.backoffMax)
	case c.flavor < FlavorAuto || c.flavor > FlavorElasticsearch:
		return bad("ServerFlavor is %v; allowed: FlavorAuto, FlavorOpenSearch, FlavorElasticsearch", c.flavor)
	case c.apiKey != "" && (c.user != "" || c.pass != ""):
		return bad("both BasicAuth and APIKey; pick one")
	}
	for _, u := range c.urls {
		if u.Scheme != "http" && u.Scheme != "https" {
			return bad("node URL %s: scheme must be http or https", redact(u))
		}
		if u.Host == "" {
			return bad("node URL %s has no host", redact(u))
		}
	}
	return nil
}

// ConnOption configures the connection of a sink or a source: it is both
// a [SinkOption] and a [SourceOption].
type ConnOption func(*connConfig)

func (f ConnOption) apply(c *sinkConfig)         { f(&c.conn) }
func (f ConnOption) applySource(c *sourceConfig) { f(&c.conn) }

// redact returns u without its password, for messages and logs.
func redact(u *url.URL) string { return u.Redacted() }

// DeliveryGuarantee sets the guarantee (default ExactlyOnce: every action
// needs an id; an action without one fails the job with an error naming
// its index).
func DeliveryGuarantee(g Guarantee) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.guarantee = g })
}

// AutoIDs declares that the document function leaves ids to OpenSearch.
// NewSink refuses it with ExactlyOnce (default: not declared; an action
// without an id under ExactlyOnce fails the job when it comes).
func AutoIDs() SinkOption { return sinkOptionFunc(func(c *sinkConfig) { c.autoIDs = true }) }

// BulkActions sets the number of actions that fills a bulk request
// (default 1000, as Flink's bulk.flush.max.actions).
func BulkActions(n int) SinkOption { return sinkOptionFunc(func(c *sinkConfig) { c.maxActions = n }) }

// BulkBytes sets the size in bytes of the NDJSON body that fills a bulk
// request (default 5 MiB, as Flink's bulk.flush.max.size).
func BulkBytes(n int) SinkOption { return sinkOptionFunc(func(c *sinkConfig) { c.maxBytes = n }) }

// FlushInterval sends a partly filled bulk request once its first action
// is this old (default 1s; 0: only by size and at checkpoints).
func FlushInterval(d time.Duration) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.interval = d })
}

// MaxInFlightRequests bounds the bulk requests a writer has sent and not
// yet seen answered (default 1: while one request is in flight the next
// one fills; a full one waits — backpressure, bounded memory of about
// (n+1) × BulkBytes). With more than one, two requests may carry versions
// of the same id and be applied out of order: use it with ids that each
// record writes once, or with external versions.
func MaxInFlightRequests(n int) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.inFlight = n })
}

// MaxTries bounds the attempts of one bulk request, and of the documents
// in it OpenSearch rejected with 429, before the job fails (default 10).
// Retried: connection errors, timeouts, status 429, 502, 503 and 504 for
// the request; status 429 and 5xx for single documents. The default
// outlasts a node restart of about 40 s without failing the job.
func MaxTries(n int) ConnOption { return func(c *connConfig) { c.maxTries = n } }

// Backoff sets the wait before retry k (k = 1, 2, ...): min × 2^(k-1),
// at most max, with jitter (a random time between half of it and all of
// it). Default 200ms and 30s: the nine waits of ten tries add up to
// 40–80 s.
func Backoff(min, max time.Duration) ConnOption {
	return func(c *connConfig) { c.backoffMin, c.backoffMax = min, max }
}

// RequestTimeout bounds one HTTP attempt (default 1m).
func RequestTimeout(d time.Duration) ConnOption {
	return func(c *connConfig) { c.reqTimeout = d }
}

// OnItemFailure sets the policy for documents OpenSearch rejects for good
// (default Fail).
func OnItemFailure(p Policy) SinkOption { return sinkOptionFunc(func(c *sinkConfig) { c.policy = p }) }

// DeadLetterTo sets the policy to DeadLetter and the function that gets
// each rejected action with its error. It is called from the writer's
// sending goroutine (concurrently with itself only with
// MaxInFlightRequests > 1) before the checkpoint that covers the action
// completes; an error it returns fails the job. Default: none.
func DeadLetterTo(fn func(ctx context.Context, a Action, err *ItemError) error) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.policy, c.deadLetter = DeadLetter, fn })
}

// DeadLetterIndex sets the policy to DeadLetter and writes each
// rejected document, as a dead letter, to index: a document with the
// fields "index", "id", "op", "status", "error_type", "reason" (the
// node's) and "document" (the rejected document's JSON as a string).
// Its id is derived from the rejected document's index and id
// ("<index>/<id>", or its SHA-256 if that is longer than 512 bytes), so a
// replay after a failure rewrites the same dead letter: exactly once,
// like the documents (at least once for documents without ids). The
// dead letters of a bulk request are written, with retries, before the
// request counts as answered, so before the checkpoint that covers them
// completes; a dead letter the node rejects fails the job. Default: none.
func DeadLetterIndex(index string) SinkOption {
	return sinkOptionFunc(func(c *sinkConfig) { c.policy, c.dlIndex = DeadLetter, index })
}

// Refresh sets the refresh parameter of bulk requests: "true", "wait_for"
// or "false" (default: not sent, the index's refresh interval applies).
// For tests; it slows indexing down.
func Refresh(r string) SinkOption { return sinkOptionFunc(func(c *sinkConfig) { c.refresh = r }) }

// TLS sets the TLS configuration for https URLs (default: the system's
// roots, verification on).
func TLS(cfg *tls.Config) ConnOption { return func(c *connConfig) { c.tls = cfg } }

// CAFile trusts the PEM certificates in path for https URLs, in addition
// to TLS's roots if any (default: the system's roots).
func CAFile(path string) ConnOption { return func(c *connConfig) { c.caFile = path } }

// InsecureSkipVerify turns TLS certificate verification off. Only this
// option does; the default verifies.
func InsecureSkipVerify() ConnOption { return func(c *connConfig) { c.skipVerify = true } }

// BasicAuth sends HTTP basic authentication (default: none; a user:pass@
// in a URL is used too). The password is never logged or put in errors.
func BasicAuth(user, password string) ConnOption {
	return func(c *connConfig) { c.user, c.pass = user, password }
}

// APIKey sends "Authorization: ApiKey <key>" (key: the base64 of id:key
// as the server issued it; default: none). Never logged or put in errors.
func APIKey(key string) ConnOption { return func(c *connConfig) { c.apiKey = key } }

// ServerFlavor sets the kind of server (default FlavorAuto: ask the
// node when connecting).
func ServerFlavor(f Flavor) ConnOption { return func(c *connConfig) { c.flavor = f } }

// CompressRequests gzips bulk request bodies (default off).
func CompressRequests() ConnOption { return func(c *connConfig) { c.compression = true } }

// Logger sets the logger (default slog.Default()).
func Logger(l *slog.Logger) ConnOption {
	return func(c *connConfig) {
		if l != nil {
			c.logger = l
		}
	}
}

func parseURLs(urls []string) ([]*url.URL, error) {
	out := make([]*url.URL, 0, len(urls))
	for _, s := range urls {
		u, err := url.Parse(s)
		if err != nil {
			// url.Parse's error repeats the URL; it may hold a password.
			return nil, fmt.Errorf("%w: node URL #%d does not parse", ErrInvalidConfig, len(out)+1)
		}
		out = append(out, u)
	}
	return out, nil
}
