package hybrid

import (
	"errors"
	"math"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/source"
)

// Test sources shared by the package's own tests and its external tests
// (exported names in a _test file exist only in test builds).

// EndSource is a bounded datagen of the indexes [0, Count) whose enumerator
// tells where it ended: the position a factory hands over.
type EndSource struct {
	*datagen.Source[int64]
	Count int64
}

// NewEndSource returns a bounded datagen of 0 … count-1 in the given
// number of splits.
func NewEndSource(count int64, splits int, opts ...datagen.Option) *EndSource {
	opts = append([]datagen.Option{datagen.Count(count), datagen.Splits(splits)}, opts...)
	return &EndSource{Source: datagen.New(func(i int64) int64 { return i }, opts...), Count: count}
}

// EndEnumerator is EndSource's enumerator.
type EndEnumerator struct {
	source.Enumerator[datagen.Split, datagen.EnumState]
	end int64
}

// End returns the index after the last one the source emits.
func (e *EndEnumerator) End() int64 { return e.end }

func (s *EndSource) CreateEnumerator(ctx source.EnumeratorContext[datagen.Split]) (source.Enumerator[datagen.Split, datagen.EnumState], error) {
	e, err := s.Source.CreateEnumerator(ctx)
	return &EndEnumerator{Enumerator: e, end: s.Count}, err
}

func (s *EndSource) RestoreEnumerator(ctx source.EnumeratorContext[datagen.Split], st datagen.EnumState) (source.Enumerator[datagen.Split, datagen.EnumState], error) {
	e, err := s.Source.RestoreEnumerator(ctx, st)
	return &EndEnumerator{Enumerator: e, end: s.Count}, err
}

// OffsetSource is a datagen of the indexes from Start on (Count of them, or
// endless with Count 0): its splits are datagen's, shifted by Start, so
// every split carries its absolute position and restores without knowing
// Start.
type OffsetSource struct {
	*datagen.Source[int64]
	Start int64
	Known bool // Start was handed over; CreateEnumerator fails without it
	count int64
}

// NewOffsetSource returns the source; known says whether start is real (a
// factory restoring after the switch does not know it).
func NewOffsetSource(start, count int64, splits int, known bool, opts ...datagen.Option) *OffsetSource {
	opts = append([]datagen.Option{datagen.Splits(splits)}, opts...)
	if count > 0 {
		opts = append(opts, datagen.Count(count))
	}
	return &OffsetSource{Source: datagen.New(func(i int64) int64 { return i }, opts...), Start: start, Known: known, count: count}
}

// ErrPositionUnknown is what OffsetSource.CreateEnumerator returns without
// a handed-over start.
var ErrPositionUnknown = errors.New("offset source: start position unknown")

func (s *OffsetSource) CreateEnumerator(ctx source.EnumeratorContext[datagen.Split]) (source.Enumerator[datagen.Split, datagen.EnumState], error) {
	if !s.Known {
		return nil, ErrPositionUnknown
	}
	splits := s.InitialSplits()
	for i := range splits {
		splits[i].Next += s.Start
		if splits[i].End != math.MaxInt64 {
			splits[i].End += s.Start
		}
	}
	return s.Source.RestoreEnumerator(ctx, datagen.EnumState{Unassigned: splits})
}
