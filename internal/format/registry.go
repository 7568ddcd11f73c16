package format

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// ErrWireFormat is wrapped by decode errors of bytes that are not in the
// Confluent wire format (magic byte 0, a 4-byte big-endian schema id, for
// protobuf a message-index list, then the payload).
var ErrWireFormat = errors.New("not in the Confluent schema-registry wire format")

// ErrUnknownSchema is wrapped by errors of a schema id, subject or schema
// the registry does not know.
var ErrUnknownSchema = errors.New("schema not found in the registry")

// ErrRegistry is wrapped by every error of a request to the schema
// registry (unreachable, refused, an unknown id or subject), and by no
// error of a value the schema cannot hold: callers tell the record's
// fault (skip it, or send it to dead letters) from the registry's (retry).
var ErrRegistry = errors.New("schema registry request failed")

// registryErr reports itself as ErrRegistry without changing its message.
type registryErr struct{ error }

func (e registryErr) Unwrap() error        { return e.error }
func (e registryErr) Is(target error) bool { return target == ErrRegistry }

// Subject naming strategies (RegistryConfig.SubjectStrategy).
const (
	StrategyTopic       = "topic"        // <topic>-key / <topic>-value (the default)
	StrategyRecord      = "record"       // the record's full name
	StrategyTopicRecord = "topic-record" // <topic>-<full name>
)

// registryTimeout bounds one request to the registry.
const registryTimeout = 10 * time.Second

// registry is a schema-registry client with the caches the codecs need:
// schemas by id (parsed by the codec's parse function), writer schemas by
// topic. Safe for concurrent use; requests run outside the lock (two
// goroutines may fetch the same schema once each).
type registry[S any] struct {
	cl    *sr.Client
	where string // the URLs, for errors
	cfg   RegistryConfig
	side  Side
	typ   sr.SchemaType
	parse func(ctx context.Context, s sr.Schema, refs map[string]string) (S, error)

	mu     sync.Mutex
	byID   map[int]S
	writer map[string]writerSchema[S] // by topic
}

// writerSchema is the schema a codec encodes with for one topic.
type writerSchema[S any] struct {
	id     int
	schema S
}

func newRegistry[S any](format string, c Config, typ sr.SchemaType, parse func(context.Context, sr.Schema, map[string]string) (S, error)) (*registry[S], error) {
	rc := c.Registry
	if rc == nil || len(rc.URLs) == 0 {
		return nil, fmt.Errorf("%s format: a schema registry URL is required", format)
	}
	switch rc.SubjectStrategy {
	case "", StrategyTopic, StrategyRecord, StrategyTopicRecord:
	default:
		return nil, fmt.Errorf("%s format: unknown subject strategy %q (want %s, %s or %s)", format, rc.SubjectStrategy, StrategyTopic, StrategyRecord, StrategyTopicRecord)
	}
	// Requests are few (answers are cached), so connections are not kept:
	// a codec has no Close, and leaves no idle connection (nor its
	// goroutines) behind.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	if rc.CAFile != "" || rc.CertFile != "" || rc.KeyFile != "" || rc.InsecureSkipVerify {
		tc, err := registryTLS(rc)
		if err != nil {
			return nil, fmt.Errorf("%s format: schema registry TLS: %w", format, err)
		}
		tr.TLSClientConfig = tc
	}
	opts := []sr.ClientOpt{sr.URLs(rc.URLs...), sr.HTTPClient(&http.Client{Timeout: registryTimeout, Transport: tr}), sr.UserAgent("sluice")}
	if rc.Username != "" || rc.Password != "" {
		opts = append(opts, sr.BasicAuth(rc.Username, rc.Password))
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("%s format: schema registry %s: %w", format, strings.Join(rc.URLs, ", "), err)
	}
	return &registry[S]{
		cl: cl, where: strings.Join(rc.URLs, ", "), cfg: *rc, side: c.Side, typ: typ, parse: parse,
		byID: map[int]S{}, writer: map[string]writerSchema[S]{},
	}, nil
}

func registryTLS(rc *RegistryConfig) (*tls.Config, error) {
	tc := &tls.Config{InsecureSkipVerify: rc.InsecureSkipVerify, MinVersion: tls.VersionTLS12} //nolint:gosec // only when asked for
	if rc.CAFile != "" {
		pem, err := os.ReadFile(rc.CAFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no PEM certificate in %s", rc.CAFile)
		}
		tc.RootCAs = pool
	}
	if (rc.CertFile == "") != (rc.KeyFile == "") {
		return nil, errors.New("a client certificate needs both a certificate and a key file")
	}
	if rc.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(rc.CertFile, rc.KeyFile)
		if err != nil {
			return nil, err
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// fail wraps a registry error so that it names the registry and, for a
// not-found answer, wraps ErrUnknownSchema.
func (r *registry[S]) fail(what string, err error) error {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		if re.StatusCode == http.StatusNotFound {
			return registryErr{fmt.Errorf("%s: %w (schema registry %s answered %d: %s)", what, ErrUnknownSchema, r.where, re.StatusCode, re.Error())}
		}
		return registryErr{fmt.Errorf("%s: schema registry %s answered %d: %w", what, r.where, re.StatusCode, err)}
	}
	return registryErr{fmt.Errorf("%s: schema registry %s: %w", what, r.where, err)}
}

// subject names the subject for a topic and a record's full name (the
// latter only for the record strategies).
func (r *registry[S]) subject(topic, fullName string) (string, error) {
	if r.cfg.Subject != "" {
		return r.cfg.Subject, nil
	}
	switch r.cfg.SubjectStrategy {
	case StrategyRecord, StrategyTopicRecord:
		if fullName == "" {
			return "", fmt.Errorf("subject strategy %q needs the record's name: set the schema (or an explicit subject)", r.cfg.SubjectStrategy)
		}
		if r.cfg.SubjectStrategy == StrategyRecord {
			return fullName, nil
		}
		return topic + "-" + fullName, nil
	}
	return topic + "-" + r.side.String(), nil
}

// schemaByID returns the parsed schema of an id, from the cache or the
// registry.
func (r *registry[S]) schemaByID(ctx context.Context, id int) (S, error) {
	r.mu.Lock()
	s, ok := r.byID[id]
	r.mu.Unlock()
	if ok {
		return s, nil
	}
	var zero S
	raw, err := r.cl.SchemaByID(ctx, id)
	if err != nil {
		return zero, r.fail(fmt.Sprintf("schema id %d", id), err)
	}
	s, err = r.parseWithRefs(ctx, raw)
	if err != nil {
		return zero, fmt.Errorf("schema id %d: %w", id, err)
	}
	r.mu.Lock()
	r.byID[id] = s
	r.mu.Unlock()
	return s, nil
}

// maxRefs bounds the schemas one schema may pull in through references.
const maxRefs = 100

// parseWithRefs fetches the schemas a schema references (transitively,
// by subject and version) and parses it with them.
func (r *registry[S]) parseWithRefs(ctx context.Context, s sr.Schema) (S, error) {
	var refs map[string]string
	if len(s.References) > 0 {
		refs = map[string]string{}
		todo := append([]sr.SchemaReference(nil), s.References...)
		for len(todo) > 0 {
			ref := todo[0]
			todo = todo[1:]
			if _, ok := refs[ref.Name]; ok {
				continue
			}
			if len(refs) >= maxRefs {
				var zero S
				return zero, fmt.Errorf("more than %d schema references", maxRefs)
			}
			ss, err := r.cl.SchemaByVersion(ctx, ref.Subject, ref.Version)
			if err != nil {
				var zero S
				return zero, r.fail(fmt.Sprintf("reference %q (subject %q version %d)", ref.Name, ref.Subject, ref.Version), err)
			}
			refs[ref.Name] = ss.Schema.Schema
			todo = append(todo, ss.References...)
		}
	}
	return r.parse(ctx, s, refs)
}

// writerFor returns the schema id and schema to encode with for a topic:
// the configured schema, looked up (or registered with AutoRegister)
// under the subject, or without one the latest version under the subject.
// The answer is cached for the codec's life, so a version registered
// while a job runs is used after a restart.
func (r *registry[S]) writerFor(ctx context.Context, topic, fullName string) (int, S, error) {
	r.mu.Lock()
	w, ok := r.writer[topic]
	r.mu.Unlock()
	if ok {
		return w.id, w.schema, nil
	}
	var zero S
	subject, err := r.subject(topic, fullName)
	if err != nil {
		return 0, zero, err
	}
	var raw sr.Schema
	var id int
	switch {
	case r.cfg.Schema == "":
		ss, err := r.cl.SchemaByVersion(ctx, subject, -1)
		if err != nil {
			return 0, zero, r.fail(fmt.Sprintf("the latest schema of subject %q", subject), err)
		}
		id, raw = ss.ID, ss.Schema
	case r.cfg.AutoRegister:
		raw = sr.Schema{Schema: r.cfg.Schema, Type: r.typ}
		id, err = r.cl.RegisterSchema(ctx, subject, raw, -1, -1)
		if err != nil {
			return 0, zero, r.fail(fmt.Sprintf("registering the schema under subject %q", subject), err)
		}
	default:
		raw = sr.Schema{Schema: r.cfg.Schema, Type: r.typ}
		ss, err := r.cl.LookupSchema(ctx, subject, raw)
		if err != nil {
			err = r.fail(fmt.Sprintf("looking the schema up under subject %q", subject), err)
			if errors.Is(err, ErrUnknownSchema) {
				err = fmt.Errorf("%w; register it, or let the format register it (auto-register)", err)
			}
			return 0, zero, err
		}
		id = ss.ID
	}
	s, err := r.parseWithRefs(ctx, raw)
	if err != nil {
		return 0, zero, fmt.Errorf("schema id %d (subject %q): %w", id, subject, err)
	}
	r.mu.Lock()
	r.writer[topic] = writerSchema[S]{id: id, schema: s}
	r.byID[id] = s
	r.mu.Unlock()
	return id, s, nil
}

// splitWire splits the Confluent header off: the schema id and the rest.
func splitWire(b []byte) (int, []byte, error) {
	switch {
	case len(b) == 0:
		return 0, nil, fmt.Errorf("%w: empty record", ErrWireFormat)
	case b[0] != 0:
		return 0, nil, fmt.Errorf("%w: first byte is 0x%02x, not the magic byte 0", ErrWireFormat, b[0])
	case len(b) < 5:
		return 0, nil, fmt.Errorf("%w: %d bytes, shorter than the 5-byte header", ErrWireFormat, len(b))
	}
	return int(binary.BigEndian.Uint32(b[1:5])), b[5:], nil
}

// appendWire appends the Confluent header for a schema id.
func appendWire(dst []byte, id int) []byte {
	return append(dst, 0, byte(id>>24), byte(id>>16), byte(id>>8), byte(id))
}
