package transform

import "github.com/sluice-io/sluice/internal/registry"

// rec makes a decoded record of an object value.
func rec(m Object) Record { return registry.NewRecord(m) }

// obj is a record's object value (nil if none).
func obj(r Record) Object { o, _ := r.Object(); return o }

// run evaluates the step's expression on a record of value r.
func (c *Compiled) run(r Object) (any, error) { return c.expr.Run(rec(r)) }
