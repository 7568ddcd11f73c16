package transform

import (
	"context"

	"github.com/sluice-io/sluice/internal/registry"
)

// rec makes a decoded record of an object value.
func rec(m Object) Record { return registry.NewRecord(m) }

// obj is a record's object value (nil if none), decoded if need be (a
// lazy map's output is bytes).
func obj(r Record) Object {
	if !r.Decoded() {
		r, _ = r.Decode(context.Background())
	}
	o, _ := r.Object()
	return o
}

// run evaluates the step's expression on a record of value r.
func (c *Compiled) run(r Object) (any, error) { return c.expr.Run(rec(r)) }
