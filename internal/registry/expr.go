package registry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"
)

// MetaFields are the fields of `meta` in expressions.
var MetaFields = []string{"key", "headers", "topic", "partition", "offset", "timestamp", "path"}

// Expr is a compiled expression of a pipeline (a transform's, or a sink
// option's). Inside it the fields of the record's value (an object) are
// variables, `record` is the whole value and `meta` the record's metadata
// (MetaView). It is immutable and safe for concurrent use.
type Expr struct {
	prog      *vm.Program
	vms       *sync.Pool
	readsMeta bool
	readsVal  bool
}

// CompileExpr compiles src; asBool requires a boolean result (filters).
// Its error describes the problem without position (the caller knows the
// line). A `meta.<name>` with a name not in MetaFields is an error.
func CompileExpr(src string, asBool bool) (*Expr, error) {
	if strings.TrimSpace(src) == "" {
		return nil, errors.New("empty expression")
	}
	opts := append([]expr.Option{expr.Env(map[string]any{}), expr.AllowUndefinedVariables()}, ExprNumberOptions()...)
	if asBool {
		opts = append(opts, expr.AsBool())
	}
	p, err := expr.Compile(src, opts...)
	if err != nil {
		return nil, fmt.Errorf("invalid expression: %s", firstLine(err.Error()))
	}
	e := &Expr{prog: p, vms: &sync.Pool{New: func() any { return &vm.VM{} }}}
	tree, err := parser.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("invalid expression: %s", firstLine(err.Error()))
	}
	v := &identVisitor{callees: map[ast.Node]bool{}, declared: map[string]bool{}}
	ast.Walk(&tree.Node, v)
	v.collect = true
	ast.Walk(&tree.Node, v)
	if v.badMeta != "" {
		return nil, fmt.Errorf("meta has no field %q (it has %s)", v.badMeta, strings.Join(MetaFields, ", "))
	}
	e.readsMeta, e.readsVal = v.meta, v.value
	return e, nil
}

// ReadsMeta reports whether the expression reads `meta`.
func (e *Expr) ReadsMeta() bool { return e.readsMeta }

// ReadsValue reports whether the expression reads the record's value
// (any variable but meta).
func (e *Expr) ReadsValue() bool { return e.readsVal }

// Run evaluates the expression on r, which must be decoded if the
// expression reads its value (ReadsValue). meta is built only if the
// expression reads it.
func (e *Expr) Run(r Record) (any, error) {
	var env map[string]any
	if e.readsVal {
		obj, _ := r.Object()
		env = make(map[string]any, len(obj)+2)
		for k, v := range obj {
			env[k] = v
		}
		if obj != nil {
			env["record"] = obj
		} else {
			env["record"] = r.Value()
		}
	} else {
		env = make(map[string]any, 1)
	}
	if e.readsMeta {
		m, err := MetaView(r)
		if err != nil {
			return nil, err
		}
		env["meta"] = m
	}
	m := e.vms.Get().(*vm.VM)
	defer e.vms.Put(m)
	return m.Run(e.prog, env)
}

// RunFields evaluates the expression on r with fields as the variables
// of its value instead of r's decoded value (an expression that reads
// only these fields, not `record`, sees what Run shows it): fields
// becomes the environment, and meta is added to it if the expression
// reads meta.
func (e *Expr) RunFields(r Record, fields map[string]any) (any, error) {
	if e.readsMeta {
		m, err := MetaView(r)
		if err != nil {
			return nil, err
		}
		fields["meta"] = m
	}
	m := e.vms.Get().(*vm.VM)
	defer e.vms.Put(m)
	return m.Run(e.prog, fields)
}

// MetaView is r's metadata as expressions see it (`meta`): key (decoded
// with the source's key.format, a string by default; nil without a key),
// headers (name → value as a string, the last for a repeated name),
// timestamp (int64 milliseconds since the epoch; nil when none), topic,
// partition and offset (Kafka), path and offset (files).
func MetaView(r Record) (map[string]any, error) {
	m := make(map[string]any, 7)
	if k := r.Key(); k != nil {
		if c := r.KeyCodec(); c != nil {
			v, err := c.Decode(context.Background(), r.Topic(), k)
			if err != nil {
				return nil, fmt.Errorf("meta.key: %w", err)
			}
			m["key"] = v
		} else {
			m["key"] = string(k)
		}
	} else {
		m["key"] = nil
	}
	hs := r.Headers()
	h := make(map[string]any, len(hs))
	for _, x := range hs {
		if utf8.Valid(x.Value) {
			h[x.Key] = string(x.Value)
		} else {
			h[x.Key] = x.Value
		}
	}
	m["headers"] = h
	if ts := r.Timestamp(); !ts.IsZero() {
		m["timestamp"] = ts.UnixMilli()
	} else {
		m["timestamp"] = nil
	}
	if t := r.Topic(); t != "" {
		m["topic"], m["partition"], m["offset"] = t, int64(r.Partition()), r.Offset()
	}
	if p := r.Path(); p != "" {
		m["path"], m["offset"] = p, r.Offset()
	}
	return m, nil
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// identVisitor finds what an expression reads: meta (and the fields of
// meta it names), the value (any other variable).
type identVisitor struct {
	collect  bool
	callees  map[ast.Node]bool
	declared map[string]bool
	meta     bool
	value    bool
	badMeta  string
}

func (v *identVisitor) Visit(node *ast.Node) {
	if !v.collect {
		switch n := (*node).(type) {
		case *ast.CallNode:
			v.callees[n.Callee] = true
		case *ast.VariableDeclaratorNode:
			v.declared[n.Name] = true
		}
		return
	}
	switch n := (*node).(type) {
	case *ast.MemberNode:
		if id, ok := n.Node.(*ast.IdentifierNode); ok && id.Value == "meta" && !v.declared["meta"] {
			if s, ok := n.Property.(*ast.StringNode); ok && !slices.Contains(MetaFields, s.Value) && v.badMeta == "" {
				v.badMeta = s.Value
			}
		}
	case *ast.IdentifierNode:
		switch {
		case v.callees[n] || v.declared[n.Value]:
		case n.Value == "$env":
			v.meta, v.value = true, true
		case n.Value == "meta":
			v.meta = true
		default:
			v.value = true
		}
	}
}
