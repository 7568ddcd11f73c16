package hybrid

import (
	"errors"
	"fmt"

	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/source"
)

// Child is one source of a hybrid chain, with its split and
// enumerator-state types hidden. Make one with [Of]; the zero Child is
// invalid.
type Child[T any] struct{ c child }

// Of makes a [Child] of a source.
func Of[T any, S source.Split, E any](src source.Source[T, S, E]) Child[T] {
	if src == nil {
		return Child[T]{}
	}
	return Child[T]{c: &typedChild[T, S, E]{src: src}}
}

// Boundedness is the wrapped source's.
func (c Child[T]) Boundedness() source.Boundedness {
	if c.c == nil {
		return source.Bounded
	}
	return c.c.boundedness()
}

// Source returns the wrapped source.Source[T, S, E], or nil for the zero
// Child.
func (c Child[T]) Source() any {
	if c.c == nil {
		return nil
	}
	return c.c.source()
}

// SwitchContext is what a [Factory] gets when the hybrid switches to its
// source (Flink's SourceSwitchContext).
type SwitchContext interface {
	// Index is the position of the source being made, from 1 (a factory
	// never makes the first source).
	Index() int
	// PreviousEnumerator returns the enumerator of the source before, as
	// that source's CreateEnumerator or RestoreEnumerator returned it,
	// already closed: read the end position it recorded (with a type
	// assertion to the enumerator's type or an interface of it) to start
	// the new source there. It is nil when the hybrid restores the source
	// from a checkpoint taken after the switch: the start position is then
	// in the restored enumerator state and splits, and the returned source
	// is only used to restore its enumerator and to create readers.
	PreviousEnumerator() any
}

type switchContext struct {
	index int
	prev  any
}

func (c switchContext) Index() int              { return c.index }
func (c switchContext) PreviousEnumerator() any { return c.prev }

// Factory makes a source of the chain when the hybrid switches to it,
// typically from the end position of the previous one (Flink's
// SourceFactory). It runs on the coordinator goroutine and must not block
// on I/O. It may be called more than once for the same position: at the
// switch, and again (with a nil PreviousEnumerator) after each restore
// from a later checkpoint.
type Factory[T any] func(SwitchContext) (Child[T], error)

type entry[T any] struct {
	child       child
	factory     Factory[T]
	boundedness source.Boundedness
}

// Builder assembles a hybrid source; see [New].
type Builder[T any] struct {
	entries []entry[T]
	errs    []error
}

// New starts a chain of sources with its first, fixed source. The readers
// read it to its end, then the next one, and so on.
func New[T any](first Child[T]) *Builder[T] {
	return (&Builder[T]{}).AddSource(first)
}

// AddSource appends a source with a fixed start position, known when the
// job is built.
func (b *Builder[T]) AddSource(c Child[T]) *Builder[T] {
	if c.c == nil {
		b.errs = append(b.errs, fmt.Errorf("hybrid: source %d is the zero Child; make it with Of", len(b.entries)))
		b.entries = append(b.entries, entry[T]{})
		return b
	}
	b.entries = append(b.entries, entry[T]{child: c.c, boundedness: c.Boundedness()})
	return b
}

// AddSourceFactory appends a source that is made when the hybrid switches
// to it, by f, which gets the previous source's enumerator to hand over a
// position. boundedness is the boundedness of the sources f makes (it must
// be known before f runs); a source of another boundedness fails the job.
func (b *Builder[T]) AddSourceFactory(f Factory[T], boundedness source.Boundedness) *Builder[T] {
	if f == nil {
		b.errs = append(b.errs, fmt.Errorf("hybrid: factory of source %d is nil", len(b.entries)))
	}
	b.entries = append(b.entries, entry[T]{factory: f, boundedness: boundedness})
	return b
}

// ErrInvalidChain is wrapped by the errors of [Builder.Build].
var ErrInvalidChain = errors.New("hybrid: invalid chain of sources")

// Build returns the hybrid source. Every source but the last must be
// bounded; the hybrid's boundedness is the last source's.
func (b *Builder[T]) Build() (*Source[T], error) {
	errs := append([]error(nil), b.errs...)
	if len(b.entries) == 0 {
		errs = append(errs, errors.New("hybrid: no sources; start the chain with New"))
	}
	for i, e := range b.entries[:max(len(b.entries)-1, 0)] {
		if e.boundedness != source.Bounded && (e.child != nil || e.factory != nil) {
			errs = append(errs, fmt.Errorf("hybrid: source %d is %v; only the last source may be unbounded", i, e.boundedness))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidChain, err)
	}
	return &Source[T]{entries: append([]entry[T](nil), b.entries...)}, nil
}

// Source is a hybrid source: a chain of sources read one after the other
// (Flink's HybridSource, FLIP-150). It implements
// source.Source[T, Split, EnumState]; build it with [New].
type Source[T any] struct {
	entries []entry[T]
}

var _ source.Source[int, Split, EnumState] = (*Source[int])(nil)

// NumSources returns the length of the chain.
func (s *Source[T]) NumSources() int { return len(s.entries) }

// Boundedness is the last source's.
func (s *Source[T]) Boundedness() source.Boundedness {
	return s.entries[len(s.entries)-1].boundedness
}

// CreateEnumerator returns an enumerator that starts with the first source.
func (s *Source[T]) CreateEnumerator(ctx source.EnumeratorContext[Split]) (source.Enumerator[Split, EnumState], error) {
	return newEnumerator(s, ctx, nil), nil
}

// RestoreEnumerator returns an enumerator that continues with the source
// and enumerator state of a checkpoint.
func (s *Source[T]) RestoreEnumerator(ctx source.EnumeratorContext[Split], state EnumState) (source.Enumerator[Split, EnumState], error) {
	if state.Source < 0 || state.Source >= len(s.entries) {
		return nil, fmt.Errorf("hybrid: restored state is at source %d, but the chain has %d sources", state.Source, len(s.entries))
	}
	for _, sp := range state.Pending {
		if sp.Source < 0 || sp.Source >= state.Source {
			return nil, fmt.Errorf("hybrid: restored state holds split %s of source %d, which is not before the current source %d", sp.SplitID(), sp.Source, state.Source)
		}
	}
	return newEnumerator(s, ctx, &state), nil
}

// CreateReader returns the reader of one subtask. It creates the reader of
// a source when the enumerator switches it there.
func (s *Source[T]) CreateReader(ctx source.ReaderContext) (source.Reader[T, Split], error) {
	return newReader[T](ctx), nil
}

// SplitSerializer is version 1 of a compact binary form.
func (s *Source[T]) SplitSerializer() serde.Versioned[Split] { return splitSerde }

// EnumeratorStateSerializer is version 1 of a compact binary form.
func (s *Source[T]) EnumeratorStateSerializer() serde.Versioned[EnumState] { return stateSerde }
