// Package registry is the CLI's catalogue of connectors. Each connector
// registers its name, its kind (source or sink), a schema of its options
// (name, type, default, description) and a factory that adds its operator
// to a stream.Environment. The pipeline package validates a YAML pipeline
// against the schemas, so errors name file, line and field, and `sluice
// connectors` prints them.
//
// Records flowing through CLI pipelines are [Record]s: a value plus
// metadata (Kafka key, headers, timestamp, topic, partition, offset; a
// file's path and line offset). Values are JSON-like (package format;
// from JSON, numbers are int64, float64 or json.Number, whichever writes
// them back byte for byte; from datagen int64). Sources produce records,
// keeping the bytes they read and decoding them only when a transform
// reads the value (BuildContext.DecodeValues); transforms rewrite them;
// sinks encode them with their format, or write the bytes as read when
// the formats agree.
//
// An option named "<prefix>.*" (a family) takes every key under the prefix
// that no other option of the connector declares: the Kafka connectors'
// "properties.*" pass Kafka client settings through
// (properties.fetch.max.bytes: 1048576), while properties.compression.type,
// declared on its own, keeps its type and default. A family's values are
// strings; its CheckKey checks each key and value at validation (an error
// wrapping ErrKeyNotSupported is about the key and reported without the
// value); Options.Prefixed returns the keys set, and `sluice connectors`
// prints the family like any option.
//
// Adding a connector takes one file in this package, e.g. kafka.go:
//
//	func init() {
//		MustRegisterSink(Sink{
//			Name: "kafka", Description: "...", ExactlyOnce: true,
//			Options: []Option{{Name: "topic", Type: String, Required: true, Description: "..."}},
//			Build: func(c BuildContext, in stream.DataStream[Record]) error {
//				stream.SinkTo(in, kafka.NewSink[Record](...c.Options.String("topic")...), c.Name)
//				return nil
//			},
//		})
//	}
package registry

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-io/sluice/stream"
)

// Kind tells sources from sinks.
type Kind string

const (
	KindSource Kind = "source"
	KindSink   Kind = "sink"
)

// Type is the type of an option's value.
type Type string

const (
	String   Type = "string"
	Int      Type = "int"
	Float    Type = "float"
	Bool     Type = "bool"
	Duration Type = "duration" // Go syntax: 500ms, 1m30s
	Strings  Type = "[]string" // a YAML list of strings, or one string of comma-separated items ("h1:9092,h2:9092")
	Enum     Type = "enum"     // a string out of Option.Values
)

// Option describes one option of a connector.
type Option struct {
	Name        string
	Type        Type
	Default     any      // typed like the value: int64, float64, bool, string, time.Duration, []string; nil = none
	Required    bool     // the pipeline must set it; Default is ignored
	Secret      bool     // never printed (passwords, tokens)
	Values      []string // the allowed values of an Enum
	Description string
	// Check, if set, checks the parsed value (typed like Default); its
	// error is reported at the option's line. It must not repeat the value
	// (it may come from the environment). AtLeast, Between and Positive
	// make common checks.
	Check func(v any) error
	// CheckKey, for a family (a Name ending in ".*", Type String, no
	// Default, not Required), checks one key set under it (the whole
	// key: "properties.fetch.max.bytes") and its value; nil accepts any.
	// Like Check, its error must not repeat the value.
	CheckKey func(key, value string) error
}

// ErrKeyNotSupported is wrapped by a family's CheckKey errors about the
// key itself (an unknown or refused name) rather than its value.
var ErrKeyNotSupported = errors.New("not supported")

// FamilyPrefix returns the prefix of a family option ("properties." for
// "properties.*"), or "" for an ordinary option.
func (o Option) FamilyPrefix() string {
	if p, ok := strings.CutSuffix(o.Name, "*"); ok && strings.HasSuffix(p, ".") {
		return p
	}
	return ""
}

// Family returns the family option of schema that key belongs to: key
// starts with its prefix, has more after it, and no ordinary option of
// schema is named key.
func Family(schema []Option, key string) (Option, bool) {
	var fam Option
	found := false
	for _, o := range schema {
		if o.Name == key {
			return Option{}, false
		}
		if p := o.FamilyPrefix(); p != "" && len(key) > len(p) && strings.HasPrefix(key, p) && !found {
			fam, found = o, true
		}
	}
	return fam, found
}

// AtLeast returns a Check for an Int, Float or Duration (in nanoseconds)
// option: the value must be at least min.
func AtLeast(min float64) func(any) error {
	return func(v any) error {
		if f, ok := number(v); ok && f < min {
			return fmt.Errorf("must be at least %v", min)
		}
		return nil
	}
}

// Between returns a Check for an Int or Float option: the value must be in
// [min, max].
func Between(min, max float64) func(any) error {
	return func(v any) error {
		if f, ok := number(v); ok && (f < min || f > max) {
			return fmt.Errorf("must be between %v and %v", min, max)
		}
		return nil
	}
}

// Positive is a Check for an Int, Float or Duration option: the value must
// be greater than zero.
func Positive(v any) error {
	if d, ok := v.(time.Duration); ok {
		if d <= 0 {
			return errors.New("must be greater than 0")
		}
		return nil
	}
	if f, ok := number(v); ok && f <= 0 {
		return errors.New("must be greater than 0")
	}
	return nil
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case time.Duration:
		return float64(n), true
	case int64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

// SplitList splits the one-string form of a Strings option on commas:
// "h1:9092, h2:9092" is [h1:9092 h2:9092]; "" is an empty list. An empty
// item ("a,,b") is an error.
func SplitList(s string) ([]string, error) {
	if strings.TrimSpace(s) == "" {
		return []string{}, nil
	}
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
		if parts[i] == "" {
			return nil, errors.New("empty item in a comma-separated list")
		}
	}
	return parts, nil
}

// Options are a connector's validated option values, with defaults filled
// in. The getters panic on a name the connector did not declare with that
// type, which is a bug in the connector's registration. Has tells whether
// an option has a value at all, IsSet whether the user gave it (a default
// is not a setting; a setting equal to the default is).
type Options struct {
	m   map[string]any
	def map[string]bool   // options whose value is their declared default, not set by the user
	env map[string]bool   // options whose value came from the environment
	fam map[string]string // keys set under a family ("properties.*"), with their values
}

// KeyValue is one key set under a family and its value.
type KeyValue struct{ Key, Value string }

// WithPrefixed returns o with the keys kv set under a family (the pipeline
// parser, tests and programmatic pipelines; keys are whole:
// "properties.client.id").
func (o Options) WithPrefixed(kv map[string]string) Options {
	fam := maps.Clone(o.fam)
	if fam == nil {
		fam = map[string]string{}
	}
	maps.Copy(fam, kv)
	o.fam = fam
	return o
}

// Prefixed returns the keys set under a family whose names start with
// prefix ("properties."), with their values, sorted by key. Options
// declared on their own (properties.compression.type) are not among them:
// read those with their getters.
func (o Options) Prefixed(prefix string) []KeyValue {
	var out []KeyValue
	for k, v := range o.fam {
		if strings.HasPrefix(k, prefix) {
			out = append(out, KeyValue{k, v})
		}
	}
	slices.SortFunc(out, func(a, b KeyValue) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// FromEnvironment reports whether the option's value came from an
// environment variable (${VAR}). Such values are never shown in errors or
// logs (docs/cli.md).
func (o Options) FromEnvironment(name string) bool { return o.env[name] }

// MarkFromEnvironment returns o with the named options marked as coming
// from the environment.
func (o Options) MarkFromEnvironment(names ...string) Options {
	env := maps.Clone(o.env)
	if env == nil {
		env = map[string]bool{}
	}
	for _, n := range names {
		env[n] = true
	}
	o.env = env
	return o
}

// NewOptions returns Options holding m (tests and programmatic
// pipelines): every option in m counts as set by the user (IsSet). Add
// the schema's defaults with WithDefaults.
func NewOptions(m map[string]any) Options { return Options{m: maps.Clone(m)} }

// WithDefaults returns o with the declared default of every option of
// schema that has none of its own value: such an option Has a value but
// is not IsSet. Options without a default, required ones and families
// are left out.
func (o Options) WithDefaults(schema []Option) Options {
	m, def := maps.Clone(o.m), maps.Clone(o.def)
	if m == nil {
		m = map[string]any{}
	}
	for _, op := range schema {
		if _, ok := m[op.Name]; ok || op.Default == nil || op.Required || op.FamilyPrefix() != "" {
			continue
		}
		if def == nil {
			def = map[string]bool{}
		}
		m[op.Name], def[op.Name] = op.Default, true
	}
	o.m, o.def = m, def
	return o
}

func get[T any](o Options, name string) T {
	v, ok := o.m[name]
	if !ok {
		var zero T
		return zero
	}
	t, ok := v.(T)
	if !ok {
		panic(fmt.Sprintf("registry: option %q is a %T, not a %T", name, v, t))
	}
	return t
}

// Has reports whether the option has a value, set or defaulted: true for
// every option with a declared default. To tell a user's setting from a
// default, use IsSet.
func (o Options) Has(name string) bool { _, ok := o.m[name]; return ok }

// IsSet reports whether the user set the option (in the pipeline file, or
// in NewOptions' map), whatever its value: an option set to its declared
// default is set; a default filled in by WithDefaults is not. A key under
// a family ("properties.linger.ms") is set when it is among Prefixed's.
func (o Options) IsSet(name string) bool {
	if _, ok := o.m[name]; ok {
		return !o.def[name]
	}
	_, ok := o.fam[name]
	return ok
}

// String returns a String or Enum option.
func (o Options) String(name string) string { return get[string](o, name) }

// Int returns an Int option.
func (o Options) Int(name string) int64 { return get[int64](o, name) }

// Float returns a Float option.
func (o Options) Float(name string) float64 { return get[float64](o, name) }

// Bool returns a Bool option.
func (o Options) Bool(name string) bool { return get[bool](o, name) }

// Duration returns a Duration option.
func (o Options) Duration(name string) time.Duration { return get[time.Duration](o, name) }

// Strings returns a Strings option.
func (o Options) Strings(name string) []string { return slices.Clone(get[[]string](o, name)) }

// OptionError is an error about one option of a connector, reported at
// that option's line.
type OptionError struct {
	Option string // the option's name
	Err    error
}

func (e *OptionError) Error() string { return e.Option + ": " + e.Err.Error() }

// Unwrap returns Err.
func (e *OptionError) Unwrap() error { return e.Err }

// Delivery is a pipeline's delivery guarantee.
type Delivery string

const (
	ExactlyOnce Delivery = "exactly-once"
	AtLeastOnce Delivery = "at-least-once"
)

// BuildContext is what a factory gets to add its operator to a job.
type BuildContext struct {
	Env  *stream.Environment
	Name string // operator name: unique; it labels metrics and logs
	// UID is the operator's stable id (stream.UID), from the pipeline's
	// uid field; "" means the name. Checkpoint state is keyed by it, so
	// factories pass stream.UID(c.UID) to FromSource/SinkTo.
	UID      string
	Options  Options
	Delivery Delivery
	Stdout   io.Writer // where a print sink writes
	Logger   *slog.Logger
	// Positions asks a source to attach to every record where it read it
	// (WithPosition), for the dead letters, skip warnings and fail errors
	// of transforms; the pipeline takes it off (TakePosition) before any
	// transform expression or sink sees the record. Sources that cannot
	// tell ignore it.
	Positions bool
	// DecodeValues tells a source that a transform or the sink reads the
	// records' values: it decodes them (and a value it cannot decode
	// follows its on-malformed policy). When false it may emit the bytes
	// undecoded (Record.Bytes), checked but not decoded.
	DecodeValues bool
	// LookupKeys, when a source emits JSON values undecoded, are the
	// top-level members the first step reads (transform.LookupKeys): a
	// source may find them in the scan that checks the bytes
	// (Codecs.Lookup, Record.Found). nil = none.
	LookupKeys []string
	// ValuesReplaced tells a source that a transform replaces every
	// record's value (a map, select or rename), so bytes it keeps with
	// decoded values would never be written: it may decode without
	// keeping them.
	ValuesReplaced bool
	// StepApplied tells a sink that the pipeline runs its Step before
	// it; a sink with a Step that is not told so applies it itself
	// (failing the job on a record it fails on).
	StepApplied bool
	// SinkOwnsRecords tells a sink that nothing reads a record after
	// the sink got it: no transform keeps records and no dead-letter
	// path sees them. It may then hand a record's own buffers to its
	// client, to be changed and kept (the Kafka sink produces a record a
	// Kafka source read, unchanged, as the fetched *kgo.Record itself).
	SinkOwnsRecords bool
}

// Source is a registered source connector.
type Source struct {
	Name        string
	Description string
	Options     []Option
	// Validate checks rules across options (optional); its error is
	// reported at the connector's line, an *OptionError at its option's.
	Validate func(Options) error
	// Build adds the source to c.Env and returns its stream.
	Build func(c BuildContext) (stream.DataStream[Record], error)
	// Fields, if not nil, are all the fields the source's records can
	// have (its declared schema): an expression reading any other field
	// is refused at validation. nil = not known (JSON from outside).
	Fields []string
	// MaxParallelism, if set, is the most source subtasks that can get
	// work with these options (e.g. the number of splits); a pipeline
	// with a higher parallelism is warned about.
	MaxParallelism func(Options) int
	// DeadLetters reports whether the source, so configured, emits dead
	// letters (records marked with MarkDeadLetter) for the pipeline's
	// dead-letter sink (optional; nil = never).
	DeadLetters func(Options) bool
}

// Sink is a registered sink connector.
type Sink struct {
	Name        string
	Description string
	Options     []Option
	// ExactlyOnce says the sink commits with the checkpoints (two-phase).
	ExactlyOnce bool
	Validate    func(Options) error
	// CheckSource checks the sink's options against the pipeline's source
	// (optional), e.g. a file sink writing where a file source reads. An
	// error refuses the pipeline; a warning is shown by `sluice validate`
	// and logged by `sluice run`.
	CheckSource func(sourceType string, source, sink Options) (warning string, err error)
	// Delivery, if set, returns the delivery guarantee the sink's options
	// ask for and the option that asks ("" = none asked): it is the
	// pipeline's delivery when the pipeline sets none; a pipeline that
	// sets another one is refused at that option's line.
	Delivery func(Options) (d Delivery, option string)
	// CheckDelivery, if set, checks the options against the pipeline's
	// delivery guarantee; an *OptionError is reported at the line of the
	// option it names, another error at the sink's.
	CheckDelivery func(d Delivery, o Options) error
	// Step, if set, returns the sink's per-record work that can fail on
	// a record (the Kafka sink's key, headers, partition and timestamp
	// expressions) as a function the pipeline runs before the sink, under
	// its on-error policy (then it sets BuildContext.StepApplied); nil
	// step = none; name is the sink's (for errors). readsValue reports
	// whether it reads the records' values (so the source must decode
	// them).
	Step func(name string, o Options) (step func(Record) (Record, error), readsValue bool, err error)
	// Build ends in at c.Env with the sink.
	Build func(c BuildContext, in stream.DataStream[Record]) error
}

// Connector is the kind-independent view of a registration.
type Connector struct {
	Name, Description string
	Kind              Kind
	Options           []Option
	ExactlyOnce       bool
	Validate          func(Options) error
}

// Registry holds connectors by kind and name. It is safe for concurrent use.
type Registry struct {
	mu      sync.RWMutex
	sources map[string]Source
	sinks   map[string]Sink
}

// New returns an empty registry.
func New() *Registry { return &Registry{sources: map[string]Source{}, sinks: map[string]Sink{}} }

var defaultRegistry = New()

// Default returns the registry the built-in connectors register in.
func Default() *Registry { return defaultRegistry }

// MustRegisterSource registers s in the default registry; it panics on an
// invalid or duplicate registration (call it from init).
func MustRegisterSource(s Source) {
	if err := defaultRegistry.RegisterSource(s); err != nil {
		panic(err)
	}
}

// MustRegisterSink registers s in the default registry; it panics on an
// invalid or duplicate registration (call it from init).
func MustRegisterSink(s Sink) {
	if err := defaultRegistry.RegisterSink(s); err != nil {
		panic(err)
	}
}

// RegisterSource adds a source.
func (r *Registry) RegisterSource(s Source) error {
	if err := checkSchema(s.Name, s.Options); err != nil {
		return err
	}
	if s.Build == nil {
		return fmt.Errorf("registry: source %q has no Build", s.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.sources[s.Name]; dup {
		return fmt.Errorf("registry: source %q registered twice", s.Name)
	}
	r.sources[s.Name] = s
	return nil
}

// RegisterSink adds a sink.
func (r *Registry) RegisterSink(s Sink) error {
	if err := checkSchema(s.Name, s.Options); err != nil {
		return err
	}
	if s.Build == nil {
		return fmt.Errorf("registry: sink %q has no Build", s.Name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.sinks[s.Name]; dup {
		return fmt.Errorf("registry: sink %q registered twice", s.Name)
	}
	r.sinks[s.Name] = s
	return nil
}

func checkSchema(name string, opts []Option) error {
	if name == "" {
		return errors.New("registry: connector without a name")
	}
	seen := map[string]bool{}
	for _, o := range opts {
		if o.Name == "" || seen[o.Name] {
			return fmt.Errorf("registry: connector %q: option name %q empty or repeated", name, o.Name)
		}
		seen[o.Name] = true
		if strings.Contains(o.Name, "*") {
			if o.FamilyPrefix() == "" || o.Type != String || o.Default != nil || o.Required {
				return fmt.Errorf("registry: connector %q: family option %q: want a name ending in \".*\", type string, no default, not required", name, o.Name)
			}
			continue
		}
		switch o.Type {
		case String, Int, Float, Bool, Duration, Strings:
		case Enum:
			if len(o.Values) == 0 {
				return fmt.Errorf("registry: connector %q: enum option %q has no values", name, o.Name)
			}
		default:
			return fmt.Errorf("registry: connector %q: option %q has unknown type %q", name, o.Name, o.Type)
		}
		if o.Default != nil {
			if err := checkDefault(o); err != nil {
				return fmt.Errorf("registry: connector %q: option %q: %w", name, o.Name, err)
			}
		}
	}
	return nil
}

func checkDefault(o Option) error {
	ok := false
	switch o.Type {
	case String:
		_, ok = o.Default.(string)
	case Enum:
		var s string
		s, ok = o.Default.(string)
		ok = ok && slices.Contains(o.Values, s)
	case Int:
		_, ok = o.Default.(int64)
	case Float:
		_, ok = o.Default.(float64)
	case Bool:
		_, ok = o.Default.(bool)
	case Duration:
		_, ok = o.Default.(time.Duration)
	case Strings:
		_, ok = o.Default.([]string)
	}
	if !ok {
		return fmt.Errorf("default %v (%T) does not fit type %s", o.Default, o.Default, o.Type)
	}
	return nil
}

// Source returns the source named name.
func (r *Registry) Source(name string) (Source, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, ok := r.sources[name]
	return s, ok
}

// Sink returns the sink named name.
func (r *Registry) Sink(name string) (Sink, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, ok := r.sinks[name]
	return s, ok
}

// Lookup returns the connector of this kind and name.
func (r *Registry) Lookup(kind Kind, name string) (Connector, bool) {
	if kind == KindSource {
		s, ok := r.Source(name)
		return Connector{Name: s.Name, Description: s.Description, Kind: kind, Options: s.Options, Validate: s.Validate}, ok
	}
	s, ok := r.Sink(name)
	return Connector{Name: s.Name, Description: s.Description, Kind: kind, Options: s.Options, ExactlyOnce: s.ExactlyOnce, Validate: s.Validate}, ok
}

// Names returns the sorted names of the connectors of this kind.
func (r *Registry) Names(kind Kind) []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var names []string
	if kind == KindSource {
		names = slices.Collect(maps.Keys(r.sources))
	} else {
		names = slices.Collect(maps.Keys(r.sinks))
	}
	sort.Strings(names)
	return names
}

// Connectors returns every connector, sources first, each sorted by name.
func (r *Registry) Connectors() []Connector {
	var out []Connector
	for _, k := range []Kind{KindSource, KindSink} {
		for _, n := range r.Names(k) {
			c, _ := r.Lookup(k, n)
			out = append(out, c)
		}
	}
	return out
}

// FormatDefault renders an option's default for humans ("" for none).
func FormatDefault(o Option) string {
	switch d := o.Default.(type) {
	case nil:
		return ""
	case []string:
		return "[" + strings.Join(d, ", ") + "]"
	case string:
		return fmt.Sprintf("%q", d)
	default:
		return fmt.Sprint(d)
	}
}

// Parse converts one scalar to the option's type. Its error says what is
// wanted and does not repeat s (which may hold a secret). Strings options
// take each list element through Parse as a String.
func (o Option) Parse(s string) (any, error) {
	switch o.Type {
	case String, Strings:
		return s, nil
	case Enum:
		if !slices.Contains(o.Values, s) {
			return nil, fmt.Errorf("want one of %s", strings.Join(o.Values, ", "))
		}
		return s, nil
	case Int:
		v, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 0, 64)
		if err != nil {
			return nil, errors.New("want an integer")
		}
		return v, nil
	case Float:
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, errors.New("want a finite number")
		}
		return v, nil
	case Bool:
		switch strings.ToLower(s) {
		case "true", "yes", "on":
			return true, nil
		case "false", "no", "off":
			return false, nil
		}
		return nil, errors.New("want true or false")
	case Duration:
		v, err := time.ParseDuration(s)
		if err != nil {
			return nil, errors.New("want a duration such as 500ms, 10s or 1m30s")
		}
		return v, nil
	}
	return nil, fmt.Errorf("unknown type %s", o.Type)
}
