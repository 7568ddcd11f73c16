package transform

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sync"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
	"github.com/sluice-io/sluice/internal/registry"
	"github.com/sluice-io/sluice/serde/jsonrecord"
)

// The lazy path runs a filter or map on a JSON record's bytes without
// decoding the record: an expression that names the fields it reads
// (`amount > 100`, not `record` or `$env`) gets only those fields,
// found with jsonrecord.Lookup (which checks the whole record as the
// decoder does; jsonrecord.LookupValid, which does not, for a record its
// source checked: registry.Record.Checked) and decoded exactly with
// jsonrecord.DecodeValue. A map
// whose expression is an object literal with constant keys, like
// {"amount": amount * 2, "id": id, "user": user}, writes its result as
// bytes: each member whose value is a bare field name gets that field's
// bytes as read (compacted), each other member its computed value
// encoded as encoding/json does, in encoding/json's (sorted) key order,
// so that the result means what the full path's encoded map means.
//
// Anything out of the ordinary — a record that is decoded already or not
// JSON, bytes the decoder rejects, an expression that fails — goes the
// full way (decode, run, and the full path's error), so the lazy path
// changes what a step costs, never what it does.

// lazyPlan is how a step runs on a JSON record's bytes.
type lazyPlan struct {
	keys   []string // the fields looked up: first the ones decoded for the expression, then ones only copied
	decode int      // keys[:decode] are decoded into the expression's environment
	// A map's output members, sorted by key (nil for a filter).
	members []lazyMember
	// computes: a member of the map is computed (else the expression
	// only copies fields, which cannot fail, and is not run).
	computes bool
	// part, if not nil, computes the computed members alone: the value
	// of the one computed member, or an object of those members (one),
	// so that a run builds no copied member; nil: run the step's
	// expression.
	part    *registry.Expr
	partOne bool
	// fast: every computed member of a map has its fnode (lazyMember.fast),
	// or the filter is filterFast: the expression runs on the fast path
	// (fast.go), the general lazy path only where that gives up.
	fast       bool
	filterFast *fnode
	// envs holds environments for reuse (an expression's run does not
	// keep its environment; the values in it are not reused).
	envs sync.Pool
}

// lazyMember is one member of a lazy map's output.
type lazyMember struct {
	key  string
	head []byte // the key encoded as encoding/json writes it, and ':'
	from int    // the index in keys of the field it copies; -1: computed by the expression
	fast *fnode // a computed member's value on the fast path (nil: none)
}

// planLazy returns the lazy plan of a filter or map, or nil when the step
// must decode records.
func planLazy(s Step) *lazyPlan {
	if s.Kind != Filter && s.Kind != Map && s.Kind != KeyBy {
		return nil
	}
	tree, err := parser.Parse(s.Expr)
	if err != nil {
		return nil
	}
	if s.Kind == Filter || s.Kind == KeyBy {
		reads, ok := lazyReads(&tree.Node)
		if !ok {
			return nil
		}
		p := &lazyPlan{keys: reads, decode: len(reads)}
		if s.Kind == KeyBy {
			return p
		}
		if f, ok := compileFast(tree.Node, p.keys); ok {
			p.fast, p.filterFast = true, f
		}
		return p
	}
	m, ok := tree.Node.(*ast.MapNode)
	if !ok {
		return nil
	}
	p := &lazyPlan{}
	var copied []string
	var values []ast.Node // each member's value expression
	seen := map[string]bool{}
	for _, n := range m.Pairs {
		pair, ok := n.(*ast.PairNode)
		if !ok {
			return nil
		}
		k, ok := pair.Key.(*ast.StringNode)
		if !ok || seen[k.Value] {
			return nil
		}
		seen[k.Value] = true
		head, err := json.Marshal(k.Value)
		if err != nil {
			return nil
		}
		mem := lazyMember{key: k.Value, head: append(head, ':'), from: -1}
		values = append(values, pair.Value)
		if id, ok := pair.Value.(*ast.IdentifierNode); ok && !special(id.Value) {
			copied = append(copied, id.Value)
			mem.from = len(copied) - 1 // into copied, shifted below
		} else {
			p.computes = true
			reads, ok := lazyReads(&pair.Value)
			if !ok {
				return nil
			}
			for _, r := range reads {
				if !slices.Contains(p.keys, r) {
					p.keys = append(p.keys, r)
				}
			}
		}
		p.members = append(p.members, mem)
	}
	p.decode = len(p.keys)
	p.part, p.partOne = computedPart(m)
	for i := range p.members {
		if from := p.members[i].from; from >= 0 {
			name := copied[from]
			j := slices.Index(p.keys, name)
			if j < 0 {
				j = len(p.keys)
				p.keys = append(p.keys, name)
			}
			p.members[i].from = j
		}
	}
	p.fast = p.computes
	for i := range p.members {
		if p.members[i].from < 0 {
			f, ok := compileFast(values[i], p.keys)
			p.members[i].fast, p.fast = f, p.fast && ok
		}
	}
	slices.SortFunc(p.members, func(a, b lazyMember) int { return cmpString(a.key, b.key) })
	return p
}

// computedPart compiles the expression of the computed members of a map
// literal alone: the value of the only one (one true), or an object of
// them. It returns nil when there is nothing to gain (every member is
// computed) or the printed expression does not print back the same.
func computedPart(m *ast.MapNode) (part *registry.Expr, one bool) {
	var computed []ast.Node
	for _, n := range m.Pairs {
		pair := n.(*ast.PairNode)
		if id, ok := pair.Value.(*ast.IdentifierNode); ok && !special(id.Value) {
			continue
		}
		computed = append(computed, pair)
	}
	if len(computed) == 0 || len(computed) == len(m.Pairs) && len(computed) > 1 {
		return nil, false
	}
	var src string
	if len(computed) == 1 {
		src, one = computed[0].(*ast.PairNode).Value.String(), true
	} else {
		src = (&ast.MapNode{Pairs: computed}).String()
	}
	tree, err := parser.Parse(src)
	var node ast.Node = &ast.MapNode{Pairs: computed}
	if one {
		node = computed[0].(*ast.PairNode).Value
	}
	// The printed expression must parse back to the same tree: a float
	// literal 2.0 prints as 2, an integer.
	if err != nil || tree.Node.String() != src || !slices.Equal(nodeKinds(node), nodeKinds(tree.Node)) {
		return nil, false
	}
	e, err := registry.CompileExpr(src, false)
	if err != nil {
		return nil, false
	}
	return e, one
}

// nodeKinds lists the types of a tree's nodes in walk order.
func nodeKinds(n ast.Node) []string {
	var v kindsVisitor
	ast.Walk(&n, &v)
	return v
}

type kindsVisitor []string

func (v *kindsVisitor) Visit(n *ast.Node) { *v = append(*v, fmt.Sprintf("%T", *n)) }

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// special reports whether an identifier is not a field of the record.
func special(name string) bool { return name == "record" || name == "$env" || name == "meta" }

// lazyReads returns every identifier an expression (sub)tree reads that
// may be a field of the record, or ok false when it reads the whole
// record (`record`, `$env`). It lists more than Reads does (a name a let
// declares anywhere is listed too): an extra field looked up is harmless,
// a missing one would change the result.
func lazyReads(node *ast.Node) (reads []string, ok bool) {
	v := &lazyVisitor{callees: map[ast.Node]bool{}}
	ast.Walk(node, v)
	v.collect = true
	ast.Walk(node, v)
	return v.reads, !v.whole
}

type lazyVisitor struct {
	collect bool
	callees map[ast.Node]bool
	reads   []string
	whole   bool
}

func (v *lazyVisitor) Visit(node *ast.Node) {
	if !v.collect {
		if n, ok := (*node).(*ast.CallNode); ok {
			v.callees[n.Callee] = true
		}
		return
	}
	n, ok := (*node).(*ast.IdentifierNode)
	if !ok || v.callees[n] {
		return
	}
	switch n.Value {
	case "record", "$env":
		v.whole = true
	case "meta":
	default:
		if !slices.Contains(v.reads, n.Value) {
			v.reads = append(v.reads, n.Value)
		}
	}
}

// lazyBytes returns r's value bytes when the lazy path can read them: r
// is not decoded and its bytes are JSON.
func lazyBytes(r Record) ([]byte, bool) {
	if r.Decoded() {
		return nil, false
	}
	b, c, ok := r.Bytes()
	if !ok {
		return nil, false
	}
	switch c.Identity() {
	case "json", "json-object":
		return b, true
	}
	return nil, false
}

// lookup looks the plan's fields up in b, r's value bytes: vals[i] is
// the bytes of keys[i] (nil where absent); ok false when b is not a
// record the decoder accepts. Bytes a source checked
// (registry.Record.Checked) are not checked again, and where the source
// found the fields while checking them (registry.Record.Found) they are
// not scanned at all.
func (p *lazyPlan) lookup(r Record, b []byte, arr *[8][]byte) (vals [][]byte, ok bool) {
	if len(p.keys) <= len(arr) {
		vals = arr[:len(p.keys)]
	} else {
		vals = make([][]byte, len(p.keys))
	}
	if r.Found(p.keys, vals) {
		return vals, true // the source looked them up while checking b
	}
	var err error
	if r.Checked() {
		err = jsonrecord.LookupValid(b, p.keys, vals) // the source checked b
	} else {
		err = jsonrecord.Lookup(b, p.keys, vals)
	}
	if err != nil {
		return nil, false
	}
	return vals, true
}

// LookupKeys returns the fields the first step that reads the records'
// values looks up on the lazy path (nil if it does not take it), for its
// source to find while it checks the bytes (registry.BuildContext.LookupKeys,
// registry.Record.Found): the step then scans nothing.
func LookupKeys(steps []*Compiled) []string {
	for _, c := range steps {
		if c.ReadsValue() {
			if c.lazy == nil {
				return nil
			}
			return c.lazy.keys
		}
	}
	return nil
}

// env returns the environment of the expression: the decoded fields
// present among vals (lookup's); ok false when one does not decode.
func (p *lazyPlan) env(vals [][]byte) (env map[string]any, ok bool) {
	env, _ = p.envs.Get().(map[string]any)
	if env == nil {
		env = make(map[string]any, p.decode+1)
	}
	for i, k := range p.keys[:p.decode] {
		if vals[i] == nil {
			continue
		}
		v, err := jsonrecord.DecodeValue(vals[i])
		if err != nil {
			p.putEnv(env)
			return nil, false
		}
		env[k] = v
	}
	return env, true
}

// putEnv returns an environment lazyEnv made, for reuse.
func (p *lazyPlan) putEnv(env map[string]any) {
	clear(env)
	p.envs.Put(env)
}

// keepLazy is Keep on the lazy path; ok false: take the full path.
func (c *Compiled) keepLazy(r Record) (keep, ok bool) {
	b, ok := lazyBytes(r)
	if !ok {
		return false, false
	}
	var arr [8][]byte
	p := c.lazy
	vals, ok := p.lookup(r, b, &arr)
	if !ok {
		return false, false
	}
	if p.filterFast != nil {
		if v, ok := p.filterFast.eval(vals); ok && v.kind == fBool {
			return v.b, true
		}
	}
	env, ok := p.env(vals)
	if !ok {
		return false, false
	}
	v, err := c.expr.RunFields(r, env)
	p.putEnv(env)
	if err != nil {
		return false, false
	}
	keep, ok = v.(bool)
	return keep, ok
}

// applyLazy is a Map's Apply on the lazy path; ok false: take the full
// path.
func (c *Compiled) applyLazy(r Record) (Record, bool) {
	b, ok := lazyBytes(r)
	if !ok {
		return r, false
	}
	var arr [8][]byte
	p := c.lazy
	vals, ok := p.lookup(r, b, &arr)
	if !ok {
		return r, false
	}
	if p.fast {
		if out, ok := p.outputFast(b, vals); ok {
			return r.WithRawValue(out), true
		}
	}
	var computed map[string]any
	var one any // the only computed member's value (partOne)
	if p.computes {
		env, ok := p.env(vals)
		if !ok {
			return r, false
		}
		e := c.expr
		if p.part != nil {
			e = p.part
		}
		v, err := e.RunFields(r, env)
		p.putEnv(env)
		if err != nil {
			return r, false
		}
		if p.part != nil && p.partOne {
			one = v
		} else if computed, ok = v.(map[string]any); !ok {
			return r, false
		}
	}
	out := p.output(len(b))
	for i, m := range p.members {
		out = m.appendHead(out, i)
		switch {
		case m.from < 0:
			var err error
			v := one
			if computed != nil {
				v = computed[m.key]
			}
			if out, err = jsonrecord.AppendValue(out, v); err != nil {
				return r, false
			}
		default:
			out = appendField(out, vals[m.from])
		}
	}
	out = append(out, '}')
	return r.WithRawValue(out), true
}

// outputFast is the output of a map whose computed members all run on
// the fast path; ok false where one gives up.
func (p *lazyPlan) outputFast(b []byte, vals [][]byte) (out []byte, ok bool) {
	out = p.output(len(b))
	for i, m := range p.members {
		out = m.appendHead(out, i)
		if m.from >= 0 {
			out = appendField(out, vals[m.from])
			continue
		}
		v, ok := m.fast.eval(vals)
		if !ok {
			return nil, false
		}
		if out, ok = appendFast(out, v); !ok {
			return nil, false
		}
	}
	return append(out, '}'), true
}

// output returns the buffer of a map's output for an input of n bytes,
// with its opening brace.
func (p *lazyPlan) output(n int) []byte {
	return append(make([]byte, 0, n+16), '{')
}

// appendHead appends the member's key and colon, after a comma unless
// it is the first (i == 0).
func (m *lazyMember) appendHead(dst []byte, i int) []byte {
	if i > 0 {
		dst = append(dst, ',')
	}
	return append(dst, m.head...)
}

// appendField appends a copied field's bytes as read (compacted), or
// null when the record lacks it (v nil).
func appendField(dst, v []byte) []byte {
	if v == nil {
		return append(dst, "null"...)
	}
	return appendCompact(dst, v)
}

// appendCompact appends a checked JSON value without the whitespace
// between its tokens (a record written one per line must not hold a line
// break).
func appendCompact(dst, v []byte) []byte {
	if (v[0] == '{' || v[0] == '[') && bytes.ContainsAny(v, " \t\r\n") {
		buf := bytes.NewBuffer(dst)
		if json.Compact(buf, v) == nil {
			return buf.Bytes()
		}
		dst = buf.Bytes()[:len(dst)]
	}
	return append(dst, v...)
}

// DecodesValues reports whether the source of the steps must decode the
// records' values (registry.BuildContext.DecodeValues): the first step
// that reads values cannot read them from a JSON record's bytes (the lazy
// path). Steps after it decode a value when they need it.
func DecodesValues(steps []*Compiled) bool {
	for _, c := range steps {
		if c.ReadsValue() {
			return c.lazy == nil
		}
	}
	return false
}
