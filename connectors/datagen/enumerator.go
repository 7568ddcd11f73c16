package datagen

import (
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/source/enumerate"
)

// enumerator holds the unassigned splits, ordered by number; the rules are
// enumerate.Fixed's. Its methods run on the coordinator goroutine only.
//
// Pull: each split request gets the lowest-numbered unassigned split. With
// nothing left a bounded source answers SignalNoMoreSplits; an unbounded one
// keeps the request open and serves it when splits come back
// (AddSplitsBack), so readers without splits stay idle instead of
// finishing. Readers of an unbounded source ask again after each split they
// get (their splits never finish), so all splits are handed out when there
// are more than readers.
//
// Push: split i goes to subtask i%parallelism once that reader is
// registered. For a bounded source, a registered reader that owns no
// unassigned split gets SignalNoMoreSplits, once per reader instance: a
// second AddReader for a subtask means the reader was replaced, and the new
// one is served afresh.
type enumerator struct {
	*enumerate.Fixed[Split]
}

func newEnumerator(ctx source.EnumeratorContext[Split], splits []Split, bounded, push bool) *enumerator {
	b := source.ContinuousUnbounded
	if bounded {
		b = source.Bounded
	}
	opts := []enumerate.Option[Split]{enumerate.SortBy(func(a, b Split) int { return a.Num - b.Num })}
	if push {
		opts = append(opts, enumerate.Push(func(s Split, parallelism int) int { return s.Num % parallelism }))
	}
	return &enumerator{enumerate.NewFixed(ctx, splits, b, opts...)}
}

// SnapshotState returns the unassigned splits in datagen's state format.
func (e *enumerator) SnapshotState(int64) (EnumState, error) {
	return EnumState{Unassigned: e.Unassigned()}, nil
}
