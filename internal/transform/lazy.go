package transform

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
	"github.com/sluice-io/sluice/serde/jsonrecord"
)

// The lazy path runs a filter or map on a JSON record's bytes without
// decoding the record: an expression that names the fields it reads
// (`amount > 100`, not `record` or `$env`) gets only those fields,
// found with jsonrecord.Lookup (which checks the whole record as the
// decoder does) and decoded exactly with jsonrecord.DecodeValue. A map
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
}

// lazyMember is one member of a lazy map's output.
type lazyMember struct {
	key  string
	head []byte // the key encoded as encoding/json writes it, and ':'
	from int    // the index in keys of the field it copies; -1: computed by the expression
}

// planLazy returns the lazy plan of a filter or map, or nil when the step
// must decode records.
func planLazy(s Step) *lazyPlan {
	if s.Kind != Filter && s.Kind != Map {
		return nil
	}
	tree, err := parser.Parse(s.Expr)
	if err != nil {
		return nil
	}
	if s.Kind == Filter {
		reads, ok := lazyReads(&tree.Node)
		if !ok {
			return nil
		}
		return &lazyPlan{keys: reads, decode: len(reads)}
	}
	m, ok := tree.Node.(*ast.MapNode)
	if !ok {
		return nil
	}
	p := &lazyPlan{}
	var copied []string
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
	slices.SortFunc(p.members, func(a, b lazyMember) int { return cmpString(a.key, b.key) })
	return p
}

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

// lazyEnv looks the plan's fields up in b and returns the environment
// of the expression (the decoded fields present) and the bytes of every
// field looked up (nil where absent); ok false when b is not a record the
// decoder accepts.
func (p *lazyPlan) lazyEnv(b []byte) (env map[string]any, vals [][]byte, ok bool) {
	var arr [8][]byte
	if len(p.keys) <= len(arr) {
		vals = arr[:len(p.keys)]
	} else {
		vals = make([][]byte, len(p.keys))
	}
	if err := jsonrecord.Lookup(b, p.keys, vals); err != nil {
		return nil, nil, false
	}
	env = make(map[string]any, p.decode+1)
	for i, k := range p.keys[:p.decode] {
		if vals[i] == nil {
			continue
		}
		v, err := jsonrecord.DecodeValue(vals[i])
		if err != nil {
			return nil, nil, false
		}
		env[k] = v
	}
	return env, vals, true
}

// keepLazy is Keep on the lazy path; ok false: take the full path.
func (c *Compiled) keepLazy(r Record) (keep, ok bool) {
	b, ok := lazyBytes(r)
	if !ok {
		return false, false
	}
	env, _, ok := c.lazy.lazyEnv(b)
	if !ok {
		return false, false
	}
	v, err := c.expr.RunFields(r, env)
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
	env, vals, ok := c.lazy.lazyEnv(b)
	if !ok {
		return r, false
	}
	var computed map[string]any
	if c.lazy.computes {
		v, err := c.expr.RunFields(r, env)
		if err != nil {
			return r, false
		}
		if computed, ok = v.(map[string]any); !ok {
			return r, false
		}
	}
	out := make([]byte, 0, len(b)+16)
	out = append(out, '{')
	for i, m := range c.lazy.members {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, m.head...)
		switch {
		case m.from < 0:
			var err error
			if out, err = jsonrecord.AppendValue(out, computed[m.key]); err != nil {
				return r, false
			}
		case vals[m.from] == nil:
			out = append(out, "null"...)
		default:
			out = appendCompact(out, vals[m.from])
		}
	}
	out = append(out, '}')
	return r.WithRawValue(out), true
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
