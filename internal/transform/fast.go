package transform

import (
	"bytes"
	"math"
	"slices"
	"strconv"

	"github.com/expr-lang/expr/ast"
	"github.com/sluice-io/sluice/serde/jsonrecord"
)

// The fast path of the lazy path evaluates a filter, or the computed
// members of a map literal, without expr's VM and without building its
// environment: on the bytes of the fields looked up, for expressions made
// only of field names, literals (numbers, strings, true, false, nil),
// unary - and not, arithmetic (+ - * / %), comparisons (== != < > <= >=),
// && || ?? and ?:. Field values are decoded as jsonrecord.DecodeValue
// decodes them, but only scalars: a number that decodes to int64 or
// float64, a string, a boolean, null (or a missing field). It computes
// what expr (with the exact-number patch, registry.ExprNumberOptions)
// computes on those values — integer arithmetic wraps as Go's int does, a
// mixed int and float operation is a float one, / is always a float
// division — and gives up (the general lazy path runs instead) on
// anything else: an operand of another type (a json.Number, an object or
// an array), a mixed-type arithmetic or ordering that expr rejects, a
// modulo by zero, a non-bool operand of a logical operator, a float
// result that JSON cannot hold. So it never changes a step's result, only
// its cost (TestFastAgreesWithGeneral compares the output bytes of both
// paths).

// fkind is the type of a fast-path value.
type fkind uint8

const (
	fNil fkind = iota
	fBool
	fInt
	fFloat
	fString
)

// fval is a fast-path value: nil, a bool, an int64 (expr's int and
// int64 alike: 64-bit, wrapping), a float64 or a string (its UTF-8
// bytes, unescaped; not to be changed: it may point into the record).
type fval struct {
	kind fkind
	b    bool
	i    int64
	f    float64
	s    []byte
}

func (v fval) number() bool { return v.kind == fInt || v.kind == fFloat }

// float is a number as a float64 (expr's float64(x)).
func (v fval) float() float64 {
	if v.kind == fInt {
		return float64(v.i)
	}
	return v.f
}

// fnode is a compiled expression of the fast path. (A tree of structs
// evaluated by one recursive method, not closures: an indirect call
// would make the caller's array of field values escape to the heap.)
type fnode struct {
	op      fop
	val     fval   // fConst
	key     int    // fField: the index in the plan's keys
	opname  string // fArith, fCompare: the operator
	a, b, c *fnode // operands
}

type fop uint8

const (
	fConst    fop = iota
	fField        // the value of keys[key]
	fNeg          // -a
	fNot          // !a
	fCond         // a ? b : c
	fAnd          // a && b
	fOr           // a || b
	fCoalesce     // a ?? b
	fEq           // a == b
	fNe           // a != b
	fCompare      // a < b, a > b, a <= b, a >= b (opname)
	fArith        // a + b, a - b, a * b, a / b, a % b (opname)
)

// eval evaluates n on the bytes of the plan's fields (vals[i]: the
// value of keys[i], nil when absent); ok false: the fast path cannot
// tell, take the general path.
func (n *fnode) eval(vals [][]byte) (v fval, ok bool) {
	switch n.op {
	case fConst:
		return n.val, true
	case fField:
		return fieldValue(vals[n.key])
	case fNeg:
		v, ok := n.a.eval(vals)
		switch {
		case !ok:
		case v.kind == fInt:
			v.i = -v.i
			return v, true
		case v.kind == fFloat:
			v.f = -v.f
			return v, true
		}
		return fval{}, false
	case fNot:
		v, ok := n.a.eval(vals)
		if !ok || v.kind != fBool {
			return fval{}, false
		}
		v.b = !v.b
		return v, true
	case fCond:
		v, ok := n.a.eval(vals)
		switch {
		case !ok || v.kind != fBool:
			return fval{}, false
		case v.b:
			return n.b.eval(vals)
		}
		return n.c.eval(vals)
	case fAnd, fOr:
		a, ok := n.a.eval(vals)
		if !ok || a.kind != fBool {
			return fval{}, false
		}
		if a.b == (n.op == fOr) { // false && …, true || …: expr skips the right side
			return a, true
		}
		b, ok := n.b.eval(vals)
		if !ok || b.kind != fBool {
			return fval{}, false
		}
		return b, true
	case fCoalesce:
		a, ok := n.a.eval(vals)
		if !ok || a.kind != fNil {
			return a, ok
		}
		return n.b.eval(vals)
	}
	a, ok1 := n.a.eval(vals)
	b, ok2 := n.b.eval(vals)
	if !ok1 || !ok2 {
		return fval{}, false
	}
	switch n.op {
	case fEq:
		return fval{kind: fBool, b: equal(a, b)}, true
	case fNe:
		return fval{kind: fBool, b: !equal(a, b)}, true
	case fCompare:
		res, ok := compare(n.opname, a, b)
		return fval{kind: fBool, b: res}, ok
	}
	return arith(n.opname, a, b)
}

// compileFast compiles an expression tree for the fast path; ok false
// when it holds something the fast path does not evaluate. keys are the
// plan's fields: every field the tree names must be one.
func compileFast(n ast.Node, keys []string) (*fnode, bool) {
	switch n := n.(type) {
	case *ast.IntegerNode:
		return &fnode{op: fConst, val: fval{kind: fInt, i: int64(n.Value)}}, true
	case *ast.FloatNode:
		return &fnode{op: fConst, val: fval{kind: fFloat, f: n.Value}}, true
	case *ast.StringNode:
		return &fnode{op: fConst, val: fval{kind: fString, s: []byte(n.Value)}}, true
	case *ast.BoolNode:
		return &fnode{op: fConst, val: fval{kind: fBool, b: n.Value}}, true
	case *ast.NilNode:
		return &fnode{op: fConst}, true
	case *ast.IdentifierNode:
		j := slices.Index(keys, n.Value)
		if special(n.Value) || j < 0 {
			return nil, false
		}
		return &fnode{op: fField, key: j}, true
	case *ast.UnaryNode:
		x, ok := compileFast(n.Node, keys)
		switch {
		case !ok:
		case n.Operator == "-":
			return &fnode{op: fNeg, a: x}, true
		case n.Operator == "!" || n.Operator == "not":
			return &fnode{op: fNot, a: x}, true
		}
		return nil, false
	case *ast.ConditionalNode:
		c, ok1 := compileFast(n.Cond, keys)
		a, ok2 := compileFast(n.Exp1, keys)
		b, ok3 := compileFast(n.Exp2, keys)
		if !ok1 || !ok2 || !ok3 {
			return nil, false
		}
		return &fnode{op: fCond, a: c, b: a, c: b}, true
	case *ast.BinaryNode:
		l, ok1 := compileFast(n.Left, keys)
		r, ok2 := compileFast(n.Right, keys)
		if !ok1 || !ok2 {
			return nil, false
		}
		f := &fnode{a: l, b: r, opname: n.Operator}
		switch n.Operator {
		case "&&", "and":
			f.op = fAnd
		case "||", "or":
			f.op = fOr
		case "??":
			f.op = fCoalesce
		case "==":
			f.op = fEq
		case "!=":
			f.op = fNe
		case "<", ">", "<=", ">=":
			f.op = fCompare
		case "+", "-", "*", "/", "%":
			f.op = fArith
		default:
			return nil, false
		}
		return f, true
	}
	return nil, false
}

// equal is expr's runtime.Equal on fast-path values: numbers by value (a
// mixed pair as float64s), strings, bools, nil equals nil, anything else
// unequal.
func equal(a, b fval) bool {
	switch {
	case a.kind == fInt && b.kind == fInt:
		return a.i == b.i
	case a.number() && b.number():
		return a.float() == b.float()
	case a.kind != b.kind:
		return false
	case a.kind == fString:
		return bytes.Equal(a.s, b.s)
	case a.kind == fBool:
		return a.b == b.b
	}
	return true // both nil
}

// compare is expr's runtime.Less, More, LessOrEqual and MoreOrEqual (op
// <, >, <=, >=) on two numbers (a mixed pair as float64s) or two strings;
// ok false for any other pair (expr fails on it).
func compare(op string, a, b fval) (res, ok bool) {
	var c int
	switch {
	case a.kind == fInt && b.kind == fInt:
		c = cmpInt64(a.i, b.i)
	case a.number() && b.number():
		x, y := a.float(), b.float()
		switch op { // as floats compare: false with a NaN
		case "<":
			return x < y, true
		case ">":
			return x > y, true
		case "<=":
			return x <= y, true
		}
		return x >= y, true
	case a.kind == fString && b.kind == fString:
		c = bytes.Compare(a.s, b.s)
	default:
		return false, false
	}
	switch op {
	case "<":
		return c < 0, true
	case ">":
		return c > 0, true
	case "<=":
		return c <= 0, true
	}
	return c >= 0, true
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// arith is expr's + - * / % on fast-path values.
func arith(op string, a, b fval) (fval, bool) {
	if op == "+" && a.kind == fString && b.kind == fString {
		s := make([]byte, 0, len(a.s)+len(b.s))
		return fval{kind: fString, s: append(append(s, a.s...), b.s...)}, true
	}
	if !a.number() || !b.number() {
		return fval{}, false
	}
	if op == "/" {
		return fval{kind: fFloat, f: a.float() / b.float()}, true
	}
	if a.kind == fInt && b.kind == fInt {
		x, y := a.i, b.i
		switch op {
		case "+":
			x += y
		case "-":
			x -= y
		case "*":
			x *= y
		case "%":
			if y == 0 {
				return fval{}, false // expr fails: integer divide by zero
			}
			x %= y
		}
		return fval{kind: fInt, i: x}, true
	}
	x, y := a.float(), b.float()
	switch op {
	case "+":
		x += y
	case "-":
		x -= y
	case "*":
		x *= y
	default: // % of a float: expr fails
		return fval{}, false
	}
	return fval{kind: fFloat, f: x}, true
}

// fieldValue decodes a looked-up field's bytes (nil: absent) as
// jsonrecord.DecodeValue does, when the result is a scalar the fast path
// knows.
func fieldValue(b []byte) (fval, bool) {
	if len(b) == 0 {
		return fval{}, true // absent: nil, as expr sees an undefined variable
	}
	switch b[0] {
	case 'n':
		return fval{}, true
	case 't':
		return fval{kind: fBool, b: true}, true
	case 'f':
		return fval{kind: fBool}, true
	case '"':
		body := b[1 : len(b)-1]
		if bytes.IndexByte(body, '\\') < 0 {
			return fval{kind: fString, s: body}, true
		}
		v, err := jsonrecord.DecodeValue(b)
		s, ok := v.(string)
		if err != nil || !ok {
			return fval{}, false
		}
		return fval{kind: fString, s: []byte(s)}, true
	case '{', '[':
		return fval{}, false
	}
	i, f, isInt, ok := jsonrecord.DecodeNumber(b)
	switch {
	case !ok:
		return fval{}, false // a json.Number: the general path knows its rules
	case isInt:
		return fval{kind: fInt, i: i}, true
	}
	return fval{kind: fFloat, f: f}, true
}

// appendFast appends v as jsonrecord.AppendValue appends the value expr
// computes (encoding/json's bytes); ok false for a float JSON cannot hold
// (the general path fails on it).
func appendFast(dst []byte, v fval) ([]byte, bool) {
	switch v.kind {
	case fNil:
		return append(dst, "null"...), true
	case fBool:
		return strconv.AppendBool(dst, v.b), true
	case fInt:
		return strconv.AppendInt(dst, v.i, 10), true
	case fFloat:
		if math.IsNaN(v.f) || math.IsInf(v.f, 0) {
			return dst, false
		}
		return jsonrecord.AppendFloat(dst, v.f), true
	}
	out, err := jsonrecord.AppendValue(dst, string(v.s))
	return out, err == nil
}
