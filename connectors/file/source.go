package file

import (
	"errors"
	"fmt"

	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/source/readerbase"
)

// Source reads files with a [Format] (Flink's FileSource). It is
// immutable after NewSource and safe for concurrent use.
type Source[T any] struct {
	format Format[T]
	cfg    sourceConfig
	err    error
}

var _ source.Source[string, Split, EnumState] = (*Source[string])(nil)

// NewSource returns a source of the records of the files under paths:
// each path is a file, a directory (read recursively) or a glob pattern
// (filepath.Match syntax) whose matches are files or directories. Files
// ending in .gz or .zst are decompressed.
//
// Invalid options do not panic: the error is returned by [Source.Err] and
// by CreateEnumerator and CreateReader, so that the job fails at start
// with a message naming the option.
func NewSource[T any](format Format[T], paths []string, opts ...SourceOption) *Source[T] {
	s := &Source[T]{format: format, cfg: defaultSourceConfig()}
	s.cfg.paths = append([]string(nil), paths...)
	for _, o := range opts {
		if o != nil {
			o.applySource(&s.cfg)
		}
	}
	err := s.cfg.validate()
	if s.cfg.malformedAs != nil {
		if _, ok := s.cfg.malformedAs.(func(Malformed) T); !ok {
			var zero T
			err = errors.Join(err, fmt.Errorf("%w: MalformedAs makes %T records, the source's are %T", ErrInvalidConfig, s.cfg.malformedAs, zero))
		}
	}
	if s.cfg.positionAs != nil {
		if _, ok := s.cfg.positionAs.(func(T, Position) T); !ok {
			var zero T
			err = errors.Join(err, fmt.Errorf("%w: PositionAs takes %T, the source's records are %T", ErrInvalidConfig, s.cfg.positionAs, zero))
		}
	}
	if format == nil {
		err = errors.Join(err, fmt.Errorf("%w: the format is nil", ErrInvalidConfig))
	}
	s.err = err
	return s
}

// Err returns the configuration error, if any.
func (s *Source[T]) Err() error { return s.err }

// Boundedness is Bounded unless [ContinuousDiscovery] is set.
func (s *Source[T]) Boundedness() source.Boundedness {
	if s.cfg.discovery > 0 {
		return source.ContinuousUnbounded
	}
	return source.Bounded
}

// CreateEnumerator returns an enumerator that lists the paths.
func (s *Source[T]) CreateEnumerator(ctx source.EnumeratorContext[Split]) (source.Enumerator[Split, EnumState], error) {
	if s.err != nil {
		return nil, s.err
	}
	return newEnumerator(ctx, &s.cfg, s.format.Splittable(), EnumState{}), nil
}

// RestoreEnumerator returns an enumerator from a checkpointed state.
func (s *Source[T]) RestoreEnumerator(ctx source.EnumeratorContext[Split], st EnumState) (source.Enumerator[Split, EnumState], error) {
	if s.err != nil {
		return nil, s.err
	}
	return newEnumerator(ctx, &s.cfg, s.format.Splittable(), st), nil
}

// CreateReader returns a reader that asks for one split at a time.
func (s *Source[T]) CreateReader(ctx source.ReaderContext) (source.Reader[T, Split], error) {
	if s.err != nil {
		return nil, s.err
	}
	var errCount *metrics.Counter
	if g := ctx.Metrics(); g != nil {
		errCount = g.Counter(metrics.NumRecordsInErrors)
	} else {
		errCount = new(metrics.Counter)
	}
	cfg := readerbase.Config[*chunk[T], T, Split, *Split]{
		NewSplitReader: func() (readerbase.SplitReader[*chunk[T], Split], error) {
			return newSplitReader(s.format, &s.cfg, errCount), nil
		},
		Emitter: readerbase.EmitterFunc[*chunk[T], T, *Split](emit[T]),
		// The state is *Split: InitState and ToSplit copy it by default.
	}
	r, err := readerbase.New(ctx, cfg, readerbase.PullSplits())
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return r, nil
}

// SplitSerializer stores splits as JSON, version 1.
func (s *Source[T]) SplitSerializer() serde.Versioned[Split] { return splitSerde }

// EnumeratorStateSerializer stores the enumerator's state as JSON, version
// 1.
func (s *Source[T]) EnumeratorStateSerializer() serde.Versioned[EnumState] { return enumSerde }

// emit runs on the task goroutine: it emits the chunk's records and moves
// the split's position past them.
func emit[T any](c *chunk[T], out source.Output[T], st *Split) error {
	for _, v := range c.vs {
		out.Collect(v)
	}
	st.Offset, st.Skip = c.next, c.skip
	return nil
}
