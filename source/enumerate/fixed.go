package enumerate

import (
	"context"
	"slices"

	"github.com/sluice-io/sluice/source"
)

// Fixed is a [source.Enumerator] for a set of splits known when the source
// starts (a list of endpoints, a range cut into pieces). Its checkpoint
// state is the splits not yet assigned. Create it with [NewFixed] in
// CreateEnumerator, and with NewFixed(ctx, state, …) in RestoreEnumerator.
//
// The rules, for either assignment (see [Option]):
//
//   - Pull (default): a split request gets the first unassigned split. With
//     none left, a bounded source answers SignalNoMoreSplits; an unbounded
//     one keeps the request open and serves it when splits come back.
//   - Push ([Push], [RoundRobin]): splits go to registered readers as soon
//     as the enumerator has started and the reader is registered.
//   - A bounded source tells every registered reader that will get nothing
//     more SignalNoMoreSplits, once per registration.
//   - AddSplitsBack returns splits to the pool; they are assigned again
//     (pull: to the next request; push: to their owner).
//   - A reader that registers again (AddReader after a regional restart)
//     is served afresh: a push reader gets its splits again and, with
//     nothing left for it, SignalNoMoreSplits again; a pull reader asks
//     again, and its request is answered the same way.
//
// A connector whose checkpoint state is not []S embeds *Fixed and defines
// its own SnapshotState around [Fixed.Unassigned].
type Fixed[S source.Split] struct{ p *pool[S] }

var _ source.Enumerator[source.Split, []source.Split] = (*Fixed[source.Split])(nil)

// NewFixed returns an enumerator that hands out splits. b says whether the
// source is bounded (only a bounded source signals no-more-splits). The
// type parameter is inferred from ctx.
func NewFixed[S source.Split](ctx source.EnumeratorContext[S], splits []S, b source.Boundedness, opts ...Option[S]) *Fixed[S] {
	p := newPool(ctx, splits, b, opts)
	p.done = true
	return &Fixed[S]{p: p}
}

// Start assigns to the readers registered so far (push).
func (f *Fixed[S]) Start(context.Context) error { return f.p.start() }

// HandleSplitRequest answers a pull request; push enumerators ignore it.
func (f *Fixed[S]) HandleSplitRequest(subtask int, _ string) error { return f.p.request(subtask) }

// AddSplitsBack returns splits to the pool and assigns them again.
func (f *Fixed[S]) AddSplitsBack(splits []S, subtask int) error {
	return f.p.addBack(splits, subtask)
}

// AddReader registers a reader, or re-registers one after a restart.
func (f *Fixed[S]) AddReader(subtask int) error { return f.p.addReader(subtask) }

// SnapshotState returns the unassigned splits.
func (f *Fixed[S]) SnapshotState(int64) ([]S, error) { return f.Unassigned(), nil }

// Unassigned returns a copy of the splits not assigned yet, in the order
// they will be handed out.
func (f *Fixed[S]) Unassigned() []S { return slices.Clone(f.p.pending) }

// Close does nothing.
func (f *Fixed[S]) Close() error { return nil }
