// Package transform compiles the transforms of a CLI pipeline — filter and
// map expressions (github.com/expr-lang/expr) and JSON field selection and
// renaming — and applies them to a stream of registry.Records.
//
// Expressions are compiled once, when the pipeline is loaded; the compiled
// programs are shared by all subtasks (an expr program is safe for
// concurrent use; each subtask runs it on a VM of its own from a pool).
// Inside an expression the record's fields are variables (`amount > 100`),
// and `record` is the whole record (`record["user id"]`).
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
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/vm"
	"github.com/sluice-io/sluice/internal/registry"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
)

// Record is the record type of CLI pipelines.
type Record = registry.Record

// Kind is a transform's kind.
type Kind string

const (
	Filter Kind = "filter" // keep records for which Expr is true
	Map    Kind = "map"    // replace each record by Expr, which must yield an object
	Select Kind = "select" // keep only Fields
	Rename Kind = "rename" // rename fields: Renames[i] = {from, to}
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
	prog *vm.Program
	vms  *sync.Pool
	from map[string]bool // a Rename's source fields
}

// Compile checks and compiles a step. Its error describes the problem
// without position (the caller knows the line).
func Compile(s Step) (*Compiled, error) {
	c := &Compiled{Step: s}
	switch s.Kind {
	case Filter, Map:
		if s.Expr == "" {
			return nil, errors.New("empty expression")
		}
		opts := append([]expr.Option{expr.Env(map[string]any{}), expr.AllowUndefinedVariables()}, numberOptions()...)
		if s.Kind == Filter {
			opts = append(opts, expr.AsBool())
		}
		p, err := expr.Compile(s.Expr, opts...)
		if err != nil {
			return nil, fmt.Errorf("invalid expression: %s", oneLine(err.Error()))
		}
		c.prog = p
		c.vms = &sync.Pool{New: func() any { return &vm.VM{} }}
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
	default:
		return nil, fmt.Errorf("unknown transform %q (want filter, map, select or rename)", s.Kind)
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
	Input Record // the record the step failed on
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

func (c *Compiled) run(r Record) (any, error) {
	m := c.vms.Get().(*vm.VM)
	defer c.vms.Put(m)
	env := make(map[string]any, len(r)+1)
	for k, v := range r {
		env[k] = v
	}
	env["record"] = r
	return m.Run(c.prog, env)
}

// Keep applies a Filter step to one record.
func (c *Compiled) Keep(r Record) (bool, error) {
	v, err := c.run(r)
	if err != nil {
		return false, &Error{Step: c.Step, Err: err, Input: r}
	}
	b, ok := v.(bool)
	if !ok {
		return false, &Error{Step: c.Step, Err: fmt.Errorf("filter returned %T, want bool", v), Input: r}
	}
	return b, nil
}

// Apply applies a Map, Select or Rename step to one record.
func (c *Compiled) Apply(r Record) (Record, error) {
	switch c.Kind {
	case Map:
		v, err := c.run(r)
		if err != nil {
			return nil, &Error{Step: c.Step, Err: err, Input: r}
		}
		out, ok := v.(map[string]any)
		if !ok {
			return nil, &Error{Step: c.Step, Err: fmt.Errorf("map returned %T, want an object such as {\"id\": id}", v), Input: r}
		}
		return out, nil
	case Select:
		out := make(Record, len(c.Fields))
		for _, f := range c.Fields {
			if v, ok := r[f]; ok {
				out[f] = v
			}
		}
		return out, nil
	case Rename:
		return c.rename(r)
	}
	return nil, &Error{Step: c.Step, Err: fmt.Errorf("%s is not a record-to-record transform", c.Kind), Input: r}
}

// rename applies all renames of the step at once: every source field
// present is removed, then every target is set from the input record. So
// {a: b, b: a} swaps and {a: b, b: c} moves a to b and b to c. A target
// that exists in the input and is not itself renamed away is an error
// unless the step allows overwriting.
func (c *Compiled) rename(r Record) (Record, error) {
	out := make(Record, len(r))
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
func preview(r Record) string {
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
// (restart.ErrUnrecoverable). If NeedsPositions(steps), the source is
// expected to attach each record's position (registry.WithPosition): the
// steps carry it from one to the next, name it in the *Error (Pos), and
// take it off before the last step's output goes on.
func AddTo(in stream.DataStream[Record], steps []*Compiled) stream.DataStream[Record] {
	positions := NeedsPositions(steps)
	for i, c := range steps {
		switch {
		case positions && c.Kind == Filter:
			in = stream.TryFilter(in, c.keepAt(i < len(steps)-1), stream.Name(c.Name))
		case positions:
			in = stream.TryMap(in, c.applyAt(i < len(steps)-1), stream.Name(c.Name))
		case c.Kind == Filter:
			in = stream.TryFilter(in, c.Keep, stream.Name(c.Name))
		default:
			in = stream.TryMap(in, c.Apply, stream.Name(c.Name))
		}
	}
	return in
}

// keepAt is Keep on a record that may carry its source position: the
// position is taken off before the expression sees the record, named by
// the error, and put back on a kept record if more steps follow.
func (c *Compiled) keepAt(more bool) func(Record) (bool, error) {
	return func(r Record) (bool, error) {
		pos := registry.TakePosition(r)
		keep, err := c.Keep(r)
		if err != nil {
			return false, withPos(err, pos)
		}
		if keep && more {
			registry.PutPosition(r, pos)
		}
		return keep, nil
	}
}

// applyAt is Apply on a record that may carry its source position, like
// keepAt.
func (c *Compiled) applyAt(more bool) func(Record) (Record, error) {
	return func(r Record) (Record, error) {
		pos := registry.TakePosition(r)
		out, err := c.Apply(r)
		if err != nil {
			return nil, withPos(err, pos)
		}
		if more {
			out = registry.PutPosition(out, pos)
		}
		return out, nil
	}
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
