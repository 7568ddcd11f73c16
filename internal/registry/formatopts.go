package registry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"unicode/utf8"

	"github.com/sluice-io/sluice/internal/format"
)

// The format options every connector that reads or writes bytes takes
// (Kafka source and sink, file source and sink): the value's format, the
// key's (Kafka), and what the schema-registry and CSV formats need. They
// are in this one place so that every connector names them alike.

// formatNames are the formats a pipeline may name (format.Builtin).
var formatNames = format.Builtin().Names()

// registryFormats need a schema registry (schema-registry.url).
var registryFormats = []string{"avro", "protobuf", "json-schema"}

// csvOptions are the CSV format's options.
var csvOptions = []Option{
	{Name: "csv.columns", Type: Strings, Description: "csv: column names, a row becomes an object (default: none, a row is a list of strings)"},
	{Name: "csv.separator", Type: String, Default: ",", Check: checkSeparator, Description: "csv: the field separator, one character"},
}

// formatOptions returns the Kafka connectors' format options: the value
// format (format, or Flink's value.format), key.format (keyDoc its
// description) and what the schema-registry and CSV formats need.
func formatOptions(keyDoc string) []Option {
	opts := []Option{
		{Name: "format", Type: Enum, Values: formatNames, Default: "json",
			Description: "format of the record values: json (one object), raw (bytes as they are), string (UTF-8 text), csv, avro, protobuf, json-schema (the last three through a schema registry: schema-registry.url)"},
		{Name: "value.format", Type: Enum, Values: formatNames,
			Description: "Flink's name of format (an alias: set one of them; default: none)"},
		{Name: "key.format", Type: Enum, Values: formatNames, Default: "string", Description: keyDoc},
		{Name: "schema-registry.url", Type: Strings,
			Description: "base URLs of a Confluent-compatible schema registry (avro, protobuf, json-schema; default: none)"},
		{Name: "schema-registry.subject-strategy", Type: Enum, Values: []string{"topic", "record", "topic-record"}, Default: "topic",
			Description: "subject naming: topic = <topic>-value / <topic>-key, record = the record's full name, topic-record = <topic>-<full name>"},
		{Name: "schema-registry.subject", Type: String,
			Description: "subject of the values, instead of the strategy's (default: none)"},
		{Name: "schema-registry.schema", Type: String,
			Description: "writer schema (text) of the values; default: the latest version registered under the subject"},
		{Name: "schema-registry.schema-file", Type: String,
			Description: "file holding the values' writer schema, instead of schema-registry.schema (default: none)"},
		{Name: "key.schema-registry.subject", Type: String,
			Description: "subject of the keys (key.format avro, protobuf, json-schema), instead of the strategy's (default: none)"},
		{Name: "key.schema-registry.schema", Type: String,
			Description: "writer schema (text) of the keys; default: the latest version registered under the keys' subject"},
		{Name: "key.schema-registry.schema-file", Type: String,
			Description: "file holding the keys' writer schema, instead of key.schema-registry.schema (default: none)"},
		{Name: "schema-registry.auto-register", Type: Bool, Default: false,
			Description: "register the writer schema under the subject when encoding; false: it must be registered already"},
		{Name: "schema-registry.username", Type: String, Description: "basic-auth user of the schema registry (default: none)"},
		{Name: "schema-registry.password", Type: String, Secret: true, Description: "basic-auth password of the schema registry (default: none); use ${VAR}"},
		{Name: "schema-registry.tls.ca-file", Type: String, Description: "PEM file of the CAs that sign the schema registry's certificate (default: the system's)"},
		{Name: "schema-registry.tls.cert-file", Type: String, Description: "PEM file of the client certificate for the schema registry (with schema-registry.tls.key-file; default: none)"},
		{Name: "schema-registry.tls.key-file", Type: String, Description: "PEM file of the client certificate's private key (with schema-registry.tls.cert-file; default: none)"},
		{Name: "schema-registry.tls.insecure-skip-verify", Type: Bool, Default: false,
			Description: "do not verify the schema registry's certificate (testing only; default false)"},
		{Name: "protobuf.message", Type: String,
			Description: "protobuf: the message the values are written as (full name, or name when unique in the file); default: the first message of the schema"},
		{Name: "key.protobuf.message", Type: String,
			Description: "protobuf: the message the keys are written as; default: the first message of the keys' schema"},
	}
	return append(opts, csvOptions...)
}

func checkSeparator(v any) error {
	s, _ := v.(string)
	if utf8.RuneCountInString(s) != 1 {
		return errors.New("want one character")
	}
	return nil
}

// valueFormat returns the value's format name and the option that set it.
func valueFormat(o Options) (name, option string) {
	if o.String("value.format") != "" {
		return o.String("value.format"), "value.format"
	}
	if f := o.String("format"); f != "" {
		return f, "format"
	}
	return "json", "format"
}

// validateFormats checks the format options: one of format and
// value.format, and a schema registry for the formats that need one.
func validateFormats(o Options) error {
	if o.Has("value.format") && o.Has("format") && o.String("format") != "json" && o.String("format") != o.String("value.format") {
		return optErr("value.format", "is Flink's name of format; set only one of them")
	}
	name, opt := valueFormat(o)
	names := []struct{ name, opt string }{{name, opt}}
	if o.Has("key.format") {
		names = append(names, struct{ name, opt string }{o.String("key.format"), "key.format"})
	}
	for _, n := range names {
		if slices.Contains(registryFormats, n.name) && len(o.Strings("schema-registry.url")) == 0 {
			return optErr(n.opt, "%s needs a schema registry: set schema-registry.url", n.name)
		}
	}
	for _, p := range []string{"", "key."} {
		if o.Has(p+"schema-registry.schema") && o.Has(p+"schema-registry.schema-file") {
			return optErr(p+"schema-registry.schema-file", "set either %sschema-registry.schema or %sschema-registry.schema-file, not both", p, p)
		}
	}
	if o.Has("schema-registry.tls.cert-file") != o.Has("schema-registry.tls.key-file") {
		if o.Has("schema-registry.tls.cert-file") {
			return optErr("schema-registry.tls.cert-file", "needs schema-registry.tls.key-file (a client certificate needs both)")
		}
		return optErr("schema-registry.tls.key-file", "needs schema-registry.tls.cert-file (a client certificate needs both)")
	}
	return nil
}

// formatConfig builds the codec configuration of one side from the
// options. The subject, writer schema and Protobuf message are the
// side's own: key.schema-registry.* and key.protobuf.message for keys,
// the options without the key. prefix for values (so a key codec never
// registers the value's schema, nor under the value's subject).
func formatConfig(o Options, side format.Side) (format.Config, error) {
	c := format.Config{Side: side, CSVColumns: o.Strings("csv.columns")}
	if s := o.String("csv.separator"); s != "" {
		c.CSVComma, _ = utf8.DecodeRuneInString(s)
	}
	p := ""
	if side == format.Key {
		p = "key."
	}
	c.ProtoMessage = o.String(p + "protobuf.message")
	if urls := o.Strings("schema-registry.url"); len(urls) > 0 {
		rc := &format.RegistryConfig{URLs: urls, SubjectStrategy: o.String("schema-registry.subject-strategy"),
			Subject: o.String(p + "schema-registry.subject"), Schema: o.String(p + "schema-registry.schema"),
			AutoRegister: o.Bool("schema-registry.auto-register"), Username: o.String("schema-registry.username"),
			Password: o.String("schema-registry.password"), CAFile: o.String("schema-registry.tls.ca-file"),
			CertFile: o.String("schema-registry.tls.cert-file"), KeyFile: o.String("schema-registry.tls.key-file"),
			InsecureSkipVerify: o.Bool("schema-registry.tls.insecure-skip-verify")}
		if f := o.String(p + "schema-registry.schema-file"); f != "" {
			b, err := os.ReadFile(f)
			if err != nil {
				return c, &OptionError{Option: p + "schema-registry.schema-file", Err: err}
			}
			rc.Schema = string(b)
		}
		c.Registry = rc
	}
	return c, nil
}

// newCodec makes the codec of one side.
func newCodec(o Options, side format.Side, name, option string) (format.Codec, error) {
	cfg, err := formatConfig(o, side)
	if err != nil {
		return nil, err
	}
	c, err := format.Builtin().New(name, cfg)
	if err != nil {
		return nil, &OptionError{Option: option, Err: err}
	}
	return c, nil
}

// sourceCodecs makes the codecs a source reads with (the key's only if
// the connector has key.format).
func sourceCodecs(o Options) (*Codecs, error) {
	name, opt := valueFormat(o)
	v, err := newCodec(o, format.Value, name, opt)
	if err != nil {
		return nil, err
	}
	c := &Codecs{Value: v}
	if o.Has("key.format") {
		if c.Key, err = newCodec(o, format.Key, o.String("key.format"), "key.format"); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// checkValue checks the bytes of a record a source emits undecoded, so
// that malformed input follows the source's on-malformed policy as if it
// were decoded: with the codec's Validator, else by decoding.
func checkValue(ctx context.Context, c format.Codec, topic string, b []byte) error {
	if c.Identity() == "raw" {
		return nil // raw bytes are never malformed (and decoding would copy them)
	}
	if v, ok := c.(format.Validator); ok {
		return v.Validate(b)
	}
	_, err := c.Decode(ctx, topic, b)
	return err
}

// encodeValue returns the bytes a sink writes for r's value with codec c:
// the bytes as read when r still has them and they mean the same to c
// (equal, non-empty Identity); else r's value decoded if need be and
// encoded with c, appended to dst.
func encodeValue(ctx context.Context, c format.Codec, topic string, dst []byte, r Record) ([]byte, error) {
	if b, rc, ok := r.Bytes(); ok && rc.Identity() != "" && rc.Identity() == c.Identity() {
		if dst == nil {
			return b, nil
		}
		return append(dst, b...), nil
	}
	r, err := r.Decode(ctx)
	if err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return c.Encode(ctx, topic, dst, r.Value())
}
