// Package pipeline loads a CLI pipeline file: a YAML document naming a
// source, optional transforms and a sink, with job settings. It validates
// the file against the connector registry and reports every problem as a
// one-line error "file:line: field: what is wrong". ${VAR} and
// ${VAR:-default} in values are taken from the environment; values that
// came from the environment are never repeated in errors.
//
// The format (docs/cli.md has the full reference):
//
//	name: orders                 # job name (default: the file name)
//	parallelism: 2               # default 1
//	delivery: exactly-once       # or at-least-once (default: the sink's best)
//	checkpoint:
//	  interval: 1s               # default 5s; 0 = only the final checkpoint
//	  dir: ./checkpoints         # default: in memory (no resume)
//	  retain: 3
//	restart:
//	  strategy: fixed-delay      # none | fixed-delay | exponential
//	  attempts: 3
//	  delay: 1s
//	source:
//	  type: datagen
//	  uid: orders-in             # stable id keying its state (default: the name)
//	  options: {count: 1000}
//	transforms:
//	  - filter: amount > 100
//	  - map: '{"id": id, "cents": amount * 100}'
//	  - select: [id, cents]
//	  - rename: {cents: amount_cents}
//	  - key_by: id               # hash-partition by an expression: equal keys → one subtask of what follows
//	  - rebalance: true          # or spread round-robin; the steps after either and the sink start a new chain
//	sink:
//	  type: file
//	  options: {path: ./out}
//	on-error: fail               # transforms: fail | skip | dead-letter (each may set its own on-error)
//	dead-letter:                 # the sink of dead letters (any sink), exactly once with the main output
//	  type: file
//	  options: {path: ./dead}
//	http:
//	  listen: 127.0.0.1:9249     # metrics and status; loopback by default
//	  token: ${SLUICE_TOKEN}     # optional bearer token (needed for POST /savepoints)
//	  savepoint-retain: 5        # savepoints taken through POST /savepoints that are kept
//	  ready-checkpoint-age: 0s   # /readyz bound; 0 = 3 × checkpoint.interval + checkpoint.timeout
package pipeline

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/sluice-io/sluice/internal/registry"
	"github.com/sluice-io/sluice/internal/transform"
)

// Error is one problem in a pipeline file.
type Error struct {
	File  string
	Line  int
	Field string // dotted path, e.g. "source.options.count"
	Msg   string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Field, e.Msg)
}

// ErrInvalid is wrapped by every error of Load and Parse about the file's
// content.
var ErrInvalid = errors.New("invalid pipeline")

// Errors are all problems found in one file, in file order. Its message
// has one line per problem.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Is makes errors.Is(err, ErrInvalid) true.
func (es Errors) Is(target error) bool { return target == ErrInvalid }

// Connector is the source or sink of a pipeline.
type Connector struct {
	Type    string
	Name    string // operator name (default: the type, "-sink" added for sinks named like the source)
	UID     string // stable operator id keying checkpoint state ("" = the name)
	Options registry.Options
	Line    int
}

// Restart is the restart strategy.
type Restart struct {
	Strategy string // none, fixed-delay, exponential
	Attempts int
	Delay    time.Duration
	MaxDelay time.Duration
}

// Spec is a validated pipeline.
type Spec struct {
	File        string
	Name        string
	Parallelism int
	Delivery    registry.Delivery
	// SourceTask is where the source runs (SourceTaskAuto, SourceTaskOwn
	// or SourceTaskChained; see OwnSourceTask).
	SourceTask string

	CheckpointInterval time.Duration
	CheckpointDir      string // "" = in memory
	CheckpointRetain   int
	CheckpointTimeout  time.Duration
	// CheckpointOptions are the checkpoint section's settings, with the
	// s3.* ones of a checkpoint dir on s3:// (internal/cli/s3store.go).
	CheckpointOptions registry.Options

	Restart    Restart
	Source     Connector
	Transforms []*transform.Compiled
	Sink       Connector
	// SinkStep is the sink's per-record work that can fail on a record
	// (registry.Sink.Step: the Kafka sink's expressions), run after the
	// transforms under the pipeline's on-error policy; nil = none.
	SinkStep *transform.Compiled

	// OnError is the default policy of the transforms (on-error; each
	// transform may set its own). DeadLetter is the sink of dead letters
	// (nil: none); SourceDeadLetters says the source sends some.
	OnError           registry.Policy
	DeadLetter        *Connector
	SourceDeadLetters bool

	HTTPListen string // "" = no endpoint unless the command line asks
	HTTPToken  string // secret: never print it
	// HTTPSavepointRetain is how many savepoints taken through POST
	// /savepoints are kept; HTTPReadyCheckpointAge bounds /readyz (0 =
	// derived from the checkpoint settings).
	HTTPSavepointRetain    int
	HTTPReadyCheckpointAge time.Duration

	// Warnings are problems that do not stop the pipeline (see
	// registry.Sink.CheckSource), one line each.
	Warnings []string

	// Secrets are the values taken from the environment (${VAR}), which
	// must never be shown: NewRedactor(s.Secrets) hides them in any text.
	Secrets []Substitution
}

// The values of the source-task setting.
const (
	// SourceTaskAuto is SourceTaskOwn when a transform reads the
	// records' values, else SourceTaskChained.
	SourceTaskAuto = "auto"
	// SourceTaskOwn runs the source in a task of its own (a goroutine
	// per subtask) that hands batches of records through a bounded
	// channel, checkpoint barriers and watermarks in line, to the task of
	// the transforms and the sink (stream.StartNewChain on the first
	// transform): the source's fetching and checking of records overlaps
	// the transforms' and the sink's work, on two cores per subtask.
	SourceTaskOwn = "own"
	// SourceTaskChained (the default) runs source, transforms and sink
	// in one task. It is the default by measurement: on a 2-core machine
	// shared with the Kafka broker, the source apart did not raise the
	// rate at p=1 and cost up to 9 % more CPU per record
	// (bench/kafka/README.md, "Source task").
	SourceTaskChained = "chained"
)

// OwnSourceTask reports whether the source runs in a task of its own
// (SourceTaskOwn, or SourceTaskAuto with a transform that reads the
// records' values). It is false without transforms: the source then
// shares its task with the sink.
func (s *Spec) OwnSourceTask() bool {
	steps := s.Steps()
	if len(steps) == 0 {
		return false
	}
	switch s.SourceTask {
	case SourceTaskOwn:
		return true
	case SourceTaskChained:
		return false
	}
	return transform.ReadsValue(steps)
}

// MaxParallelism bounds a pipeline's parallelism: every subtask is a
// goroutine with its own buffers and state.
const MaxParallelism = 1024

// Steps are the transforms and then the SinkStep, if any: what runs
// between the source and the sink.
func (s *Spec) Steps() []*transform.Compiled {
	if s.SinkStep == nil {
		return s.Transforms
	}
	return append(slices.Clip(s.Transforms), s.SinkStep)
}

// Load reads and parses a pipeline file. Relative paths in it (checkpoint
// dir) are taken relative to the working directory, like any CLI argument.
func Load(path string, reg *registry.Registry, lookup Lookup) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read pipeline: %w", err)
	}
	return Parse(path, data, reg, lookup)
}

var (
	yamlLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
	// flowVar finds ${ unquoted right after [, { or a comma, where YAML
	// reads "{" as the start of a mapping.
	flowVar = regexp.MustCompile(`[\[{,]\s*\$\{`)
)

// yamlError turns a YAML syntax error into one Error. An unquoted ${VAR}
// in a flow sequence or mapping ([${BROKERS}]) is the likely cause when
// the file has one: the error is put at its line and says to quote it.
func yamlError(file string, data []byte, err error) Errors {
	msg := oneLine(err.Error())
	line := 1
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
	}
	msg = "invalid YAML: " + strings.TrimPrefix(msg, "yaml: ")
	for i, l := range strings.Split(string(data), "\n") {
		code, _, _ := strings.Cut(l, " #")
		if flowVar.MatchString(code) {
			return Errors{{File: file, Line: i + 1, Msg: msg + `; an unquoted ${VAR} inside [...] or {...} reads as a YAML mapping: quote it, as in ["${BROKERS}"]`}}
		}
	}
	return Errors{{File: file, Line: line, Msg: msg}}
}

// Parse parses a pipeline. file names it in errors.
func Parse(file string, data []byte, reg *registry.Registry, lookup Lookup) (*Spec, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, yamlError(file, data, err)
	}
	p := &parser{file: file, reg: reg, lookup: lookup, nodes: map[string]*yaml.Node{}}
	if lookup == nil {
		p.lookup = os.LookupEnv
	}
	spec := p.parse(&doc)
	// Values from the environment are not repeated in errors; the
	// redactor catches those that reach a message another way (a
	// connector's Validate, a path in a cross-connector check).
	red := NewRedactor(p.subs)
	if len(p.errs) > 0 {
		slices.SortStableFunc(p.errs, func(a, b *Error) int { return a.Line - b.Line })
		for _, e := range p.errs {
			e.Msg = red.String(e.Msg)
		}
		return nil, p.errs
	}
	for i, w := range spec.Warnings {
		spec.Warnings[i] = red.String(w)
	}
	spec.Secrets = p.subs
	return spec, nil
}

func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

type parser struct {
	file   string
	reg    *registry.Registry
	lookup Lookup
	errs   Errors
	subs   []Substitution        // every value taken from the environment
	tnodes []*yaml.Node          // the value node of each compiled transform
	nodes  map[string]*yaml.Node // value node of each option, by field
	// policyLines are the lines of the transforms' on-error keys.
	policyLines map[string]int
}

// at returns the value node of a field set in the file, or def.
func (p *parser) at(field string, def *yaml.Node) *yaml.Node {
	if n, ok := p.nodes[field]; ok {
		return n
	}
	return def
}

func (p *parser) errorf(n *yaml.Node, field, format string, args ...any) {
	line := 1
	if n != nil && n.Line > 0 {
		line = n.Line
	}
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Field: printable(field), Msg: printable(fmt.Sprintf(format, args...))})
}

// printable keeps an error on one line: a key or value with control
// characters (a quoted "a\nb") is shown escaped.
func printable(s string) string {
	if !strings.ContainsFunc(s, unicode.IsControl) {
		return s
	}
	q := strconv.Quote(s)
	return q[1 : len(q)-1]
}

// mapping returns the key/value pairs of a mapping node, checking keys
// against allowed (nil = any) and reporting duplicates.
func (p *parser) mapping(n *yaml.Node, field string, allowed []string) (keys []*yaml.Node, vals map[string]*yaml.Node, ok bool) {
	if n.Kind != yaml.MappingNode {
		p.errorf(n, field, "want a mapping (key: value lines), got %s", kindName(n))
		return nil, nil, false
	}
	vals = map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		name := join(field, k.Value)
		if k.Kind != yaml.ScalarNode {
			p.errorf(k, field, "keys must be plain names")
			continue
		}
		if _, dup := vals[k.Value]; dup {
			p.errorf(k, name, "set twice")
			continue
		}
		if allowed != nil && !slices.Contains(allowed, k.Value) {
			p.errorf(k, name, "unknown field (allowed: %s)", strings.Join(allowed, ", "))
			continue
		}
		keys = append(keys, k)
		vals[k.Value] = v
	}
	return keys, vals, true
}

func join(field, key string) string {
	if field == "" {
		return key
	}
	return field + "." + key
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return "a single value"
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.AliasNode:
		return "an alias"
	}
	return "an empty document"
}

// scalar returns a scalar node's value after ${VAR} interpolation.
func (p *parser) scalar(n *yaml.Node, field string) (val string, fromEnv bool, ok bool) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		p.errorf(n, field, "want a single value, got %s", kindName(n))
		return "", false, false
	}
	v, subs, err := interpolateVars(n.Value, p.lookup)
	if err != nil {
		p.errorf(n, field, "%v", err)
		return "", false, false
	}
	p.subs = append(p.subs, subs...)
	return v, subs != nil, true
}

// usesEnv reports whether a value node (or an element of a list) takes
// anything from the environment.
func (p *parser) usesEnv(n *yaml.Node) bool {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind == yaml.SequenceNode {
		return slices.ContainsFunc(n.Content, p.usesEnv)
	}
	_, sub, err := interpolate(n.Value, p.lookup)
	return sub || err != nil
}

// value converts a node to an option's type.
func (p *parser) value(n *yaml.Node, field string, o registry.Option) (any, bool) {
	before := len(p.subs)
	if o.Secret {
		defer func() {
			for i := before; i < len(p.subs); i++ {
				p.subs[i].Secret = true
			}
			if len(p.subs) == before && n.Kind == yaml.ScalarNode && n.Value != "" {
				// Written in the file itself: hidden all the same.
				p.subs = append(p.subs, Substitution{Value: n.Value, Secret: true})
			}
		}()
	}
	if o.Type == registry.Strings && n.Kind == yaml.SequenceNode {
		out := make([]string, 0, len(n.Content))
		for i, e := range n.Content {
			s, _, ok := p.scalar(e, fmt.Sprintf("%s[%d]", field, i))
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, p.check(n, field, o, out, p.usesEnv(n))
	}
	s, fromEnv, ok := p.scalar(n, field)
	if !ok {
		return nil, false
	}
	v, err := o.Parse(s)
	if err != nil {
		if fromEnv || o.Secret {
			p.errorf(n, field, "%v (value from the environment not shown)", err)
		} else {
			p.errorf(n, field, "%v, got %q", err, s)
		}
		return nil, false
	}
	if o.Required && s == "" {
		p.errorf(n, field, "must not be empty (%s)", o.Description)
		return nil, false
	}
	if o.Type == registry.Strings {
		// One string is a comma-separated list: brokers: "h1:9092,h2:9092".
		list, err := registry.SplitList(v.(string))
		if err != nil {
			p.errorf(n, field, "%v", err)
			return nil, false
		}
		v = list
	}
	if !p.check(n, field, o, v, fromEnv) {
		return nil, false
	}
	if fromEnv && !o.Secret && notText(o.Type) {
		// A number, duration, true/false or enum value is no secret: it
		// is logged as it is. Hidden, every "100ms" or "1000" of the
		// logs (and of checkpoint state) would be taken for it and shown
		// as ${RESTART_DELAY}.
		p.subs = p.subs[:before]
	}
	return v, true
}

// notText reports whether values of type t are numbers, durations,
// booleans or enum values, which cannot hold a secret.
func notText(t registry.Type) bool {
	switch t {
	case registry.Int, registry.Float, registry.Bool, registry.Duration, registry.Enum:
		return true
	}
	return false
}

// check runs an option's Check on its parsed value.
func (p *parser) check(n *yaml.Node, field string, o registry.Option, v any, fromEnv bool) bool {
	if o.Check == nil {
		return true
	}
	if err := o.Check(v); err != nil {
		if fromEnv || o.Secret {
			p.errorf(n, field, "%v (value from the environment not shown)", err)
		} else {
			p.errorf(n, field, "%v, got %s", err, oneLine(n.Value))
		}
		return false
	}
	return true
}

// options decodes a mapping against a schema, filling in defaults
// (which Options.IsSet tells from the file's settings).
func (p *parser) options(n, at *yaml.Node, field string, schema []registry.Option, what string) (registry.Options, bool) {
	m := map[string]any{}
	if n != nil {
		at = n
	}
	ok := true
	var vals map[string]*yaml.Node
	if n != nil {
		names := make([]string, len(schema))
		for i, o := range schema {
			names[i] = o.Name
		}
		var keys []*yaml.Node
		before := len(p.errs)
		keys, vals, ok = p.mapping(n, field, nil)
		for _, k := range keys {
			// A family's own name ("properties.*") is no key.
			declared := slices.ContainsFunc(schema, func(o registry.Option) bool { return o.Name == k.Value && o.FamilyPrefix() == "" })
			if _, fam := registry.Family(schema, k.Value); !declared && !fam {
				allowed := "none"
				if len(names) > 0 {
					allowed = strings.Join(names, ", ")
				}
				p.errorf(k, join(field, k.Value), "unknown field for %s (allowed: %s)", what, allowed)
				delete(vals, k.Value)
			}
		}
		ok = ok && len(p.errs) == before
	}
	var fromEnv []string
	fam, famOK := p.familyOptions(n, field, schema, vals)
	ok = ok && famOK
	for _, k := range slices.Sorted(maps.Keys(fam)) {
		if p.usesEnv(vals[k]) {
			fromEnv = append(fromEnv, k)
		}
	}
	for _, o := range schema {
		if o.FamilyPrefix() != "" {
			continue
		}
		if v, set := vals[o.Name]; set {
			p.nodes[join(field, o.Name)] = v
			val, good := p.value(v, join(field, o.Name), o)
			ok = ok && good
			if good {
				m[o.Name] = val
				if p.usesEnv(v) {
					fromEnv = append(fromEnv, o.Name)
				}
			}
			continue
		}
		if o.Required {
			p.errorf(at, join(field, o.Name), "missing required field (%s)", o.Description)
			ok = false
		}
	}
	// m holds what the file sets; the defaults are filled in apart, so
	// that Options.IsSet tells the two.
	return registry.NewOptions(m).WithDefaults(schema).WithPrefixed(fam).MarkFromEnvironment(fromEnv...), ok
}

// familyOptions parses the keys of mapping n that belong to a family
// option of schema ("properties.*"), in file order: each value is a
// string checked by the family's CheckKey. An error about the key
// (registry.ErrKeyNotSupported) is reported at the key without the value,
// one about the value like any option's.
func (p *parser) familyOptions(n *yaml.Node, field string, schema []registry.Option, vals map[string]*yaml.Node) (map[string]string, bool) {
	out := map[string]string{}
	ok := true
	for i := 0; n != nil && n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		fam, isFam := registry.Family(schema, k.Value)
		v, kept := vals[k.Value]
		if !isFam || !kept || v != n.Content[i+1] {
			continue
		}
		key, name := k.Value, join(field, k.Value)
		p.nodes[name] = v
		o := registry.Option{Name: key, Type: registry.String, Secret: fam.Secret, Description: fam.Description}
		var keyErr error
		if fam.CheckKey != nil {
			o.Check = func(val any) error {
				err := fam.CheckKey(key, val.(string))
				if errors.Is(err, registry.ErrKeyNotSupported) {
					keyErr = err
					return nil
				}
				return err
			}
		}
		val, good := p.value(v, name, o)
		if keyErr != nil {
			p.errorf(k, name, "%v", keyErr)
			good = false
		}
		if !good {
			ok = false
			continue
		}
		out[key] = val.(string)
	}
	return out, ok
}

var (
	checkpointSchema = []registry.Option{
		{Name: "interval", Type: registry.Duration, Default: 5 * time.Second, Check: registry.AtLeast(0), Description: "time between checkpoints; 0 = only the final one of a bounded job"},
		{Name: "dir", Type: registry.String, Default: "", Description: "checkpoint directory; empty = in memory (cannot resume)"},
		{Name: "retain", Type: registry.Int, Default: int64(3), Check: registry.Between(1, 10000), Description: "completed checkpoints kept in dir"},
		{Name: "timeout", Type: registry.Duration, Default: 10 * time.Minute, Check: registry.Positive, Description: "a checkpoint taking longer fails"},
		// Checkpoints on s3:// (internal/cli/s3store.go reads them).
		{Name: "s3.endpoint", Type: registry.String, Description: "dir on s3://: URL of an S3-compatible server; default: $AWS_ENDPOINT_URL_S3, else $AWS_ENDPOINT_URL, else AWS S3"},
		{Name: "s3.region", Type: registry.String, Description: "dir on s3://: the region requests are signed for; default: $AWS_REGION, else $AWS_DEFAULT_REGION, else us-east-1"},
		{Name: "s3.path-style", Type: registry.Bool, Description: "dir on s3://: path-style addressing (http://host/bucket/key), the default; false: virtual-hosted style"},
		{Name: "s3.access-key", Type: registry.String, Secret: true, Description: "dir on s3://: the access key id (use ${VAR}); default: $AWS_ACCESS_KEY_ID"},
		{Name: "s3.secret-key", Type: registry.String, Secret: true, Description: "dir on s3://: the secret access key (use ${VAR}); default: $AWS_SECRET_ACCESS_KEY"},
		{Name: "s3.session-token", Type: registry.String, Secret: true, Description: "dir on s3://: the session token of temporary credentials (use ${VAR}); default: none with s3.access-key, else $AWS_SESSION_TOKEN"},
		{Name: "s3.lock", Type: registry.Bool, Description: "dir on s3://: hold the prefix's lock object (_lock) so that a second run on it is refused (default true); false only for servers without conditional writes"},
		{Name: "s3.lock-ttl", Type: registry.Duration, Check: func(v any) error {
			if d, _ := v.(time.Duration); d < time.Second {
				return fmt.Errorf("must be at least 1s")
			}
			return nil
		}, Description: "dir on s3://: a lock whose heartbeat is silent this long is taken over by the next run (default 30s; the holder renews it every ttl/4)"},
	}
	restartSchema = []registry.Option{
		{Name: "strategy", Type: registry.Enum, Values: []string{"none", "fixed-delay", "exponential"}, Default: "fixed-delay", Description: "what to do when the job fails"},
		{Name: "attempts", Type: registry.Int, Default: int64(3), Check: registry.AtLeast(1), Description: "restarts before the job fails for good (at least 1; strategy none for no restarts)"},
		{Name: "delay", Type: registry.Duration, Default: time.Second, Check: registry.Positive, Description: "delay before a restart (the first one, for exponential)"},
		{Name: "max-delay", Type: registry.Duration, Default: time.Minute, Check: registry.Positive, Description: "longest delay (exponential; at least delay)"},
	}
	httpSchema = []registry.Option{
		{Name: "listen", Type: registry.String, Default: "", Description: "address of the metrics and status endpoint; a bare :port listens on 127.0.0.1"},
		{Name: "token", Type: registry.String, Default: "", Secret: true, Description: "bearer token required by the endpoint; use ${VAR}"},
		{Name: "savepoint-retain", Type: registry.Int, Default: int64(5), Description: "savepoints taken through POST /savepoints that are kept; older ones are deleted"},
		{Name: "ready-checkpoint-age", Type: registry.Duration, Default: time.Duration(0), Description: "/readyz fails when no checkpoint completed for this long; 0 = 3 × checkpoint.interval + checkpoint.timeout"},
	}
	jobSchema = []registry.Option{
		{Name: "name", Type: registry.String, Description: "job name (default: the file name without extension)"},
		{Name: "parallelism", Type: registry.Int, Default: int64(1), Check: registry.Between(1, MaxParallelism), Description: "parallelism of every operator (1 to 1024)"},
		{Name: "delivery", Type: registry.Enum, Values: []string{string(registry.ExactlyOnce), string(registry.AtLeastOnce)}, Description: "delivery guarantee (default: exactly-once if the sink supports it)"},
		{Name: "source-task", Type: registry.Enum, Values: []string{SourceTaskAuto, SourceTaskOwn, SourceTaskChained}, Default: SourceTaskChained,
			Description: "own: the source runs on a goroutine of its own per subtask and hands batches of records (barriers in line, in order) to the transforms and the sink on another, so one subtask can use two cores; chained (default): source, transforms and sink share one goroutine; auto: own when a transform reads the records' values, else chained"},
	}
	topLevel = []string{"name", "parallelism", "delivery", "source-task", "checkpoint", "restart", "source", "transforms", "sink", "dead-letter", "on-error", "http"}
)

// keyNode returns the key node named key of mapping m, or m.
func keyNode(m *yaml.Node, key string) *yaml.Node {
	for i := 0; m != nil && m.Kind == yaml.MappingNode && i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i]
		}
	}
	return m
}

// JobSchema returns the documented settings of the sections of a pipeline
// file, for `sluice connectors` and docs.
func JobSchema() map[string][]registry.Option {
	return map[string][]registry.Option{"": jobSchema, "checkpoint": checkpointSchema, "restart": restartSchema, "http": httpSchema}
}

func (p *parser) parse(doc *yaml.Node) *Spec {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		p.errorf(doc, "", "empty pipeline: want source and sink")
		return nil
	}
	root := doc.Content[0]
	_, vals, ok := p.mapping(root, "", topLevel)
	if !ok {
		return nil
	}
	s := &Spec{File: p.file}

	job := &yaml.Node{Kind: yaml.MappingNode, Line: root.Line}
	for _, k := range []string{"name", "parallelism", "delivery", "source-task"} {
		if v, ok := vals[k]; ok {
			job.Content = append(job.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k, Line: v.Line}, v)
		}
	}
	jo, _ := p.options(job, root, "", jobSchema, "the job")
	s.Name = jo.String("name")
	if s.Name == "" {
		s.Name = strings.TrimSuffix(filepath.Base(p.file), filepath.Ext(p.file))
	}
	s.Parallelism = int(jo.Int("parallelism"))
	s.SourceTask = jo.String("source-task")

	co, _ := p.options(vals["checkpoint"], root, "checkpoint", checkpointSchema, "checkpoint")
	s.CheckpointInterval, s.CheckpointDir = co.Duration("interval"), co.String("dir")
	s.CheckpointRetain, s.CheckpointTimeout = int(co.Int("retain")), co.Duration("timeout")
	s.CheckpointOptions = co

	ro, rok := p.options(vals["restart"], root, "restart", restartSchema, "restart")
	s.Restart = Restart{Strategy: ro.String("strategy"), Attempts: int(ro.Int("attempts")), Delay: ro.Duration("delay"), MaxDelay: ro.Duration("max-delay")}
	if rok && s.Restart.Strategy == "exponential" && s.Restart.MaxDelay < s.Restart.Delay {
		p.errorf(p.at("restart.max-delay", p.at("restart.delay", vals["restart"])), "restart.max-delay", "must be at least delay (%s), got %s", s.Restart.Delay, s.Restart.MaxDelay)
	}

	ho, _ := p.options(vals["http"], root, "http", httpSchema, "http")
	s.HTTPListen, s.HTTPToken = ho.String("listen"), ho.String("token")
	s.HTTPSavepointRetain, s.HTTPReadyCheckpointAge = int(ho.Int("savepoint-retain")), ho.Duration("ready-checkpoint-age")
	if s.HTTPSavepointRetain < 1 {
		p.errorf(keyNode(vals["http"], "savepoint-retain"), "http.savepoint-retain", "must be at least 1")
	}
	if s.HTTPReadyCheckpointAge < 0 {
		p.errorf(keyNode(vals["http"], "ready-checkpoint-age"), "http.ready-checkpoint-age", "must not be negative")
	}

	var sinkEO bool
	idle := -1 // the index in s.Warnings of the idle source subtasks' warning
	if n, ok := vals["source"]; ok {
		s.Source = p.connector(n, "source", registry.KindSource)
		if src, ok := p.reg.Source(s.Source.Type); ok && src.MaxParallelism != nil && len(p.errs) == 0 {
			if m := src.MaxParallelism(s.Source.Options); m > 0 && s.Parallelism > m {
				idle = len(s.Warnings)
				s.Warnings = append(s.Warnings, fmt.Sprintf("%s:%d: parallelism: %d, but source %s can keep only %d subtasks busy with these options; the others stay idle",
					p.file, p.at("parallelism", root).Line, s.Parallelism, s.Source.Type, m))
			}
		}
	} else {
		p.errorf(root, "source", "missing required field (the connector records come from)")
	}
	if n, ok := vals["sink"]; ok {
		s.Sink = p.connector(n, "sink", registry.KindSink)
		if c, ok := p.reg.Lookup(registry.KindSink, s.Sink.Type); ok {
			sinkEO = c.ExactlyOnce
		}
	} else {
		p.errorf(root, "sink", "missing required field (the connector records go to)")
	}
	if s.Sink.Name == s.Source.Name && s.Sink.Name != "" {
		s.Sink.Name += "-sink"
	}
	if s.Source.UID != "" && s.Source.UID == s.Sink.UID {
		p.errorf(vals["sink"], "sink.uid", "the source has the same uid %q; uids must be unique (they key checkpoint state)", s.Sink.UID)
	}
	if sk, ok := p.reg.Sink(s.Sink.Type); ok && sk.CheckSource != nil && s.Source.Type != "" && len(p.errs) == 0 {
		warning, err := sk.CheckSource(s.Source.Type, s.Source.Options, s.Sink.Options)
		if err != nil {
			p.errorf(&yaml.Node{Line: s.Sink.Line}, "sink", "%v", err)
		}
		if warning != "" {
			s.Warnings = append(s.Warnings, fmt.Sprintf("%s:%d: sink: %s", p.file, s.Sink.Line, warning))
		}
	}

	if sk, ok := p.reg.Sink(s.Sink.Type); ok && sk.Step != nil && len(p.errs) == 0 {
		fn, reads, err := sk.Step(s.Sink.Name, s.Sink.Options)
		oe, isOpt := errors.AsType[*registry.OptionError](err)
		switch {
		case isOpt && p.nodes["sink.options."+oe.Option] != nil: // at the option's line
			p.errorf(p.nodes["sink.options."+oe.Option], "sink.options."+oe.Option, "%v", oe.Err)
		case err != nil:
			p.errorf(&yaml.Node{Line: s.Sink.Line}, "sink", "%v", err)
		case fn != nil:
			s.SinkStep = transform.FuncStep(transform.Step{Name: s.Sink.Name + "-step", Where: fmt.Sprintf("%s:%d", p.file, s.Sink.Line)}, fn, reads)
		}
	}

	d := registry.Delivery(jo.String("delivery"))
	sk, _ := p.reg.Sink(s.Sink.Type)
	if sk.Delivery != nil && len(p.errs) == 0 {
		if sd, opt := sk.Delivery(s.Sink.Options); sd != "" {
			switch {
			case d == "":
				d = sd
			case d != sd:
				p.errorf(p.nodes["sink.options."+opt], "sink.options."+opt, "%s contradicts the pipeline's delivery: %s (set one of them, or both alike)", sd, d)
			}
		}
	}
	switch {
	case d == "" && sinkEO, d == registry.ExactlyOnce && sinkEO:
		s.Delivery = registry.ExactlyOnce
	case d == "", d == registry.AtLeastOnce:
		s.Delivery = registry.AtLeastOnce
	default:
		p.errorf(vals["delivery"], "delivery", "sink %q cannot deliver exactly once (use at-least-once, or an exactly-once sink)", s.Sink.Type)
	}

	if sk.CheckDelivery != nil && len(p.errs) == 0 {
		if err := sk.CheckDelivery(s.Delivery, s.Sink.Options); err != nil {
			var oe *registry.OptionError
			if errors.As(err, &oe) && p.nodes["sink.options."+oe.Option] != nil {
				p.errorf(p.nodes["sink.options."+oe.Option], "sink.options."+oe.Option, "%v", oe.Err)
			} else {
				p.errorf(&yaml.Node{Line: s.Sink.Line}, "sink", "%v", err)
			}
		}
	}

	if n, ok := vals["transforms"]; ok {
		before := len(p.errs)
		s.Transforms = p.transforms(n, map[string]bool{s.Source.Name: true, s.Sink.Name: true})
		for _, c := range s.Transforms {
			if c.IsPartition() && s.Parallelism == 1 {
				s.Warnings = append(s.Warnings, fmt.Sprintf("%s: %s with parallelism 1: every record goes to the one subtask (raise parallelism to spread them)",
					c.Where, c.Kind))
			}
			if c.IsPartition() && idle >= 0 {
				// Idle source subtasks are expected: the partition step
				// spreads the records over every subtask after it.
				s.Warnings = slices.Delete(s.Warnings, idle, idle+1)
				idle = -1
			}
		}
		if src, ok := p.reg.Source(s.Source.Type); ok && src.Fields != nil && len(p.errs) == before {
			p.checkFields(s.Transforms, src.Fields, s.Source.Type)
		}
	}
	p.errorPolicies(s, root, vals)
	return s
}

func (p *parser) connector(n *yaml.Node, field string, kind registry.Kind) Connector {
	_, vals, ok := p.mapping(n, field, []string{"type", "name", "uid", "options"})
	if !ok {
		return Connector{}
	}
	c := Connector{Line: n.Line}
	tn, ok := vals["type"]
	if !ok {
		p.errorf(n, field+".type", "missing required field (one of: %s)", strings.Join(p.reg.Names(kind), ", "))
		return c
	}
	c.Type, _, ok = p.scalar(tn, field+".type")
	if !ok {
		return c
	}
	reg, found := p.reg.Lookup(kind, c.Type)
	if !found {
		p.errorf(tn, field+".type", "unknown %s connector %q (known: %s)", kind, c.Type, strings.Join(p.reg.Names(kind), ", "))
		return c
	}
	c.Name = c.Type
	if nn, ok := vals["name"]; ok {
		c.Name, _, _ = p.scalar(nn, field+".name")
	}
	if un, ok := vals["uid"]; ok {
		if c.UID, _, ok = p.scalar(un, field+".uid"); ok && c.UID == "" {
			p.errorf(un, field+".uid", "must not be empty (leave it out to use the name)")
		}
	}
	opts, good := p.options(vals["options"], n, field+".options", reg.Options, string(kind)+" "+c.Type)
	c.Options = opts
	if good && reg.Validate != nil {
		if err := reg.Validate(opts); err != nil {
			at, where := n, field+".options"
			if on, ok := vals["options"]; ok {
				at = on
			}
			// An error about one option is reported at its key.
			if oe, ok := errors.AsType[*registry.OptionError](err); ok {
				at, where, err = keyNode(at, oe.Option), join(where, oe.Option), oe.Err
			}
			p.errorf(at, where, "%v", err)
		}
	}
	return c
}

var transformKinds = []string{string(transform.Filter), string(transform.Map), string(transform.Select), string(transform.Rename),
	string(transform.KeyBy), string(transform.Rebalance)}

func (p *parser) transforms(n *yaml.Node, names map[string]bool) []*transform.Compiled {
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, "transforms", "want a list (lines starting with \"- \"), got %s", kindName(n))
		return nil
	}
	var out []*transform.Compiled
	for i, item := range n.Content {
		field := fmt.Sprintf("transforms[%d]", i)
		keys, vals, ok := p.mapping(item, field, append([]string{"name", "overwrite", "on-error"}, transformKinds...))
		if !ok {
			continue
		}
		var kindKey *yaml.Node
		for _, k := range keys {
			if k.Value == "name" || k.Value == "overwrite" || k.Value == "on-error" {
				continue
			}
			if kindKey != nil {
				p.errorf(k, join(field, k.Value), "one transform per list item (this one already has %s)", kindKey.Value)
				continue
			}
			kindKey = k
		}
		if kindKey == nil {
			p.errorf(item, field, "missing transform: want one of %s", strings.Join(transformKinds, ", "))
			continue
		}
		step := transform.Step{Kind: transform.Kind(kindKey.Value), Name: fmt.Sprintf("%s-%d", kindKey.Value, i+1),
			Where: fmt.Sprintf("%s:%d", p.file, kindKey.Line)}
		if nn, ok := vals["name"]; ok {
			step.Name, _, _ = p.scalar(nn, join(field, "name"))
		}
		if names[step.Name] {
			p.errorf(kindKey, join(field, "name"), "operator name %q is used twice", step.Name)
			continue
		}
		names[step.Name] = true
		if step.Kind == transform.KeyBy || step.Kind == transform.Rebalance {
			// The operators a partition step adds besides its own.
			for _, n := range []string{transform.InName(step.Name), step.Name + "-out"} {
				if names[n] {
					p.errorf(kindKey, join(field, "name"), "operator name %q (of this %s) is used twice", n, step.Kind)
				}
				names[n] = true
			}
		}
		fieldK := join(field, kindKey.Value)
		v := vals[kindKey.Value]
		good := true
		switch step.Kind {
		case transform.Filter, transform.Map, transform.KeyBy:
			step.Expr, _, good = p.scalar(v, fieldK)
		case transform.Rebalance:
			var val any
			if val, good = p.value(v, fieldK, registry.Option{Type: registry.Bool}); good && !val.(bool) {
				p.errorf(v, fieldK, "want true (leave the step out for no rebalance)")
				good = false
			}
		case transform.Select:
			var val any
			val, good = p.value(v, fieldK, registry.Option{Type: registry.Strings})
			if good {
				step.Fields = val.([]string)
			}
		case transform.Rename:
			var rk []*yaml.Node
			var rv map[string]*yaml.Node
			rk, rv, good = p.mapping(v, fieldK, nil)
			for _, k := range rk {
				to, _, ok := p.scalar(rv[k.Value], join(fieldK, k.Value))
				good = good && ok
				step.Renames = append(step.Renames, [2]string{k.Value, to})
			}
		}
		if ov, ok := vals["overwrite"]; ok {
			if step.Kind != transform.Rename {
				p.errorf(ov, join(field, "overwrite"), "only a rename takes overwrite")
				continue
			}
			val, ok := p.value(ov, join(field, "overwrite"), registry.Option{Type: registry.Bool})
			if !ok {
				continue
			}
			step.Overwrite = val.(bool)
		}
		if on, ok := vals["on-error"]; ok {
			if step.Kind == transform.Rebalance {
				p.errorf(on, join(field, "on-error"), "a rebalance never fails on a record, so it takes no on-error")
				continue
			}
			pol, ok := p.policy(on, join(field, "on-error"))
			if !ok {
				continue
			}
			step.OnError = pol
			if p.policyLines == nil {
				p.policyLines = map[string]int{}
			}
			p.policyLines[step.Name] = on.Line
		}
		if !good {
			continue
		}
		c, err := transform.Compile(step)
		if err != nil {
			p.errorf(v, fieldK, "%v", err)
			continue
		}
		out = append(out, c)
		p.tnodes = append(p.tnodes, v)
	}
	return out
}

// checkFields refuses a transform that reads a field the records cannot
// have, when the source declares its fields (registry.Source.Fields) and
// every step before it keeps them known. Sources of JSON from outside
// (files, Kafka) declare none: there a missing field is a run-time
// matter of the record, not of the pipeline.
func (p *parser) checkFields(steps []*transform.Compiled, fields []string, srcType string) {
	from := "source " + srcType
	for i, c := range steps {
		for _, f := range c.Reads() {
			if !slices.Contains(fields, f) {
				p.errorf(p.tnodes[i], fmt.Sprintf("transforms[%d].%s", i, c.Kind), "no field %q in the records from %s (fields: %s)",
					f, from, strings.Join(fields, ", "))
			}
		}
		var known bool
		if fields, known = c.Writes(fields); !known {
			return
		}
		from = "transform " + c.Name
	}
}
