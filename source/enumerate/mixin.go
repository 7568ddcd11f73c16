package enumerate

import (
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/source"
)

// FixedSplits supplies the enumerator half of a [source.Source] whose
// splits are known when the job starts: embed it in the connector's Source
// type, and it provides Boundedness, CreateEnumerator, RestoreEnumerator
// (both a [Fixed]) and EnumeratorStateSerializer (the unassigned splits as
// JSON, version 1, so S must marshal to JSON with its position). The
// connector adds CreateReader and SplitSerializer. A method the connector
// defines itself takes precedence over the embedded one.
type FixedSplits[S source.Split] struct {
	// Splits are the splits of a fresh start, with their start positions.
	Splits []S
	// Bound says whether the source ends (the zero value is
	// source.Bounded).
	Bound source.Boundedness
	// Assign holds the assignment options (default: pull, which needs
	// readers that ask for splits, such as readerbase readers built with
	// readerbase.PullSplits(); for readerbase's default push readers set
	// RoundRobin or Push).
	Assign []Option[S]
}

// Boundedness returns Bound.
func (f *FixedSplits[S]) Boundedness() source.Boundedness { return f.Bound }

// CreateEnumerator returns a [Fixed] holding Splits.
func (f *FixedSplits[S]) CreateEnumerator(ctx source.EnumeratorContext[S]) (source.Enumerator[S, []S], error) {
	return NewFixed(ctx, f.Splits, f.Bound, f.Assign...), nil
}

// RestoreEnumerator returns a [Fixed] holding the checkpointed unassigned
// splits.
func (f *FixedSplits[S]) RestoreEnumerator(ctx source.EnumeratorContext[S], unassigned []S) (source.Enumerator[S, []S], error) {
	return NewFixed(ctx, unassigned, f.Bound, f.Assign...), nil
}

// EnumeratorStateSerializer stores the unassigned splits as JSON, version 1.
func (f *FixedSplits[S]) EnumeratorStateSerializer() serde.Versioned[[]S] { return serde.JSON[[]S](1) }

// SplitSerializer stores a split as JSON, version 1.
func (f *FixedSplits[S]) SplitSerializer() serde.Versioned[S] { return serde.JSON[S](1) }
