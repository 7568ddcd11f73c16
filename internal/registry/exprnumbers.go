package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/vm/runtime"
	"github.com/sluice-io/sluice/serde/jsonrecord"
)

// Records decoded from JSON hold int64, float64 and, for numbers that
// neither holds exactly (12345678901234567891) or that a float64 would
// write differently (1.0, 1e3), json.Number (see serde/jsonrecord). expr
// knows nothing of json.Number: it would treat one as a string, so that
// `n > 5` fails with a confusing message and `n == 5` is false for n = 5.0.
// numberPatcher rewrites expressions so that
//
//   - comparisons (== != < > <= >=) go through numCompare, which compares
//     json.Numbers by their exact decimal value — also against int64 and
//     float64, and also when no Go number type holds them;
//   - operands of arithmetic (+ - * / % ** ^ ..), of unary minus and plus,
//     the left operand of `in`, and the arguments of the numeric builtins
//     go through numValue, which turns a json.Number into the int64 or
//     float64 that holds it exactly, and fails with ErrInexactNumber when
//     none does;
//   - float(n) rounds a json.Number to the nearest float64 (asked for).
//
// Everything else sees json.Number as it is: a map that copies a field
// copies the literal, which is written back byte for byte, and string(n)
// is the literal.

// ErrInexactNumber is wrapped by the error of arithmetic on a number that
// neither int64 nor float64 holds exactly.
var ErrInexactNumber = errors.New("number not representable exactly as int64 or float64")

const (
	fnCompare = "__sluiceCompare"
	fnValue   = "__sluiceNumber"
	fnFloat   = "__sluiceFloat"
)

// ExprNumberOptions are the expr options that install the patcher and
// its functions; every expression of a pipeline (transforms, sink
// options) is compiled with them.
func ExprNumberOptions() []expr.Option {
	return []expr.Option{
		expr.Function(fnCompare, func(p ...any) (any, error) {
			return numCompare(p[0].(string), p[1], p[2])
		}, new(func(string, any, any) bool)),
		expr.Function(fnValue, func(p ...any) (any, error) {
			return numValue(p[0], p[1].(string))
		}, new(func(any, string) any)),
		expr.Function(fnFloat, func(p ...any) (any, error) {
			return numFloat(p[0])
		}, new(func(any) any)),
		expr.Patch(numberPatcher{}),
	}
}

type numberPatcher struct{}

func (numberPatcher) Visit(node *ast.Node) {
	switch n := (*node).(type) {
	case *ast.BinaryNode:
		switch n.Operator {
		case "==", "!=", "<", ">", "<=", ">=":
			// A json.Number compares with a string, bool or nil
			// literal as expr compares it already (never equal, not
			// ordered).
			if literal(n.Left) && literal(n.Right) || nonNumber(n.Left) || nonNumber(n.Right) {
				return
			}
			ast.Patch(node, &ast.CallNode{
				Callee:    &ast.IdentifierNode{Value: fnCompare},
				Arguments: []ast.Node{&ast.StringNode{Value: n.Operator}, n.Left, n.Right},
			})
		case "+", "-", "*", "/", "%", "**", "^", "..":
			n.Left, n.Right = wrap(fnValue, n.Left), wrap(fnValue, n.Right)
		case "in":
			n.Left = wrap(fnValue, n.Left)
		}
	case *ast.UnaryNode:
		if n.Operator == "-" || n.Operator == "+" {
			n.Node = wrap(fnValue, n.Node)
		}
	case *ast.BuiltinNode:
		switch n.Name {
		case "abs", "ceil", "floor", "round", "int", "max", "min", "sum", "mean", "median":
			for i, a := range n.Arguments {
				n.Arguments[i] = wrap(fnValue, a)
			}
		case "float":
			for i, a := range n.Arguments {
				n.Arguments[i] = wrap(fnFloat, a)
			}
		}
	}
}

// literal reports whether n is a constant that cannot be a json.Number.
func literal(n ast.Node) bool {
	switch n.(type) {
	case *ast.IntegerNode, *ast.FloatNode, *ast.StringNode, *ast.BoolNode, *ast.NilNode:
		return true
	}
	return false
}

// nonNumber reports whether n is a literal that is not a number.
func nonNumber(n ast.Node) bool {
	switch n.(type) {
	case *ast.StringNode, *ast.BoolNode, *ast.NilNode:
		return true
	}
	return false
}

// wrap returns fn(n) (fnValue also gets n's text for its errors).
func wrap(fn string, n ast.Node) ast.Node {
	if literal(n) {
		return n
	}
	args := []ast.Node{n}
	if fn == fnValue {
		args = append(args, &ast.StringNode{Value: n.String()})
	}
	c := &ast.CallNode{Callee: &ast.IdentifierNode{Value: fn}, Arguments: args}
	c.SetLocation(n.Location())
	return c
}

// numValue turns json.Numbers in x (or in the array x) into int64 or
// float64.
func numValue(x any, what string) (any, error) {
	switch v := x.(type) {
	case json.Number:
		return exactNumber(v, what)
	case []any:
		var out []any
		for i, e := range v {
			n, ok := e.(json.Number)
			if !ok {
				continue
			}
			if out == nil {
				out = append([]any(nil), v...)
			}
			ev, err := exactNumber(n, fmt.Sprintf("%s[%d]", what, i))
			if err != nil {
				return nil, err
			}
			out[i] = ev
		}
		if out != nil {
			return out, nil
		}
	}
	return x, nil
}

func exactNumber(n json.Number, what string) (any, error) {
	v, err := jsonrecord.Value(n)
	if errors.Is(err, jsonrecord.ErrInexact) {
		return nil, fmt.Errorf("%s is %s: %w, so arithmetic on it would be wrong "+
			"(comparisons are exact; copying it keeps it unchanged; float(%s) rounds it on purpose)",
			what, n, ErrInexactNumber, what)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return v, nil
}

// numFloat is float() for json.Numbers: the nearest float64.
func numFloat(x any) (any, error) {
	n, ok := x.(json.Number)
	if !ok {
		return x, nil
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil {
		return nil, fmt.Errorf("float(%s): %w", n, err)
	}
	return f, nil
}

// numCompare evaluates a op b as expr does, except that json.Numbers
// compare by their exact value.
func numCompare(op string, a, b any) (bool, error) {
	a, aBig, err := comparable(a)
	if err != nil {
		return false, err
	}
	b, bBig, err := comparable(b)
	if err != nil {
		return false, err
	}
	if !aBig && !bBig {
		switch op {
		case "==":
			return runtime.Equal(a, b), nil
		case "!=":
			return !runtime.Equal(a, b), nil
		case "<":
			return runtime.Less(a, b), nil
		case ">":
			return runtime.More(a, b), nil
		case "<=":
			return runtime.LessOrEqual(a, b), nil
		case ">=":
			return runtime.MoreOrEqual(a, b), nil
		}
		return false, fmt.Errorf("unknown comparison %q", op)
	}
	la, okA := literalOf(a)
	lb, okB := literalOf(b)
	if okA && okB {
		c, err := jsonrecord.Compare(la, lb)
		if err != nil {
			return false, err
		}
		switch op {
		case "==":
			return c == 0, nil
		case "!=":
			return c != 0, nil
		case "<":
			return c < 0, nil
		case ">":
			return c > 0, nil
		case "<=":
			return c <= 0, nil
		case ">=":
			return c >= 0, nil
		}
	}
	switch op {
	case "==":
		return false, nil
	case "!=":
		return true, nil
	}
	return false, fmt.Errorf("invalid operation: %v (%T) %s %v (%T)", a, a, op, b, b)
}

// comparable turns a json.Number that int64 or float64 holds exactly into
// that; big reports one that none holds (it stays a json.Number).
func comparable(x any) (v any, big bool, err error) {
	n, ok := x.(json.Number)
	if !ok {
		return x, false, nil
	}
	v, err = jsonrecord.Value(n)
	if errors.Is(err, jsonrecord.ErrInexact) {
		return n, true, nil
	}
	return v, false, err
}

// literalOf returns the exact decimal literal of a number.
func literalOf(x any) (json.Number, bool) {
	switch v := x.(type) {
	case json.Number:
		return v, true
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return "", false
		}
		// 767 significant digits hold every float64 exactly.
		return json.Number(strconv.FormatFloat(v, 'e', 767, 64)), true
	case float32:
		return literalOf(float64(v))
	}
	rv := reflect.ValueOf(x)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return json.Number(strconv.FormatInt(rv.Int(), 10)), true
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return json.Number(strconv.FormatUint(rv.Uint(), 10)), true
	}
	return "", false
}
