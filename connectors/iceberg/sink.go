package iceberg

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/iceberg-go/table"
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/sink"
)

// Sink appends records to an Iceberg table, exactly once: its writers
// write Parquet data files, and its global committer appends the files of
// each completed checkpoint in one snapshot. Make one with [NewSink]; hand
// it to the stream API as sink.NewTwoPhase[T, Committable](s) (NewSink's
// result already is).
type Sink[T any] struct {
	cat   Catalog
	ident table.Identifier
	row   func(T) (Row, error)
	cfg   config
}

// Committable is the type of the sink's committables: the data files one
// writer wrote for one checkpoint. It is exported only so that callers
// can name the sink's type parameters; its fields are not API.
type Committable = committable

var (
	_ sink.TwoPhase[int, committable]    = (*Sink[int])(nil)
	_ sink.GlobalCommitting[committable] = (*Sink[int])(nil)
)

// NewSink returns a sink that appends to the table ident ("namespace" …
// "table") of the catalog cat. row turns a record into the table's
// columns (see [Row]); an error it returns fails the job. Options: see
// [Option]; by default the table must exist.
func NewSink[T any](cat Catalog, ident table.Identifier, row func(T) (Row, error), opts ...Option) (sink.Sink[T], error) {
	s, err := New(cat, ident, row, opts...)
	if err != nil {
		return nil, err
	}
	return sink.NewTwoPhase[T, committable](s), nil
}

// New is [NewSink] without the stream API adapter, for callers that wrap
// the sink themselves.
func New[T any](cat Catalog, ident table.Identifier, row func(T) (Row, error), opts ...Option) (*Sink[T], error) {
	c := defaultConfig()
	for _, o := range opts {
		o.apply(&c)
	}
	if cat == nil {
		c.errs = append(c.errs, fmt.Errorf("%w: no catalog", ErrInvalidConfig))
	}
	if row == nil {
		c.errs = append(c.errs, fmt.Errorf("%w: no row function", ErrInvalidConfig))
	}
	if len(ident) < 2 {
		c.errs = append(c.errs, fmt.Errorf("%w: table %q: want a namespace and a name", ErrInvalidConfig, strings.Join(ident, ".")))
	}
	if c.create != nil && !c.create.infer {
		sc, err := schemaOf(c.create.columns)
		if err == nil {
			_, err = specOf(c.create.partition, sc)
		}
		if err != nil {
			c.errs = append(c.errs, err)
		}
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	return &Sink[T]{cat: cat, ident: append(table.Identifier(nil), ident...), row: row, cfg: c}, nil
}

// CreateWriter opens the catalog and the table (creating it if allowed)
// for one subtask.
func (s *Sink[T]) CreateWriter(ctx context.Context, ic sink.InitContext) (sink.CommittingWriter[T, committable], error) {
	return newWriter(ctx, s, ic)
}

// CreateCommitter returns the per-subtask committer, which has nothing to
// do: the data files are durable when they are prepared and become part
// of the table only through the global committer's snapshot.
func (s *Sink[T]) CreateCommitter(context.Context, sink.InitContext) (sink.Committer[committable], error) {
	return nopCommitter{}, nil
}

// CommittableSerializer stores committables in checkpoints as JSON.
func (s *Sink[T]) CommittableSerializer() serde.Versioned[committable] {
	return serde.JSON[committable](1)
}

// CreateGlobalCommitter returns the committer that appends each
// checkpoint's files to the table in one snapshot.
func (s *Sink[T]) CreateGlobalCommitter(ctx context.Context, ic sink.InitContext) (sink.GlobalCommitter[committable], error) {
	return newGlobalCommitter(s.cat, s.ident, s.cfg, ic.JobID(), ic.OperatorUID()), nil
}

type nopCommitter struct{}

func (nopCommitter) Commit(context.Context, []sink.CommitRequest[committable]) error { return nil }
func (nopCommitter) Close() error                                                    { return nil }
