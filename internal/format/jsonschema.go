package format

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/twmb/franz-go/pkg/sr"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/sluice-io/sluice/serde/jsonrecord"
)

func init() {
	prev := registerMore
	registerMore = func(f *Formats) {
		prev(f)
		f.Register("json-schema", newJSONSchema)
	}
}

// jsonSchemaBase is the URL the registry's schemas are compiled under;
// references resolve against it (a reference named "address.json" is
// jsonSchemaBase's sibling). Nothing is loaded from it.
const jsonSchemaBase = "https://schema-registry.invalid/schemas/"

// jsonSchemaCodec reads and writes JSON in the Confluent wire format,
// validated against the schema the id names (decode) or the writer
// schema (encode).
type jsonSchemaCodec struct {
	reg      *registry[*jsonschema.Schema]
	fullName string // the configured schema's title, for the record strategies
}

func newJSONSchema(c Config) (Codec, error) {
	reg, err := newRegistry("json-schema", c, sr.TypeJSON, parseJSONSchema)
	if err != nil {
		return nil, err
	}
	jc := &jsonSchemaCodec{reg: reg}
	if c.Registry.Schema != "" {
		if _, err := parseJSONSchema(context.Background(), sr.Schema{Schema: c.Registry.Schema}, nil); err != nil {
			return nil, fmt.Errorf("json-schema format: the configured schema: %w", err)
		}
		var doc struct {
			Title string `json:"title"`
		}
		_ = json.Unmarshal([]byte(c.Registry.Schema), &doc)
		jc.fullName = doc.Title
	}
	return jc, nil
}

func parseJSONSchema(_ context.Context, s sr.Schema, refs map[string]string) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	// No loader: a $ref to anything but the references is an error.
	c.UseLoader(noLoader{})
	for name, text := range refs {
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
		if err != nil {
			return nil, fmt.Errorf("referenced schema %q: %w", name, err)
		}
		u, err := url.Parse(jsonSchemaBase)
		if err != nil {
			return nil, err
		}
		ref, err := u.Parse(name)
		if err != nil {
			return nil, fmt.Errorf("referenced schema %q: %w", name, err)
		}
		if err := c.AddResource(ref.String(), doc); err != nil {
			return nil, fmt.Errorf("referenced schema %q: %w", name, err)
		}
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(s.Schema))
	if err != nil {
		return nil, fmt.Errorf("invalid JSON Schema: %w", err)
	}
	main := jsonSchemaBase + "sluice-main.json"
	if err := c.AddResource(main, doc); err != nil {
		return nil, fmt.Errorf("invalid JSON Schema: %w", err)
	}
	sch, err := c.Compile(main)
	if err != nil {
		return nil, fmt.Errorf("invalid JSON Schema: %w", err)
	}
	return sch, nil
}

type noLoader struct{}

func (noLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("%s is not a reference of the registered schema (nothing is loaded from the network)", u)
}

func (c *jsonSchemaCodec) Decode(ctx context.Context, _ string, b []byte) (any, error) {
	id, payload, err := splitWire(b)
	if err != nil {
		return nil, fmt.Errorf("json-schema format: %w", err)
	}
	sch, err := c.reg.schemaByID(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("json-schema format: %w", err)
	}
	v, err := jsonrecord.Decode(payload)
	if err != nil {
		return nil, fmt.Errorf("json-schema format: schema id %d: %w", id, err)
	}
	if err := validateJSON(sch, v); err != nil {
		return nil, fmt.Errorf("json-schema format: schema id %d: %w", id, err)
	}
	return v, nil
}

func (c *jsonSchemaCodec) Encode(ctx context.Context, topic string, dst []byte, v any) ([]byte, error) {
	id, sch, err := c.reg.writerFor(ctx, topic, c.fullName)
	if err != nil {
		return nil, fmt.Errorf("json-schema format: %w", err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("json-schema format: %w", err)
	}
	// Validate what a reader will see: the JSON, decoded exactly (bytes
	// and times are strings by then).
	inst, err := jsonrecord.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("json-schema format: %w", err)
	}
	if err := validateJSON(sch, inst); err != nil {
		return nil, fmt.Errorf("json-schema format: schema id %d: %w", id, err)
	}
	return append(appendWire(dst, id), b...), nil
}

// Identity is "": a writer looks its own schema up.
func (c *jsonSchemaCodec) Identity() string { return "" }

// ErrInvalid is wrapped by errors of values a schema rejects.
var ErrInvalid = errors.New("value does not match the schema")

var enPrinter = message.NewPrinter(language.English)

// validateJSON validates and flattens the validator's error tree into its
// leaves: where in the instance, which keyword, what.
func validateJSON(sch *jsonschema.Schema, v any) error {
	err := sch.Validate(v)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	var leaves []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := "/" + strings.Join(e.InstanceLocation, "/")
			kw := strings.Join(e.ErrorKind.KeywordPath(), "/")
			leaves = append(leaves, fmt.Sprintf("at %s: keyword %s: %s", loc, kw, e.ErrorKind.LocalizedString(enPrinter)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	return fmt.Errorf("%w: %s", ErrInvalid, strings.Join(leaves, "; "))
}
