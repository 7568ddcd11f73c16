package transform

import (
	"slices"

	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
)

// Reads returns the record fields a step reads by name: the variables of a
// filter or map expression (and record["name"] / record.name), the fields
// of a select, the sources of a rename. It is for validation against a
// source's declared fields; fields read through computed names
// (record[k]) cannot be known and are not listed.
func (c *Compiled) Reads() []string {
	switch c.Kind {
	case Select:
		return slices.Clone(c.Fields)
	case Rename:
		out := make([]string, len(c.Renames))
		for i, r := range c.Renames {
			out[i] = r[0]
		}
		return out
	case Filter, Map, KeyBy:
		tree, err := parser.Parse(c.Expr)
		if err != nil {
			return nil
		}
		// Walk visits children first: find callees and let variables in
		// one pass, the identifiers read in a second.
		v := &readsVisitor{declared: map[string]bool{}, callees: map[ast.Node]bool{}}
		ast.Walk(&tree.Node, v)
		v.collect = true
		ast.Walk(&tree.Node, v)
		var out []string
		for _, n := range v.reads {
			if !v.declared[n] && !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
		return out
	}
	return nil
}

// Writes returns the fields of the records a step outputs, given those of
// its input (known = false: not known). A map is known only when its
// expression is an object literal with constant keys.
func (c *Compiled) Writes(in []string) (out []string, known bool) {
	switch c.Kind {
	case Filter, KeyBy, Rebalance:
		return in, true
	case Select:
		return slices.Clone(c.Fields), true
	case Rename:
		for _, f := range in {
			if !c.from[f] {
				out = append(out, f)
			}
		}
		for _, r := range c.Renames {
			if slices.Contains(in, r[0]) && !slices.Contains(out, r[1]) {
				out = append(out, r[1])
			}
		}
		return out, true
	case Map:
		tree, err := parser.Parse(c.Expr)
		if err != nil {
			return nil, false
		}
		m, ok := tree.Node.(*ast.MapNode)
		if !ok {
			return nil, false
		}
		for _, p := range m.Pairs {
			pair, ok := p.(*ast.PairNode)
			if !ok {
				return nil, false
			}
			k, ok := pair.Key.(*ast.StringNode)
			if !ok {
				return nil, false
			}
			out = append(out, k.Value)
		}
		return out, true
	}
	return nil, false
}

type readsVisitor struct {
	collect  bool // second pass
	reads    []string
	declared map[string]bool   // let variables
	callees  map[ast.Node]bool // identifiers that name functions
}

func (v *readsVisitor) Visit(node *ast.Node) {
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
		if id, ok := n.Node.(*ast.IdentifierNode); ok && id.Value == "record" {
			if s, ok := n.Property.(*ast.StringNode); ok {
				v.reads = append(v.reads, s.Value)
			}
		}
	case *ast.IdentifierNode:
		if v.callees[n] || n.Value == "record" || n.Value == "$env" || n.Value == "meta" {
			return
		}
		v.reads = append(v.reads, n.Value)
	}
}
