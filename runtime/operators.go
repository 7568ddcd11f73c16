package runtime

// MapNode adds an operator that applies fn to every record.
func MapNode[T, U any](g *Graph, name string, fn func(T) U) *Node {
	return g.add(&Node{name: name, kind: kindOperator, out: typedPort[U]{}, op: func(next any) (any, error) {
		m := &mapOp[T, U]{fn: fn}
		return Collector[T](m), setCollector(&m.next, next)
	}})
}

// FilterNode adds an operator that keeps the records for which fn is true.
func FilterNode[T any](g *Graph, name string, fn func(T) bool) *Node {
	return g.add(&Node{name: name, kind: kindOperator, out: typedPort[T]{}, op: func(next any) (any, error) {
		f := &filterOp[T]{fn: fn}
		return Collector[T](f), setCollector(&f.next, next)
	}})
}

// FlatMapNode adds an operator that emits zero or more records per input
// record through emit; emitted records keep the input's timestamp.
func FlatMapNode[T, U any](g *Graph, name string, fn func(v T, emit func(U))) *Node {
	return g.add(&Node{name: name, kind: kindOperator, out: typedPort[U]{}, op: func(next any) (any, error) {
		f := &flatMapOp[T, U]{fn: fn}
		f.emit = func(u U) { f.next.Collect(u, f.ts) }
		return Collector[T](f), setCollector(&f.next, next)
	}})
}

type mapOp[T, U any] struct {
	fn   func(T) U
	next Collector[U]
}

func (m *mapOp[T, U]) Collect(v T, ts int64) { m.next.Collect(m.fn(v), ts) }

type filterOp[T any] struct {
	fn   func(T) bool
	next Collector[T]
}

func (f *filterOp[T]) Collect(v T, ts int64) {
	if f.fn(v) {
		f.next.Collect(v, ts)
	}
}

type flatMapOp[T, U any] struct {
	fn   func(T, func(U))
	next Collector[U]
	emit func(U)
	ts   int64
}

func (f *flatMapOp[T, U]) Collect(v T, ts int64) {
	f.ts = ts
	f.fn(v, f.emit)
}
