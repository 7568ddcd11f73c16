package datagen

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/source"
)

// BatchSize is the most records a reader emits per PollNext call.
const BatchSize = 1024

// Option configures a Source.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	count  int64
	splits int
	rate   float64
	push   bool
	ts     func(int64) int64
	now    func() time.Time
	errs   []error
}

// Count makes the source bounded with n records, the indexes 0 … n-1. The
// default, 0, makes it unbounded. A negative n is a configuration error.
func Count(n int64) Option {
	return optionFunc(func(c *config) {
		if n < 0 {
			c.errs = append(c.errs, fmt.Errorf("datagen: Count must be >= 0 (0 = unbounded), got %d", n))
			return
		}
		c.count = n
	})
}

// Splits sets the number of splits, fixed when the source is created and
// independent of the parallelism. The default is 1. Readers without a split
// stay idle (unbounded) or finish at once (bounded).
func Splits(n int) Option {
	return optionFunc(func(c *config) {
		if n < 1 {
			c.errs = append(c.errs, fmt.Errorf("datagen: Splits must be >= 1, got %d", n))
			return
		}
		c.splits = n
	})
}

// RatePerSecond limits the whole source to r records per second, split
// evenly over the parallel readers (each reader gets r/parallelism, whether
// or not it has splits). The default, 0, is unlimited.
func RatePerSecond(r float64) Option {
	return optionFunc(func(c *config) {
		if r < 0 || math.IsNaN(r) || math.IsInf(r, 0) {
			c.errs = append(c.errs, fmt.Errorf("datagen: RatePerSecond must be finite and >= 0 (0 = unlimited), got %v", r))
			return
		}
		c.rate = r
	})
}

// PushAssignment makes the enumerator push splits to readers instead of
// waiting for their requests: split i goes to subtask i%parallelism as soon
// as that reader is registered (round-robin). The default is pull
// assignment: a reader asks for a split when it starts and again each time
// it finishes one (unbounded: each time it gets one, since unbounded splits
// never finish).
func PushAssignment() Option { return optionFunc(func(c *config) { c.push = true }) }

// Timestamps attaches the event timestamp fn(index), in milliseconds since
// the epoch, to every record (through Output.CollectAt). By default records
// carry no timestamp of their own.
func Timestamps(fn func(index int64) int64) Option { return optionFunc(func(c *config) { c.ts = fn }) }

// Source is a deterministic data generator: record k is gen(k) for the
// indexes k = 0, 1, 2, …, spread over a fixed number of splits (see [Split]).
// It is Flink's DataGeneratorSource / NumberSequenceSource.
//
// A Source is immutable after New and safe for concurrent use; gen and the
// Timestamps function are called from every reader's goroutine concurrently
// and must be safe for that (pure functions of the index are).
type Source[T any] struct {
	gen func(int64) T
	cfg config
	err error
}

var _ source.Source[int, Split, EnumState] = (*Source[int])(nil)

// New returns a source whose record at index k is gen(k). Invalid options do
// not panic: the error is returned by [Source.Err] and by CreateEnumerator and
// CreateReader, so the job fails at start with a message naming the option.
func New[T any](gen func(index int64) T, opts ...Option) *Source[T] {
	s := &Source[T]{gen: gen, cfg: config{splits: 1}}
	for _, o := range opts {
		o.apply(&s.cfg)
	}
	errs := s.cfg.errs
	if gen == nil {
		errs = append(errs, errors.New("datagen: the generator function is nil"))
	}
	s.err = errors.Join(errs...)
	return s
}

// Err returns the configuration error, if any.
func (s *Source[T]) Err() error { return s.err }

// Boundedness is Bounded with Count, ContinuousUnbounded without.
func (s *Source[T]) Boundedness() source.Boundedness {
	if s.cfg.count > 0 {
		return source.Bounded
	}
	return source.ContinuousUnbounded
}

// NumSplits returns the number of splits.
func (s *Source[T]) NumSplits() int { return s.cfg.splits }

// InitialSplits returns the splits of a fresh start, ordered by number.
func (s *Source[T]) InitialSplits() []Split { return makeSplits(s.cfg.count, s.cfg.splits) }

// SplitOf returns the number of the split that emits index k, or -1 if no
// split does (k < 0, or k ≥ Count for a bounded source).
func (s *Source[T]) SplitOf(k int64) int { return splitOf(s.cfg.count, s.cfg.splits, k) }

// CreateEnumerator returns an enumerator holding every split.
func (s *Source[T]) CreateEnumerator(ctx source.EnumeratorContext[Split]) (source.Enumerator[Split, EnumState], error) {
	if s.err != nil {
		return nil, s.err
	}
	return newEnumerator(ctx, s.InitialSplits(), s.cfg.count > 0, s.cfg.push), nil
}

// RestoreEnumerator returns an enumerator holding the checkpointed
// unassigned splits.
func (s *Source[T]) RestoreEnumerator(ctx source.EnumeratorContext[Split], state EnumState) (source.Enumerator[Split, EnumState], error) {
	if s.err != nil {
		return nil, s.err
	}
	for _, sp := range state.Unassigned {
		if sp.Num < 0 || sp.Stride <= 0 {
			return nil, fmt.Errorf("datagen: restored enumerator state holds an invalid split %+v", sp)
		}
	}
	return newEnumerator(ctx, append([]Split(nil), state.Unassigned...), s.cfg.count > 0, s.cfg.push), nil
}

// CreateReader returns the reader of one subtask.
func (s *Source[T]) CreateReader(ctx source.ReaderContext) (source.Reader[T, Split], error) {
	if s.err != nil {
		return nil, s.err
	}
	return newReader(s, ctx), nil
}

// SplitSerializer is JSON, version 1.
func (s *Source[T]) SplitSerializer() serde.Versioned[Split] { return splitSerde }

// EnumeratorStateSerializer is JSON, version 1.
func (s *Source[T]) EnumeratorStateSerializer() serde.Versioned[EnumState] { return enumSerde }
