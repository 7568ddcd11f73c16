package engine

// MapNode adds an operator that applies fn to every record.
func MapNode[T, U any](g *Graph, name string, fn func(T) U) *Node {
	return g.add(&Node{name: name, kind: kindOperator, out: typedPort[U]{}, op: func(next any, _ func(error)) (any, error) {
		if f, ok := next.(*filterOp[U]); ok {
			// A map chained into a filter runs as one pass.
			return Collector[T](&mapFilterOp[T, U]{fn: fn, keep: f.fn, next: f.next}), nil
		}
		m := &mapOp[T, U]{fn: fn}
		return Collector[T](m), setCollector(&m.next, next)
	}})
}

// FilterNode adds an operator that keeps the records for which fn is true.
func FilterNode[T any](g *Graph, name string, fn func(T) bool) *Node {
	return g.add(&Node{name: name, kind: kindOperator, out: typedPort[T]{}, op: func(next any, _ func(error)) (any, error) {
		f := &filterOp[T]{fn: fn}
		return Collector[T](f), setCollector(&f.next, next)
	}})
}

// FlatMapNode adds an operator that emits zero or more records per input
// record through emit; emitted records keep the input's timestamp.
func FlatMapNode[T, U any](g *Graph, name string, fn func(v T, emit func(U))) *Node {
	return g.add(&Node{name: name, kind: kindOperator, out: typedPort[U]{}, op: func(next any, _ func(error)) (any, error) {
		f := &flatMapOp[T, U]{fn: fn}
		f.emit = f.add
		return Collector[T](f), setCollector(&f.next, next)
	}})
}

// TryMapNode adds an operator that applies fn to every record; an error
// from fn fails the task (and the job restarts per its strategy) with the
// operator's name and the error.
func TryMapNode[T, U any](g *Graph, name string, fn func(T) (U, error)) *Node {
	return g.add(&Node{name: name, kind: kindOperator, out: typedPort[U]{}, op: func(next any, fail func(error)) (any, error) {
		m := &tryMapOp[T, U]{fn: fn, fail: fail}
		return Collector[T](m), setCollector(&m.next, next)
	}})
}

// TryFilterNode adds a filter whose predicate may fail the task.
func TryFilterNode[T any](g *Graph, name string, fn func(T) (bool, error)) *Node {
	return g.add(&Node{name: name, kind: kindOperator, out: typedPort[T]{}, op: func(next any, fail func(error)) (any, error) {
		f := &tryFilterOp[T]{fn: fn, fail: fail}
		return Collector[T](f), setCollector(&f.next, next)
	}})
}

type tryMapOp[T, U any] struct {
	fn   func(T) (U, error)
	fail func(error)
	next Collector[U]
	out  []elem[U]
}

// Collect maps the batch; on the first error it hands on the records
// before it, fails the task, and drops the rest (the task is failing).
func (m *tryMapOp[T, U]) Collect(recs []elem[T]) {
	out := m.out[:0]
	for i := range recs {
		u, err := m.fn(recs[i].v)
		if err != nil {
			m.fail(err)
			break
		}
		out = append(out, elem[U]{u, recs[i].ts})
	}
	if len(out) > 0 {
		m.next.Collect(out)
	}
	clear(out)
	m.out = out[:0]
}

type tryFilterOp[T any] struct {
	fn   func(T) (bool, error)
	fail func(error)
	next Collector[T]
	out  []elem[T]
}

func (f *tryFilterOp[T]) Collect(recs []elem[T]) {
	out := f.out[:0]
	for i := range recs {
		ok, err := f.fn(recs[i].v)
		if err != nil {
			f.fail(err)
			break
		}
		if ok {
			out = append(out, recs[i])
		}
	}
	if len(out) > 0 {
		f.next.Collect(out)
	}
	clear(out)
	f.out = out[:0]
}

type mapOp[T, U any] struct {
	fn   func(T) U
	next Collector[U]
	out  []elem[U]
}

func (m *mapOp[T, U]) Collect(recs []elem[T]) {
	out := m.out[:0]
	if cap(out) < len(recs) {
		out = make([]elem[U], 0, len(recs))
	}
	out = out[:len(recs)]
	fn := m.fn
	for i := range recs {
		out[i] = elem[U]{fn(recs[i].v), recs[i].ts}
	}
	m.next.Collect(out)
	clear(out) // let the garbage collector have what the records point to
	m.out = out[:0]
}

type filterOp[T any] struct {
	fn   func(T) bool
	next Collector[T]
	out  []elem[T]
}

func (f *filterOp[T]) Collect(recs []elem[T]) {
	out := f.out[:0]
	fn := f.fn
	for i := range recs {
		if fn(recs[i].v) {
			out = append(out, recs[i])
		}
	}
	if len(out) > 0 {
		f.next.Collect(out)
	}
	clear(out)
	f.out = out[:0]
}

// mapFilterOp is a map followed by a filter in one pass over the batch.
type mapFilterOp[T, U any] struct {
	fn   func(T) U
	keep func(U) bool
	next Collector[U]
	out  []elem[U]
}

func (m *mapFilterOp[T, U]) Collect(recs []elem[T]) {
	out := m.out[:0]
	if cap(out) < len(recs) {
		out = make([]elem[U], 0, len(recs))
	}
	out = out[:len(recs)]
	fn, keep, n := m.fn, m.keep, 0
	for i := range recs {
		if u := fn(recs[i].v); keep(u) {
			out[n] = elem[U]{u, recs[i].ts}
			n++
		}
	}
	if n > 0 {
		m.next.Collect(out[:n])
	}
	clear(out[:n])
	m.out = out[:0]
}

// flatMapFlush bounds the output batch of a flat map that emits much.
const flatMapFlush = 4096

type flatMapOp[T, U any] struct {
	fn   func(T, func(U))
	next Collector[U]
	emit func(U)
	ts   int64
	out  []elem[U]
}

func (f *flatMapOp[T, U]) Collect(recs []elem[T]) {
	for i := range recs {
		f.ts = recs[i].ts
		f.fn(recs[i].v, f.emit)
	}
	f.flush()
}

func (f *flatMapOp[T, U]) flush() {
	if len(f.out) > 0 {
		f.next.Collect(f.out)
	}
	clear(f.out)
	f.out = f.out[:0]
}

func (f *flatMapOp[T, U]) add(u U) {
	f.out = append(f.out, elem[U]{u, f.ts})
	if len(f.out) >= flatMapFlush {
		f.flush()
	}
}
