package transform

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/internal/registry"
	"github.com/sluice-io/sluice/stream"
)

// Partition steps: key_by and rebalance end the chain of the steps before
// them. The records go over a hash edge (key_by: records with equal keys
// go to the same subtask of the steps after it and the sink) or a
// round-robin edge (rebalance) to the next operator, which starts a new
// chain (a task of its own per subtask). In one process such an edge is a
// bounded Go channel; across nodes it is a gRPC stream of the exchange,
// whose records EdgeCodec encodes.

// RecordCodec encodes the records of a key_by or rebalance edge whose
// subtasks run on different nodes (clicodec.Codec is one). It must be safe
// for concurrent use.
type RecordCodec interface {
	Append(dst []byte, r Record) ([]byte, error)
	Decode(b []byte) (Record, error)
}

// ErrBadKey is wrapped by the error of a key_by whose expression yields a
// value that is no key: nil (a missing field), an object or a list.
var ErrBadKey = errors.New("key_by: not a key")

// IsPartition reports whether the step is a key_by or a rebalance.
func (c *Compiled) IsPartition() bool { return c.Kind == KeyBy || c.Kind == Rebalance }

// Key evaluates a KeyBy step's expression on r and returns the hash of
// its value, the subtask-independent hash engine.HashOf gives (so every
// node sends a key to the same subtask). Numbers that compare equal are
// one key (42, 42.0 and a JSON 42 hash alike); a time hashes as its Unix
// nanoseconds. A value that is nil (the record lacks the field), an
// object or a list is an error wrapping ErrBadKey, handled by the step's
// on-error policy like any failure of the expression.
func (c *Compiled) Key(r Record) (uint64, error) {
	var v any
	if c.lazy != nil {
		v, _ = c.keyLazy(r) // nil: the full path below
	}
	if v == nil {
		d, err := c.decode(r)
		if err != nil {
			return 0, err
		}
		if v, err = c.expr.Run(d); err != nil {
			return 0, &Error{Step: c.Step, Err: err, Input: d.Value()}
		}
		r = d
	}
	k, err := keyValue(v)
	if err != nil {
		return 0, &Error{Step: c.Step, Err: err, Input: r.Value()}
	}
	return hashKey(k), nil
}

// hashKey is engine.HashOf's hash of k.
var hashKey = engine.HashOf(func(k any) any { return k })

// keyValue normalizes a key: integers and whole floats in int64's range
// to int64, other numbers to float64, times to Unix nanoseconds; strings
// and booleans as they are.
func keyValue(v any) (any, error) {
	switch v := v.(type) {
	case string, bool, int64:
		return v, nil
	case int:
		return int64(v), nil
	case int32:
		return int64(v), nil
	case uint64:
		if v <= math.MaxInt64 {
			return int64(v), nil
		}
		return float64(v), nil
	case float32:
		return wholeOrFloat(float64(v)), nil
	case float64:
		return wholeOrFloat(v), nil
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i, nil
		}
		f, err := v.Float64()
		if err != nil {
			return nil, fmt.Errorf("%w: number %s: %w", ErrBadKey, v, err)
		}
		return wholeOrFloat(f), nil
	case time.Time:
		return v.UnixNano(), nil
	case nil:
		return nil, fmt.Errorf("%w: the key is nil (does the record lack the field?)", ErrBadKey)
	case map[string]any:
		return nil, fmt.Errorf("%w: the key is an object; build a string, e.g. a + \"|\" + string(b)", ErrBadKey)
	case []any:
		return nil, fmt.Errorf("%w: the key is a list; build a string, e.g. join(list, \"|\")", ErrBadKey)
	}
	return nil, fmt.Errorf("%w: the key is a %T (want a string, number or boolean)", ErrBadKey, v)
}

// wholeOrFloat is f as an int64 when it is a whole number in int64's
// range (so that 42.0 and 42 are one key), else f.
func wholeOrFloat(f float64) any {
	if f == math.Trunc(f) && f >= math.MinInt64 && f < math.MaxInt64 {
		return int64(f)
	}
	return f
}

// keyLazy evaluates a KeyBy's expression on a JSON record's bytes; ok
// false: take the full path.
func (c *Compiled) keyLazy(r Record) (any, bool) {
	b, ok := lazyBytes(r)
	if !ok {
		return nil, false
	}
	var arr [8][]byte
	p := c.lazy
	vals, ok := p.lookup(r, b, &arr)
	if !ok {
		return nil, false
	}
	env, ok := p.env(vals)
	if !ok {
		return nil, false
	}
	v, err := c.expr.RunFields(r, env)
	p.putEnv(env)
	if err != nil || v == nil {
		return nil, false // the full path reports it
	}
	return v, true
}

// keyed is a record with the hash of its key on its way to a key_by
// edge; only the record crosses nodes.
type keyed struct {
	r Record
	h uint64
}

// edge partitions s (key_by: by keyed.h; rebalance: round-robin) with
// the codec, if any, and returns the stream for the next operator.
func (c *Compiled) edge(s stream.DataStream[keyed], codec RecordCodec) stream.DataStream[keyed] {
	var eo []stream.EdgeOption[keyed]
	if codec != nil {
		eo = append(eo, stream.EdgeCodecFuncs(func(dst []byte, k keyed) ([]byte, error) {
			return codec.Append(dst, k.r)
		}, func(b []byte) (keyed, error) {
			r, err := codec.Decode(b)
			return keyed{r: r}, err
		}))
	}
	if c.Kind == Rebalance {
		return stream.Rebalance(s, eo...)
	}
	return stream.KeyBy(s, func(k keyed) uint64 { return k.h }, eo...)
}

// InName is the name of the operator after a partition step's edge: it
// takes the records off the edge (the first of the new chain).
func InName(step string) string { return step + "-in" }

// keyAt is Key with the record's position named by its error.
func (c *Compiled) keyAt(r Record) (keyed, error) {
	h, err := c.Key(r)
	if err != nil {
		return keyed{}, withPos(err, r.Pos())
	}
	return keyed{r: r, h: h}, nil
}

// addPartition adds a partition step to a stream of records (AddTo).
func (c *Compiled) addPartition(in stream.DataStream[Record], codec RecordCodec, o []stream.OpOption) stream.DataStream[Record] {
	var k stream.DataStream[keyed]
	if c.Kind == KeyBy {
		k = stream.TryMap(in, c.keyAt, o...)
	} else {
		k = stream.Map(in, func(r Record) keyed { return keyed{r: r} }, o...)
	}
	return stream.Map(c.edge(k, codec), func(k keyed) Record { return k.r }, stream.Name(InName(c.Name)))
}

// addPartitionItems adds a partition step to a stream of items
// (AddWithPolicies): the step's output (records with their key, dead
// letters with none: they all go to one subtask) crosses the edge as
// records, positions and dead letters included, and is taken apart again
// after it.
func (c *Compiled) addPartitionItems(s stream.DataStream[item], codec RecordCodec, o PolicyOptions) stream.DataStream[item] {
	name := c.Name
	if c.Kind == KeyBy {
		s = stream.TryMap(s, c.policyStep(o), stream.Name(c.Name))
		name = c.Name + "-out"
	}
	k := stream.FlatMap(s, func(it item, emit func(keyed)) {
		switch {
		case it.ok:
			emit(keyed{r: registry.PutPosition(it.r, it.pos), h: it.key})
		case it.dl != nil:
			emit(keyed{r: registry.MarkDeadLetter(it.dl)})
		}
	}, stream.Name(name))
	return stream.Map(c.edge(k, codec), func(k keyed) item { return toItem(k.r) }, stream.Name(InName(c.Name)))
}

// toItem is a record (or a dead letter) as an item.
func toItem(r Record) item {
	if d, ok := registry.DeadLetterOf(r); ok {
		return item{dl: d}
	}
	return item{r: r, ok: true, pos: registry.TakePosition(r)}
}
