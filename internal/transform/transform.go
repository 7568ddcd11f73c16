// Package transform compiles the transforms of a CLI pipeline — filter and
// map expressions (github.com/expr-lang/expr), JSON field selection and
// renaming, and the key_by and rebalance steps that redistribute records
// over the subtasks after them (partition.go) — and applies them to a
// stream of registry.Records.
//
// Expressions are compiled once, when the pipeline is loaded; the compiled
// programs are shared by all subtasks (an expr program is safe for
// concurrent use; each subtask runs it on a VM of its own from a pool).
// Inside an expression the fields of the record's value are variables
// (`amount > 100`), `record` is the whole value (`record["user id"]`) and
// `meta` the record's metadata (`meta.key`, `meta.headers["h"]`, see
// registry.MetaView). A record whose value no step reads is never decoded
// (ReadsValue); a JSON record whose fields a filter or map names is not
// decoded either: the step reads those fields from its bytes, and a map
// that is an object literal writes its result as bytes (lazy.go,
// DecodesValues); simple arithmetic and comparisons of scalar fields run
// there without expr's VM (fast.go), and a Kafka source finds the fields
// of the first such step while it checks the bytes (LookupKeys).
//
// An expression that fails at run time (a field of the wrong type or
// missing, a map that does not return an object) is handled by the step's
// policy (Step.OnError): fail (the default) fails the job at once, without
// restarts, with an error naming the transform, the record's source
// position (where the source attached one: see NeedsPositions) and an
// excerpt of the record; skip drops the record, counted and logged at a bounded rate;
// dead-letter sends it with the error to the dead-letter sink (see
// AddWithPolicies). A record never silently disappears.
package transform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sluice-io/sluice/internal/registry"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
)

// Record is the record type of CLI pipelines.
type Record = registry.Record

// Object is a record's value when it is an object.
type Object = map[string]any

// ErrInexactNumber is wrapped by the error of arithmetic on a number that
// neither int64 nor float64 holds exactly.
var ErrInexactNumber = registry.ErrInexactNumber

// Kind is a transform's kind.
type Kind string

const (
	Filter Kind = "filter" // keep records for which Expr is true
	Map    Kind = "map"    // replace each record by Expr, which must yield an object
	Select Kind = "select" // keep only Fields
	Rename Kind = "rename" // rename fields: Renames[i] = {from, to}
	// KeyBy hash-partitions the records by the value of Expr: records
	// with equal keys go to the same subtask of the steps after it
	// (partition.go).
	KeyBy Kind = "key_by"
	// Rebalance spreads the records round-robin over the subtasks of the
	// steps after it.
	Rebalance Kind = "rebalance"
	// SinkStep is a sink's per-record work (registry.Sink.Step), run as
	// the last step under the pipeline's on-error policy (FuncStep).
	SinkStep Kind = "sink-step"
)

// Step is one transform as written in a pipeline.
type Step struct {
	Kind    Kind
	Name    string // operator name; it must be unique in the job
	Where   string // where it was defined ("pipeline.yaml:12"), for run-time errors
	Expr    string
	Fields  []string
	Renames [][2]string
	// OnError is what to do with a record the step fails on (default
	// "" = registry.PolicyFail).
	OnError registry.Policy
	// Overwrite lets a Rename replace an existing field that is not
	// itself renamed away (default false: such a record fails the job
	// with an error wrapping ErrRenameOverwrite).
	Overwrite bool
}

// ErrRenameOverwrite is wrapped by the error of a rename whose target
// field exists in the record, is not renamed away by the same step, and
// the step does not allow overwriting.
var ErrRenameOverwrite = errors.New("rename would overwrite an existing field")

// Compiled is a step ready to run. It is immutable and safe for concurrent
// use.
type Compiled struct {
	Step
	expr    *registry.Expr
	from    map[string]bool // a Rename's source fields
	fn      func(Record) (Record, error)
	fnReads bool // fn reads the value
	// lazy runs the step on a JSON record's bytes without decoding it
	// (lazy.go); nil: the step decodes.
	lazy *lazyPlan
}

// FuncStep returns a SinkStep step (s.Kind is set) that applies fn to
// each record; readsValue says whether fn reads the records' values. fn's
// errors are handled by s.OnError like a transform's; they should name
// the record's position themselves.
func FuncStep(s Step, fn func(Record) (Record, error), readsValue bool) *Compiled {
	s.Kind = SinkStep
	return &Compiled{Step: s, fn: fn, fnReads: readsValue}
}

// Compile checks and compiles a step. Its error describes the problem
// without position (the caller knows the line).
func Compile(s Step) (*Compiled, error) {
	c := &Compiled{Step: s}
	switch s.Kind {
	case Filter, Map, KeyBy:
		if s.Expr == "" {
			return nil, errors.New("empty expression")
		}
		e, err := registry.CompileExpr(s.Expr, s.Kind == Filter)
		if err != nil {
			return nil, err
		}
		c.expr = e
		if e.ReadsValue() {
			c.lazy = planLazy(s)
		}
	case Select:
		if len(s.Fields) == 0 {
			return nil, errors.New("select needs at least one field")
		}
	case Rename:
		if len(s.Renames) == 0 {
			return nil, errors.New("rename needs at least one field")
		}
		from, to := map[string]bool{}, map[string]bool{}
		for _, r := range s.Renames {
			if r[0] == "" || r[1] == "" {
				return nil, errors.New("rename: field names must not be empty")
			}
			if from[r[0]] {
				return nil, fmt.Errorf("rename: field %q renamed twice", r[0])
			}
			if to[r[1]] {
				return nil, fmt.Errorf("rename: two fields renamed to %q", r[1])
			}
			from[r[0]], to[r[1]] = true, true
		}
		c.from = from
	case Rebalance:
	default:
		return nil, fmt.Errorf("unknown transform %q (want filter, map, select, rename, key_by or rebalance)", s.Kind)
	}
	return c, nil
}

func oneLine(s string) string {
	for i := range len(s) {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}

// Error is a transform's run-time failure on one record.
type Error struct {
	Step  Step
	Err   error
	Input any // the value of the record the step failed on
	// Pos is where the source read the record, if it said
	// (registry.WithPosition); nil otherwise.
	Pos *registry.Position
	// Line is the line of Pos's file, where known (0 otherwise).
	Line int64
}

func (e *Error) Error() string {
	rec, at := "", ""
	if e.Input != nil {
		rec = "; record: " + preview(e.Input)
	}
	if e.Pos != nil {
		at = " at " + e.Pos.Describe(e.Line)
	}
	return fmt.Sprintf("transform %s %q (%s)%s: %s%s", e.Step.Kind, e.Step.Name, e.Step.Where, at, e.Cause(), rec)
}

// Cause is the first line of Err (expr adds lines that point into the
// expression), with a hint when a missing field is the likely cause.
func (e *Error) Cause() string {
	msg := oneLine(e.Err.Error())
	if strings.Contains(msg, "<nil>") {
		msg += " (a field the record lacks is nil)"
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Is reports the error as restart.ErrUnrecoverable: an expression fails
// the same way on the same record after every restart, so the job fails at
// once instead.
func (e *Error) Is(target error) bool { return target == restart.ErrUnrecoverable }

// ReadsValue reports whether the step reads the records' values (a
// filter or map whose expression reads only meta does not).
func (c *Compiled) ReadsValue() bool {
	switch {
	case c.expr != nil:
		return c.expr.ReadsValue()
	case c.fn != nil:
		return c.fnReads
	case c.Kind == Rebalance:
		return false
	}
	return true
}

// ReadsMeta reports whether the step's expression reads meta.
func (c *Compiled) ReadsMeta() bool { return c.expr != nil && c.expr.ReadsMeta() }

// ReadsValue reports whether any step reads the records' values, so that
// the source must decode them (registry.BuildContext.DecodeValues).
func ReadsValue(steps []*Compiled) bool {
	for _, c := range steps {
		if c.ReadsValue() {
			return true
		}
	}
	return false
}

// ReplacesValue reports whether a step replaces every record's value (a
// map, select or rename): bytes a source keeps would never be written.
func ReplacesValue(steps []*Compiled) bool {
	for _, c := range steps {
		if c.Kind == Map || c.Kind == Select || c.Kind == Rename {
			return true
		}
	}
	return false
}

// ReadsMeta reports whether any step reads meta.
func ReadsMeta(steps []*Compiled) bool {
	for _, c := range steps {
		if c.ReadsMeta() {
			return true
		}
	}
	return false
}

// decode returns r with its value decoded if the step reads it.
func (c *Compiled) decode(r Record) (Record, error) {
	if r.Decoded() || !c.ReadsValue() {
		return r, nil
	}
	d, err := r.Decode(context.Background())
	if err != nil {
		return r, &Error{Step: c.Step, Err: fmt.Errorf("decode the value: %w", err)}
	}
	return d, nil
}

// Keep applies a Filter step to one record.
func (c *Compiled) Keep(r Record) (bool, error) {
	if c.lazy != nil {
		if keep, ok := c.keepLazy(r); ok {
			return keep, nil
		}
	}
	r, err := c.decode(r)
	if err != nil {
		return false, err
	}
	v, err := c.expr.Run(r)
	if err != nil {
		return false, &Error{Step: c.Step, Err: err, Input: r.Value()}
	}
	b, ok := v.(bool)
	if !ok {
		return false, &Error{Step: c.Step, Err: fmt.Errorf("filter returned %T, want bool", v), Input: r.Value()}
	}
	return b, nil
}

// Apply applies a Map, Select or Rename step to one record: the result
// has the new value and r's metadata.
func (c *Compiled) Apply(r Record) (Record, error) {
	if c.lazy != nil && c.Kind == Map {
		if out, ok := c.applyLazy(r); ok {
			return out, nil
		}
	}
	r, err := c.decode(r)
	if err != nil {
		return r, err
	}
	switch c.Kind {
	case SinkStep:
		return c.fn(r)
	case Map:
		v, err := c.expr.Run(r)
		if err != nil {
			return r, &Error{Step: c.Step, Err: err, Input: r.Value()}
		}
		out, ok := v.(map[string]any)
		if !ok {
			return r, &Error{Step: c.Step, Err: fmt.Errorf("map returned %T, want an object such as {\"id\": id}", v), Input: r.Value()}
		}
		return r.WithValue(out), nil
	case Select:
		obj, err := c.object(r)
		if err != nil {
			return r, err
		}
		out := make(Object, len(c.Fields))
		for _, f := range c.Fields {
			if v, ok := obj[f]; ok {
				out[f] = v
			}
		}
		return r.WithValue(out), nil
	case Rename:
		obj, err := c.object(r)
		if err != nil {
			return r, err
		}
		out, err := c.rename(obj)
		if err != nil {
			return r, err
		}
		return r.WithValue(out), nil
	}
	return r, &Error{Step: c.Step, Err: fmt.Errorf("%s is not a record-to-record transform", c.Kind), Input: r.Value()}
}

// object is r's value as an object.
func (c *Compiled) object(r Record) (Object, error) {
	obj, ok := r.Object()
	if !ok {
		return nil, &Error{Step: c.Step, Err: fmt.Errorf("%s needs an object, the value is a %T", c.Kind, r.Value()), Input: r.Value()}
	}
	return obj, nil
}

// rename applies all renames of the step at once: every source field
// present is removed, then every target is set from the input record. So
// {a: b, b: a} swaps and {a: b, b: c} moves a to b and b to c. A target
// that exists in the input and is not itself renamed away is an error
// unless the step allows overwriting.
func (c *Compiled) rename(r Object) (Object, error) {
	out := make(Object, len(r))
	for k, v := range r {
		if !c.from[k] {
			out[k] = v
		}
	}
	for _, rn := range c.Renames {
		v, ok := r[rn[0]]
		if !ok {
			continue
		}
		if _, exists := out[rn[1]]; exists && !c.Overwrite {
			return nil, &Error{Step: c.Step, Err: fmt.Errorf("%w: renaming %q to %q, but the record already has a field %q "+
				"(set overwrite: true on the rename to replace it)",
				ErrRenameOverwrite, rn[0], rn[1], rn[1]), Input: r}
		}
		out[rn[1]] = v
	}
	return out, nil
}

// previewMax bounds the part of a record an error shows.
const previewMax = 256

// preview renders r as JSON for an error message, cut to previewMax bytes.
func preview(r any) string {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Sprintf("(not JSON: %v)", err)
	}
	if len(b) > previewMax {
		cut := previewMax
		for cut > 0 && !utf8.RuneStart(b[cut]) {
			cut--
		}
		return string(b[:cut]) + "…"
	}
	return string(b)
}

// AddTo appends the steps to a stream as operators (named by Step.Name),
// for pipelines where every step's policy is fail and no source sends dead
// letters (else use AddWithPolicies).
//
// A failing expression fails the job with its *Error, without restarts
// (restart.ErrUnrecoverable), naming the record's source position
// (Record.Pos) where the source attached one (see NeedsPositions).
//
// first are options of the first step's operator, such as
// stream.StartNewChain (the source's task then ends before it).
//
// A key_by or rebalance step (IsPartition) ends the chain: the operators
// after it run in tasks of their own, fed over a hash or round-robin
// edge; see AddToWith for the codec such an edge needs across nodes.
func AddTo(in stream.DataStream[Record], steps []*Compiled, first ...stream.OpOption) stream.DataStream[Record] {
	return AddToWith(in, steps, nil, first...)
}

// AddToWith is AddTo with the codec of the key_by and rebalance edges
// (nil: none, so such an edge cannot cross nodes).
func AddToWith(in stream.DataStream[Record], steps []*Compiled, codec RecordCodec, first ...stream.OpOption) stream.DataStream[Record] {
	for i, c := range steps {
		o := []stream.OpOption{stream.Name(c.Name)}
		if i == 0 {
			o = append(o, first...)
		}
		switch c.Kind {
		case Filter:
			in = stream.TryFilter(in, c.keepAt, o...)
		case KeyBy, Rebalance:
			in = c.addPartition(in, codec, o)
		default:
			in = stream.TryMap(in, c.applyAt, o...)
		}
	}
	return in
}

// keepAt is Keep with the record's position named by its error.
func (c *Compiled) keepAt(r Record) (bool, error) {
	keep, err := c.Keep(r)
	if err != nil {
		return false, withPos(err, r.Pos())
	}
	return keep, nil
}

// applyAt is Apply with the record's position named by its error.
func (c *Compiled) applyAt(r Record) (Record, error) {
	out, err := c.Apply(r)
	if err != nil {
		return out, withPos(err, r.Pos())
	}
	return out, nil
}

// withPos sets the position of err's *Error, if it has one and pos is
// known, with the line of a file looked up: the job fails on err, so this
// happens once.
func withPos(err error, ref registry.PosRef) error {
	if !ref.Known() {
		return err
	}
	if te, ok := errors.AsType[*Error](err); ok && te.Pos == nil {
		te.Pos = ref.Resolve()
		te.Line = te.Pos.Line()
	}
	return err
}
