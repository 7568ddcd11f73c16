package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-io/sluice/connectors/opensearch"
	"github.com/sluice-io/sluice/internal/format"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// The opensearch sink and source (connectors/opensearch). Option names
// follow Flink's Elasticsearch/OpenSearch connector where it has one
// (hosts, index, username, password, sink.bulk-flush.*,
// connection.request-timeout); docs/cli.md "OpenSearch sink" maps them.

// osConnOptions are the connection options of the sink and the source.
var osConnOptions = []Option{
	{Name: "hosts", Type: Strings, Required: true,
		Description: "OpenSearch (or Elasticsearch) nodes, http://host:port or https://host:port"},
	{Name: "flavor", Type: Enum, Values: []string{"auto", "opensearch", "elasticsearch"}, Default: "auto",
		Description: "the kind of server: auto asks the node's root endpoint when connecting (version.distribution opensearch: OpenSearch, anything else: Elasticsearch); opensearch talks through opensearch-go, elasticsearch through go-elasticsearch (which refuses servers that are not Elasticsearch)"},
	{Name: "username", Type: String, Description: "HTTP basic authentication user (default: none)"},
	{Name: "password", Type: String, Secret: true, Description: "HTTP basic authentication password; a secret: write ${VAR} (default: none)"},
	{Name: "api-key", Type: String, Secret: true, Description: "API key, sent as Authorization: ApiKey <key> (Elasticsearch); a secret: write ${VAR}; not with username (default: none)"},
	{Name: "tls.ca-file", Type: String, Default: "", Description: "PEM file of CA certificates that sign the nodes' certificates, trusted besides the system roots (https hosts)"},
	{Name: "tls.insecure-skip-verify", Type: Bool, Default: false, Description: "accept any certificate (tests only); logged as a WARN at every start; not with tls.ca-file"},
	{Name: "connection.request-timeout", Type: Duration, Default: time.Minute, Check: Positive,
		Description: "how long one HTTP attempt may take"},
	{Name: "sink.bulk-flush.backoff.max-retries", Type: Int, Default: int64(9), Check: Between(0, 1000),
		Description: "retries of a request that failed on a connection error, a timeout or status 429/502/503/504 (and of documents rejected with 429/5xx) before the job fails; the source retries its searches alike"},
	{Name: "sink.bulk-flush.backoff.delay", Type: Duration, Default: 200 * time.Millisecond, Check: Positive,
		Description: "wait before the first retry, doubling at each retry up to sink.bulk-flush.backoff.max-delay, jittered to between half and all of it"},
	{Name: "sink.bulk-flush.backoff.max-delay", Type: Duration, Default: 30 * time.Second, Check: Positive,
		Description: "longest wait between retries (at least sink.bulk-flush.backoff.delay)"},
}

var osSinkOptions = []Option{
	{Name: "index", Type: String,
		Description: "index of every document: a name, with {…} parts filled per record: {yyyy.MM.dd} (any of yyyy yy MM dd HH mm ss ww and . - _) formats meta.timestamp in UTC, {field|yyyy.MM.dd} formats the field (integer milliseconds since the epoch, or an RFC 3339 string), {field} is the field's value; one of index and index-expr is required"},
	{Name: "index-expr", Type: String,
		Description: "instead of index: an expression returning the index name (a string), e.g. 'meta.topic + \"-\" + region' (default: none)"},
	{Name: "id", Type: String,
		Description: "expression for the document id (a string or an integer), e.g. 'meta.topic + \"-\" + string(meta.partition) + \"-\" + string(meta.offset)' or a field; required for exactly-once; without it OpenSearch generates ids: at-least-once only (default: none)"},
	{Name: "action", Type: Enum, Values: []string{"index", "create", "update", "delete"}, Default: "index",
		Description: "bulk action: index (replace), create (only if absent), update (merge, doc_as_upsert), delete; update and delete need id"},
	{Name: "routing", Type: String, Description: "expression for the shard routing value (a string or an integer; default: none, routing by id)"},
	{Name: "pipeline", Type: String, Description: "ingest pipeline of index and create actions (default: none)"},
	{Name: "version", Type: String,
		Description: "expression for an external version (an integer from 0, e.g. meta.offset) with version_type=external, index and delete only: a replayed older version never overwrites a newer document (default: none)"},
	{Name: "sink.bulk-flush.max-actions", Type: Int, Default: int64(1000), Check: Between(1, 1_000_000),
		Description: "actions that fill a bulk request"},
	{Name: "sink.bulk-flush.max-size", Type: String, Default: "5mb", Check: checkByteSize,
		Description: "bytes of NDJSON that fill a bulk request: a number with an optional unit b, kb, mb (e.g. 5mb, 512kb)"},
	{Name: "sink.bulk-flush.interval", Type: Duration, Default: time.Second, Check: AtLeast(0),
		Description: "a partly filled bulk request is sent once its first action is this old; 0 = only by size and at checkpoints"},
	{Name: "sink.bulk-flush.max-in-flight", Type: Int, Default: int64(1), Check: Between(1, 64),
		Description: "unanswered bulk requests per subtask; a full next request waits (backpressure); above 1 two versions of one id may be applied out of order (use version)"},
	{Name: "on-item-error", Type: Enum, Values: []string{"fail", "dead-letter", "drop"}, Default: "fail",
		Description: "a document the node rejects for good (mapping, parse, version conflict): fail fails the job at once (no restarts) naming index, id and reason; dead-letter writes it with its index, id and the node's reason to dead-letter-index and goes on (numRecordsDeadLettered); drop counts it (numRecordsDropped) and logs it at most every 10s"},
	{Name: "dead-letter-index", Type: String,
		Description: "with on-item-error: dead-letter, the index of dead letters: documents {index, id, op, status, error_type, reason, document (the rejected JSON as a string)} with the id <index>/<id>, written before the checkpoint completes, so a replay rewrites them: exactly once with ids (default: none)"},
}

func init() {
	MustRegisterSink(Sink{
		Name:        "opensearch",
		Description: "Writes records as documents to OpenSearch (or Elasticsearch) with bulk requests; exactly-once results by deterministic ids (the id option): every bulk is acknowledged before its checkpoint completes and a replay rewrites the same ids (connectors/opensearch).",
		ExactlyOnce: true,
		Options:     append(append([]Option{}, osConnOptions...), osSinkOptions...),
		Validate:    allValid(validateOSConn, validateOSSink),
		Step:        osSinkStep,
		CheckDelivery: func(d Delivery, o Options) error {
			if d == ExactlyOnce && o.String("id") == "" {
				return &OptionError{Option: "id", Err: errors.New("exactly-once needs a document id: set id (an expression, e.g. 'meta.topic + \"-\" + string(meta.partition) + \"-\" + string(meta.offset)'), or delivery: at-least-once to let OpenSearch generate ids")}
			}
			return nil
		},
		Build: buildOSSink,
	})
	MustRegisterSource(Source{
		Name:        "opensearch",
		Description: "Reads an index (name, alias, list or pattern) once, through a point in time in parallel slices (one split per slice; a restore resumes a slice where its checkpoint left it): each hit's _source as a JSON value, its id as meta.key (connectors/opensearch). Bounded.",
		Options: append(append([]Option{}, osConnOptions...),
			Option{Name: "index", Type: String, Required: true, Description: "the index, alias, comma-separated list or pattern to read"},
			Option{Name: "query", Type: String, Default: "", Description: "a query in the query DSL as JSON, e.g. '{\"term\": {\"status\": \"open\"}}'; empty = match_all"},
			Option{Name: "slices", Type: Int, Default: int64(4), Check: Between(1, 1024), Description: "slices of the search, i.e. splits read in parallel"},
			Option{Name: "page-size", Type: Int, Default: int64(1000), Check: Between(1, 10000), Description: "hits per search request"},
			Option{Name: "keep-alive", Type: Duration, Default: 10 * time.Minute, Check: Positive, Description: "the point in time lives this long after the last page (a restore after it expired fails)"},
		),
		Validate:       allValid(validateOSConn, validateOSSource),
		MaxParallelism: func(o Options) int { return int(o.Int("slices")) },
		Build:          buildOSSource,
	})
}

func checkByteSize(v any) error {
	s, _ := v.(string)
	if _, err := parseByteSize(s); err != nil {
		return err
	}
	return nil
}

// parseByteSize reads "5mb", "512kb", "1048576" or "100b".
func parseByteSize(s string) (int, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := 1
	for _, u := range []struct {
		suffix string
		m      int
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"b", 1}} {
		if n, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(n), u.m
			break
		}
	}
	n, err := strconv.Atoi(t)
	if err != nil || n < 1 || n > (1<<30)/mult {
		return 0, errors.New("want a size from 1b to 1gb, such as 5mb or 512kb")
	}
	return n * mult, nil
}

func validateOSConn(o Options) error {
	for _, h := range o.Strings("hosts") {
		if !strings.HasPrefix(h, "http://") && !strings.HasPrefix(h, "https://") {
			return optErr("hosts", "want http://host:port or https://host:port")
		}
	}
	if o.String("api-key") != "" && (o.String("username") != "" || o.String("password") != "") {
		return optErr("api-key", "set either api-key or username and password, not both")
	}
	if o.String("password") != "" && o.String("username") == "" {
		return optErr("password", "needs username")
	}
	if o.Bool("tls.insecure-skip-verify") && o.String("tls.ca-file") != "" {
		return optErr("tls.insecure-skip-verify", "not together with tls.ca-file")
	}
	if o.Has("sink.bulk-flush.backoff.max-delay") && o.Duration("sink.bulk-flush.backoff.max-delay") < o.Duration("sink.bulk-flush.backoff.delay") {
		return optErr("sink.bulk-flush.backoff.max-delay", "must be at least sink.bulk-flush.backoff.delay")
	}
	return nil
}

func validateOSSource(o Options) error {
	if q := o.String("query"); q != "" {
		var m map[string]any
		if err := json.Unmarshal([]byte(q), &m); err != nil {
			return optErr("query", "want a JSON object (the query DSL)")
		}
	}
	return nil
}

func validateOSSink(o Options) error {
	switch dl, ix := o.String("on-item-error") == "dead-letter", o.String("dead-letter-index"); {
	case dl && ix == "":
		return optErr("on-item-error", "dead-letter needs dead-letter-index (the index of dead letters)")
	case !dl && ix != "":
		return optErr("dead-letter-index", "only with on-item-error: dead-letter")
	case ix != "":
		if err := opensearch.ValidIndexName(ix); err != nil {
			return &OptionError{Option: "dead-letter-index", Err: err}
		}
	}
	_, err := compileOSSink(o)
	return err
}

// osConn returns the library's connection options.
func osConn(c BuildContext) []opensearch.ConnOption {
	o := c.Options
	opts := []opensearch.ConnOption{opensearch.Logger(c.Logger)}
	if f, err := opensearch.ParseFlavor(o.String("flavor")); err == nil && o.Has("flavor") {
		opts = append(opts, opensearch.ServerFlavor(f))
	}
	if o.Has("connection.request-timeout") {
		opts = append(opts, opensearch.RequestTimeout(o.Duration("connection.request-timeout")))
	}
	if o.Has("sink.bulk-flush.backoff.max-retries") {
		opts = append(opts, opensearch.MaxTries(int(o.Int("sink.bulk-flush.backoff.max-retries"))+1))
	}
	if o.Has("sink.bulk-flush.backoff.delay") && o.Has("sink.bulk-flush.backoff.max-delay") {
		opts = append(opts, opensearch.Backoff(o.Duration("sink.bulk-flush.backoff.delay"), o.Duration("sink.bulk-flush.backoff.max-delay")))
	}
	if u := o.String("username"); u != "" {
		opts = append(opts, opensearch.BasicAuth(u, o.String("password")))
	}
	if k := o.String("api-key"); k != "" {
		opts = append(opts, opensearch.APIKey(k))
	}
	if f := o.String("tls.ca-file"); f != "" {
		opts = append(opts, opensearch.CAFile(f))
	}
	if o.Bool("tls.insecure-skip-verify") {
		c.Logger.Warn("opensearch: tls.insecure-skip-verify is set: the nodes' certificates are not verified", "operator", c.Name)
		opts = append(opts, opensearch.InsecureSkipVerify())
	}
	return opts
}

// osSink is an opensearch sink's compiled per-record work.
type osSink struct {
	index                    *osIndex
	indexExpr, id, routing   *Expr
	version                  *Expr
	op                       opensearch.Op
	pipeline                 string
	json                     format.Codec
	exprReadsValue, needsDoc bool
}

// osIndex is the index option: literal parts and {…} parts.
type osIndex struct {
	parts []osIndexPart
	dated bool // a part formats meta.timestamp
}

type osIndexPart struct {
	lit     string
	field   string                   // "" = none
	pattern *opensearch.IndexPattern // a date format; nil = the field's value as is
}

// parseOSIndex reads the index option (see its description).
func parseOSIndex(s string) (*osIndex, error) {
	ix := &osIndex{}
	rest := s
	for rest != "" {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			ix.parts = append(ix.parts, osIndexPart{lit: rest})
			break
		}
		if open > 0 {
			ix.parts = append(ix.parts, osIndexPart{lit: rest[:open]})
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return nil, errors.New("{ without }")
		}
		inner := rest[open+1 : open+end]
		rest = rest[open+end+1:]
		field, date, hasBar := strings.Cut(inner, "|")
		if !hasBar {
			if p, err := opensearch.ParseIndexPattern("{" + inner + "}"); err == nil {
				ix.parts = append(ix.parts, osIndexPart{pattern: &p})
				ix.dated = true
				continue
			}
			field, date = inner, ""
		}
		field = strings.TrimSpace(field)
		if field == "" {
			return nil, fmt.Errorf("{%s}: no field name", inner)
		}
		part := osIndexPart{field: field}
		if hasBar {
			p, err := opensearch.ParseIndexPattern("{" + strings.TrimSpace(date) + "}")
			if err != nil {
				return nil, fmt.Errorf("{%s}: %w", inner, err)
			}
			part.pattern = &p
		}
		ix.parts = append(ix.parts, part)
	}
	for _, p := range ix.parts {
		if strings.ContainsAny(p.lit, "}") {
			return nil, errors.New("} without {")
		}
	}
	if len(ix.parts) == 1 && ix.parts[0].field == "" && ix.parts[0].pattern == nil {
		if err := opensearch.ValidIndexName(s); err != nil {
			return nil, err
		}
	}
	return ix, nil
}

func (ix *osIndex) readsValue() bool {
	for _, p := range ix.parts {
		if p.field != "" {
			return true
		}
	}
	return false
}

// name is the index of r (decoded if readsValue).
func (ix *osIndex) name(r Record) (string, error) {
	var b strings.Builder
	obj, _ := r.Object()
	for _, p := range ix.parts {
		switch {
		case p.field == "" && p.pattern == nil:
			b.WriteString(p.lit)
		case p.field == "":
			ts := r.Timestamp()
			if ts.IsZero() {
				return "", errors.New("the record has no meta.timestamp for the index's date (use {field|format})")
			}
			b.WriteString(p.pattern.Format(ts))
		default:
			v, ok := obj[p.field]
			if !ok || v == nil {
				return "", fmt.Errorf("the record has no field %q for the index", p.field)
			}
			if p.pattern == nil {
				s, err := osString(v)
				if err != nil {
					return "", fmt.Errorf("field %q: %w", p.field, err)
				}
				b.WriteString(s)
				continue
			}
			t, err := osTime(v)
			if err != nil {
				return "", fmt.Errorf("field %q: %w", p.field, err)
			}
			b.WriteString(p.pattern.Format(t))
		}
	}
	return b.String(), nil
}

func osTime(v any) (time.Time, error) {
	switch t := v.(type) {
	case int64:
		return time.UnixMilli(t), nil
	case int:
		return time.UnixMilli(int64(t)), nil
	case float64:
		return time.UnixMilli(int64(t)), nil
	case json.Number:
		n, err := t.Int64()
		if err == nil {
			return time.UnixMilli(n), nil
		}
	case string:
		return time.Parse(time.RFC3339Nano, t)
	case time.Time:
		return t, nil
	}
	return time.Time{}, fmt.Errorf("is a %s, want integer milliseconds since the epoch or an RFC 3339 string", format.KindOf(v))
}

// osString renders an id, routing or index part: strings as they are,
// integers in decimal.
func osString(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case int:
		return strconv.Itoa(x), nil
	case int32:
		return strconv.Itoa(int(x)), nil
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return x.String(), nil
		}
	case []byte:
		return string(x), nil
	}
	return "", fmt.Errorf("returned a %s, want a string or an integer", format.KindOf(v))
}

func compileOSSink(o Options) (*osSink, error) {
	s := &osSink{}
	switch ix, ie := o.String("index"), o.String("index-expr"); {
	case ix == "" && ie == "":
		return nil, optErr("index", "missing: set index (a name, or a pattern such as logs-{yyyy.MM.dd}) or index-expr")
	case ix != "" && ie != "":
		return nil, optErr("index-expr", "set either index or index-expr, not both")
	case ix != "":
		p, err := parseOSIndex(ix)
		if err != nil {
			return nil, &OptionError{Option: "index", Err: err}
		}
		s.index = p
	}
	for _, x := range []struct {
		name string
		dst  **Expr
	}{{"index-expr", &s.indexExpr}, {"id", &s.id}, {"routing", &s.routing}, {"version", &s.version}} {
		src := o.String(x.name)
		if src == "" {
			continue
		}
		e, err := CompileExpr(src, false)
		if err != nil {
			return nil, &OptionError{Option: x.name, Err: err}
		}
		*x.dst = e
		s.exprReadsValue = s.exprReadsValue || e.ReadsValue()
	}
	if s.index != nil && s.index.readsValue() {
		s.exprReadsValue = true
	}
	switch o.String("action") {
	case "create":
		s.op = opensearch.Create
	case "update":
		s.op = opensearch.Update
	case "delete":
		s.op = opensearch.Delete
	default:
		s.op = opensearch.Index
	}
	if (s.op == opensearch.Update || s.op == opensearch.Delete) && s.id == nil {
		return nil, optErr("id", "action %s needs an id", s.op)
	}
	if s.version != nil && s.op != opensearch.Index && s.op != opensearch.Delete {
		return nil, optErr("version", "external versions work with the index and delete actions, not %s", s.op)
	}
	s.pipeline = o.String("pipeline")
	if s.pipeline != "" && s.op != opensearch.Index && s.op != opensearch.Create {
		return nil, optErr("pipeline", "ingest pipelines apply to the index and create actions, not %s", s.op)
	}
	s.needsDoc = s.op != opensearch.Delete
	c, err := format.Builtin().New("json", format.Config{})
	if err != nil {
		return nil, err
	}
	s.json = c
	return s, nil
}

// osDoc is the action the sink's step made of a record, carried to the
// sink as the record's value (no decoded value is one, so input cannot
// forge it).
type osDoc struct{ a opensearch.Action }

// action makes the bulk action of r; opt names the option that failed.
func (s *osSink) action(r Record) (a opensearch.Action, opt string, err error) {
	if s.exprReadsValue {
		if r, err = r.Decode(context.Background()); err != nil {
			return a, "index", fmt.Errorf("decode: %w", err)
		}
	}
	a.Op, a.Pipeline = s.op, s.pipeline
	if s.index != nil {
		if a.Index, err = s.index.name(r); err != nil {
			return a, "index", err
		}
	} else {
		v, err := s.indexExpr.Run(r)
		if err != nil {
			return a, "index-expr", err
		}
		str, ok := v.(string)
		if !ok {
			return a, "index-expr", fmt.Errorf("returned a %s, want a string", format.KindOf(v))
		}
		a.Index = str
	}
	if s.index == nil || len(s.index.parts) != 1 || s.index.parts[0].lit == "" {
		if err := opensearch.ValidIndexName(a.Index); err != nil {
			opt := "index"
			if s.index == nil {
				opt = "index-expr"
			}
			return a, opt, err
		}
	}
	for _, x := range []struct {
		name string
		e    *Expr
		dst  *string
	}{{"id", s.id, &a.ID}, {"routing", s.routing, &a.Routing}} {
		if x.e == nil {
			continue
		}
		v, err := x.e.Run(r)
		if err != nil {
			return a, x.name, err
		}
		if *x.dst, err = osString(v); err != nil {
			return a, x.name, err
		}
		if *x.dst == "" && x.name == "id" {
			return a, "id", errors.New("returned an empty id")
		}
	}
	if s.version != nil {
		v, err := s.version.Run(r)
		if err != nil {
			return a, "version", err
		}
		var n int64
		var ok bool
		switch x := v.(type) {
		case int64:
			n, ok = x, true
		case int:
			n, ok = int64(x), true
		case int32:
			n, ok = int64(x), true
		case json.Number:
			n, err = x.Int64()
			ok = err == nil
		}
		if !ok || n < 0 {
			return a, "version", fmt.Errorf("returned %v (%s), want an integer from 0", v, format.KindOf(v))
		}
		a.Version, a.ExternalVersion = n, true
	}
	if s.needsDoc {
		b, err := encodeValue(context.Background(), s.json, a.Index, nil, r)
		if err != nil {
			return a, "document", err
		}
		a.Doc = b
	}
	return a, "", nil
}

// step is the sink's Step: it makes each record's action (a failure is a
// *SinkExprError, handled by the pipeline's on-error).
func (s *osSink) step(name string) func(Record) (Record, error) {
	return func(r Record) (Record, error) {
		a, opt, err := s.action(r)
		if err != nil {
			return r, &SinkExprError{Sink: name, Option: opt, Pos: r.Pos().Resolve(), Err: err}
		}
		return Record{val: &osDoc{a}, pos: r.pos}, nil
	}
}

func osSinkStep(name string, o Options) (func(Record) (Record, error), bool, error) {
	s, err := compileOSSink(o)
	if err != nil {
		return nil, false, err
	}
	return s.step(name), s.exprReadsValue, nil
}

func buildOSSink(c BuildContext, in stream.DataStream[Record]) error {
	o := c.Options
	s, err := compileOSSink(o)
	if err != nil {
		return err
	}
	opts := []opensearch.SinkOption{}
	for _, co := range osConn(c) {
		opts = append(opts, co)
	}
	if c.Delivery == ExactlyOnce {
		opts = append(opts, opensearch.DeliveryGuarantee(opensearch.ExactlyOnce))
	} else {
		opts = append(opts, opensearch.DeliveryGuarantee(opensearch.AtLeastOnce))
		if s.id == nil {
			opts = append(opts, opensearch.AutoIDs())
		}
	}
	if o.Has("sink.bulk-flush.max-actions") {
		opts = append(opts, opensearch.BulkActions(int(o.Int("sink.bulk-flush.max-actions"))))
	}
	if o.Has("sink.bulk-flush.max-size") {
		n, err := parseByteSize(o.String("sink.bulk-flush.max-size"))
		if err != nil {
			return &OptionError{Option: "sink.bulk-flush.max-size", Err: err}
		}
		opts = append(opts, opensearch.BulkBytes(n))
	}
	if o.Has("sink.bulk-flush.interval") {
		opts = append(opts, opensearch.FlushInterval(o.Duration("sink.bulk-flush.interval")))
	}
	if o.Has("sink.bulk-flush.max-in-flight") {
		opts = append(opts, opensearch.MaxInFlightRequests(int(o.Int("sink.bulk-flush.max-in-flight"))))
	}
	switch o.String("on-item-error") {
	case "drop":
		opts = append(opts, opensearch.OnItemFailure(opensearch.Drop))
	case "dead-letter":
		opts = append(opts, opensearch.DeadLetterIndex(o.String("dead-letter-index")))
	}
	step := s.step(c.Name)
	doc := func(r Record, _ sink.Meta) (opensearch.Action, error) {
		if d, ok := r.val.(*osDoc); ok {
			return d.a, nil
		}
		// Not run as the pipeline's step (a programmatic pipeline): make
		// the action here; a record it fails on fails the job at once.
		out, err := step(r)
		if err != nil {
			return opensearch.Action{}, err
		}
		return out.val.(*osDoc).a, nil
	}
	snk, err := opensearch.NewSink(o.Strings("hosts"), doc, opts...)
	if err != nil {
		return err
	}
	stream.SinkTo(in, &unrecoverableItems[Record]{snk}, c.Name, stream.UID(c.UID))
	return nil
}

// unrecoverableItems wraps a sink so that a document OpenSearch rejected
// under on-item-error: fail (an *opensearch.ItemError) fails the job at
// once: a restart would send the same document again.
type unrecoverableItems[T any] struct{ sink.Sink[T] }

func (u *unrecoverableItems[T]) CreateWriter(ctx context.Context, ic sink.InitContext) (sink.Writer[T], error) {
	w, err := u.Sink.CreateWriter(ctx, ic)
	if err != nil {
		// Refused after the library's own retries (401 wrong credentials,
		// 403): a restart would be refused alike.
		if errors.Is(err, opensearch.ErrRequestFailed) {
			return nil, unrecoverable{err}
		}
		return nil, osUnrecoverable(err)
	}
	return &unrecoverableWriter[T]{w}, nil
}

type unrecoverableWriter[T any] struct{ sink.Writer[T] }

func (w *unrecoverableWriter[T]) Write(ctx context.Context, v T, m sink.Meta) error {
	return osUnrecoverable(w.Writer.Write(ctx, v, m))
}

func (w *unrecoverableWriter[T]) Flush(ctx context.Context, end bool) error {
	return osUnrecoverable(w.Writer.Flush(ctx, end))
}

// osUnrecoverable marks errors that a restart cannot fix: a rejected
// document, an invalid action or configuration.
func osUnrecoverable(err error) error {
	var ie *opensearch.ItemError
	if err != nil && (errors.As(err, &ie) || errors.Is(err, opensearch.ErrInvalidAction) || errors.Is(err, opensearch.ErrInvalidConfig)) {
		return unrecoverable{err}
	}
	return err
}

func buildOSSource(c BuildContext) (stream.DataStream[Record], error) {
	o := c.Options
	var opts []opensearch.SourceOption
	for _, co := range osConn(c) {
		opts = append(opts, co)
	}
	opts = append(opts, opensearch.Slices(int(o.Int("slices"))), opensearch.PageSize(int(o.Int("page-size"))),
		opensearch.KeepAlive(o.Duration("keep-alive")))
	if q := o.String("query"); q != "" {
		opts = append(opts, opensearch.Query(json.RawMessage(q)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.Duration("connection.request-timeout"))
	defer cancel()
	src, err := opensearch.NewSource(ctx, o.Strings("hosts"), o.String("index"), opts...)
	if err != nil {
		return stream.DataStream[Record]{}, err
	}
	jc, err := format.Builtin().New("json", format.Config{})
	if err != nil {
		return stream.DataStream[Record]{}, err
	}
	codecs := &Codecs{Value: jc}
	hits := stream.FromSource(c.Env, source.Source[opensearch.Hit, opensearch.Split, []opensearch.Split](src), watermark.None[opensearch.Hit](), c.Name, stream.UID(c.UID))
	decode := c.DecodeValues
	return stream.TryMap(hits, func(h opensearch.Hit) (Record, error) {
		r := RawRecord(h.Source, codecs)
		var err error
		if decode {
			r, err = r.Decode(context.Background())
		} else {
			err = checkValue(context.Background(), jc, h.Index, h.Source)
		}
		if err != nil {
			return r, unrecoverable{fmt.Errorf("opensearch source: document %q of index %q: %w", h.ID, h.Index, err)}
		}
		return r.WithKey([]byte(h.ID)), nil
	}, stream.Name(c.Name+"-records")), nil
}
