// Package format holds the value formats of CLI pipelines: how the bytes of
// a record's value (or key) become the value that expressions read, and
// back. Every connector shares them: a Kafka source decodes each record's
// value with its format, a file sink encodes with its own.
//
// Decoded values are JSON-like: map[string]any for objects, []any, string,
// bool, nil, int64 and float64 for numbers (json.Number where a float64
// would change a JSON number), []byte for bytes, time.Time for timestamps.
// Every codec accepts what every other produces, so Avro in → JSON out
// and JSON in → Avro out work; a value the target cannot hold is an error
// naming the field.
//
// The formats:
//
//	json         one JSON value (an object unless the format says otherwise); numbers exact
//	raw          the bytes as they are ([]byte); never fails
//	string       the bytes as a UTF-8 string
//	csv          one CSV row: an object with the configured columns, or a list of strings
//	avro         Avro binary in the Confluent wire format (magic 0, schema id), schema from a registry
//	protobuf     Protobuf in the Confluent wire format, schema from a registry
//	json-schema  JSON in the Confluent wire format, validated against a registered JSON Schema
//
// A codec whose bytes mean the same to another codec (Identity equal and
// not "") lets a pipeline pass bytes through without decoding when no
// transform reads the value.
//
// docs/formats.md has each format's value mapping, the registry options
// and subject strategies, and Flink's format names side by side.
package format

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/sluice-io/sluice/serde/jsonrecord"
)

// Codec decodes and encodes one side (key or value) of records.
// Implementations are safe for concurrent use.
type Codec interface {
	// Decode turns bytes into a value. topic is the Kafka topic (or the
	// file path) the bytes came from; codecs that look schemas up by
	// subject use it. The bytes may be retained only until Decode returns.
	Decode(ctx context.Context, topic string, b []byte) (any, error)
	// Encode appends the encoding of v to dst (for the topic or file it
	// goes to) and returns the extended slice.
	Encode(ctx context.Context, topic string, dst []byte, v any) ([]byte, error)
	// Identity names what the bytes mean: two codecs with the same
	// non-empty Identity read and write the same bytes for the same
	// values, so bytes decoded by one may be written unchanged by the
	// other. "" = never pass bytes through.
	Identity() string
}

// Validator is implemented by codecs that can check bytes faster than
// they decode them (JSON: one scan, no allocation). A pipeline that passes
// bytes through still rejects malformed input with it.
type Validator interface {
	Validate(b []byte) error
}

// Side tells a record's key from its value (schema subjects differ).
type Side int

const (
	Value Side = iota
	Key
)

func (s Side) String() string {
	if s == Key {
		return "key"
	}
	return "value"
}

// Config configures a codec. Zero values are the documented defaults.
type Config struct {
	// Side is the record side the codec is for (default Value).
	Side Side
	// AnyJSON lets the json format accept any JSON value, not only
	// objects (default false: a value that is not an object is malformed).
	AnyJSON bool
	// CSV: the column names (a row becomes an object), the separator
	// (default ','); without columns a row is a list of strings.
	CSVColumns []string
	CSVComma   rune
	// ProtoMessage names the Protobuf message the protobuf format writes
	// (its full name, or its name when unique in the file); default the
	// first message of the schema's file.
	ProtoMessage string
	// Registry configures the schema-registry formats (avro, protobuf,
	// json-schema); nil for the others.
	Registry *RegistryConfig
}

// RegistryConfig is the schema registry a codec uses.
type RegistryConfig struct {
	URLs []string // base URLs, e.g. http://127.0.0.1:8081/apis/ccompat/v7
	// Subject naming: "topic" (TopicNameStrategy, <topic>-key/-value, the
	// default), "record" (RecordNameStrategy, the record's full name),
	// "topic-record" (<topic>-<full name>); or Subject names it outright.
	SubjectStrategy string
	Subject         string
	// Schema is the writer schema (text) for encoding; "" = the latest
	// version registered under the subject. Either is found once per topic
	// and kept for the codec's life: a version registered while a job
	// runs is picked up when the job restarts.
	Schema string
	// AutoRegister registers Schema under the subject when encoding
	// (default false: the schema must be registered, and is looked up).
	AutoRegister bool
	// Basic auth and TLS for the registry.
	Username, Password string
	CAFile             string
	CertFile, KeyFile  string
	InsecureSkipVerify bool
}

// Constructor makes a codec from a config.
type Constructor func(Config) (Codec, error)

// Formats is a set of named formats. The zero value is empty; Builtin
// returns the standard set.
type Formats struct{ m map[string]Constructor }

// Register adds a format; it replaces one of the same name.
func (f *Formats) Register(name string, c Constructor) {
	if f.m == nil {
		f.m = map[string]Constructor{}
	}
	f.m[name] = c
}

// Names returns the registered format names, sorted.
func (f *Formats) Names() []string {
	var n []string
	for k := range f.m {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// ErrUnknownFormat is wrapped by New's error for a name not registered.
var ErrUnknownFormat = errors.New("unknown format")

// New makes the named codec.
func (f *Formats) New(name string, c Config) (Codec, error) {
	ctor, ok := f.m[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (want one of %s)", ErrUnknownFormat, name, strings.Join(f.Names(), ", "))
	}
	return ctor(c)
}

// Builtin returns the standard formats. It is a new set on every call.
func Builtin() *Formats {
	f := &Formats{}
	f.Register("json", func(c Config) (Codec, error) { return jsonCodec{any: c.AnyJSON}, nil })
	f.Register("raw", func(Config) (Codec, error) { return rawCodec{}, nil })
	f.Register("string", func(Config) (Codec, error) { return stringCodec{}, nil })
	registerMore(f)
	return f
}

// registerMore adds the formats defined in other files (csv, the
// schema-registry formats).
var registerMore = func(*Formats) {}

type jsonCodec struct{ any bool }

func (j jsonCodec) Decode(_ context.Context, _ string, b []byte) (any, error) {
	if j.any {
		return jsonrecord.Decode(b)
	}
	return jsonrecord.DecodeObject(b)
}

// Validate accepts exactly what Decode accepts, with one scan and no
// allocation for ordinary records (jsonrecord.Validate).
func (j jsonCodec) Validate(b []byte) error {
	if j.any {
		return jsonrecord.Validate(b)
	}
	return jsonrecord.ValidateObject(b)
}

func (jsonCodec) Encode(_ context.Context, _ string, dst []byte, v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("json format: %w", err)
	}
	return append(dst, b...), nil
}

func (j jsonCodec) Identity() string {
	if j.any {
		return "json"
	}
	return "json-object"
}

type rawCodec struct{}

func (rawCodec) Decode(_ context.Context, _ string, b []byte) (any, error) {
	return slices.Clone(b), nil
}
func (rawCodec) Encode(_ context.Context, _ string, dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case []byte:
		return append(dst, x...), nil
	case string:
		return append(dst, x...), nil
	case nil:
		return dst, nil
	}
	return nil, fmt.Errorf("raw format: cannot write a %s as bytes (want bytes or a string)", KindOf(v))
}
func (rawCodec) Identity() string { return "raw" }

type stringCodec struct{}

func (stringCodec) Decode(_ context.Context, _ string, b []byte) (any, error) {
	if !utf8.Valid(b) {
		return nil, errors.New("string format: invalid UTF-8")
	}
	return string(b), nil
}
func (stringCodec) Encode(ctx context.Context, topic string, dst []byte, v any) ([]byte, error) {
	if s, ok := v.(string); ok {
		return append(dst, s...), nil
	}
	return nil, fmt.Errorf("string format: cannot write a %s as a string", KindOf(v))
}
func (stringCodec) Identity() string { return "string" }

// KindOf names a decoded value's kind for errors (never its content).
func KindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case map[string]any:
		return "object"
	case []any:
		return "list"
	case string:
		return "string"
	case bool:
		return "boolean"
	case []byte:
		return "bytes"
	default:
		return fmt.Sprintf("%T", v)
	}
}
