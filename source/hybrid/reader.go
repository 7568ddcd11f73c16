package hybrid

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/sluice-io/sluice/source"
)

// reader delegates to the reader of the source its enumerator switched it
// to (Flink's HybridSourceReader). It is used from its subtask's goroutine
// only.
type reader[T any] struct {
	ctx    source.ReaderContext
	runCtx context.Context

	index     int // the current source; -1 before the first switch
	cur       childReader
	final     bool
	ended     bool // cur reached its end
	announced bool
	// later holds what arrived for sources after index: restored splits
	// (and splits assigned before the switch reached the reader),
	// no-more-splits signals and events.
	later map[int]*deferred
}

type deferred struct {
	splits []Split
	noMore bool
	events []source.Event
}

var _ interface {
	source.Reader[int, Split]
	source.ReaderEventHandler
	source.SplitPauser
	source.CheckpointListener
	source.CommitListener
	source.CheckpointAbortListener
} = (*reader[int])(nil)

func newReader[T any](ctx source.ReaderContext) *reader[T] {
	return &reader[T]{ctx: ctx, index: -1, later: map[int]*deferred{}}
}

func (r *reader[T]) laterFor(j int) *deferred {
	d := r.later[j]
	if d == nil {
		d = &deferred{}
		r.later[j] = d
	}
	return d
}

// Start only remembers ctx: the reader announces itself on its first
// PollNext, after the runtime added its restored splits.
func (r *reader[T]) Start(ctx context.Context) error {
	r.runCtx = ctx
	return nil
}

func (r *reader[T]) PollNext(out source.Output[T]) (source.InputStatus, error) {
	if !r.announced {
		r.announced = true
		var restored []int
		for _, j := range slices.Sorted(maps.Keys(r.later)) {
			if len(r.later[j].splits) > 0 {
				restored = append(restored, j)
			}
		}
		r.ctx.SendEventToEnumerator(readerStartedEvent{Restored: restored})
	}
	switch {
	case r.cur == nil:
		return source.NothingAvailable, nil
	case r.ended && r.final:
		return source.EndOfInput, nil
	case r.ended:
		return source.NothingAvailable, nil
	}
	st, err := r.cur.poll(out)
	if err != nil || st != source.EndOfInput {
		return st, err
	}
	r.ended = true
	r.ctx.SendEventToEnumerator(readerFinishedEvent{Source: r.index})
	if r.final {
		return source.EndOfInput, nil
	}
	// Wait for the switch to the next source.
	return source.NothingAvailable, nil
}

// Available is the current source reader's; between sources it is never
// ready (the switch arrives as a mail, after which the runtime polls).
func (r *reader[T]) Available() <-chan struct{} {
	if r.cur == nil || r.ended {
		return nil
	}
	return r.cur.available()
}

func (r *reader[T]) AddSplits(splits []Split) error {
	var now []Split
	for _, sp := range splits {
		switch {
		case sp.Source == r.index:
			now = append(now, sp)
		case sp.Source > r.index:
			d := r.laterFor(sp.Source)
			d.splits = append(d.splits, sp)
		default:
			return fmt.Errorf("hybrid: reader %d got split %s of source %d, but reads source %d", r.ctx.SubtaskIndex(), sp.SplitID(), sp.Source, r.index)
		}
	}
	if len(now) == 0 {
		return nil
	}
	if err := r.cur.addSplits(now); err != nil {
		return fmt.Errorf("hybrid: source %d: %w", r.index, err)
	}
	return nil
}

// NotifyNoMoreSplits is never sent by the hybrid's enumerator (its
// sources' signals arrive as events); it is passed to the current reader.
func (r *reader[T]) NotifyNoMoreSplits() {
	if r.cur != nil {
		r.cur.noMoreSplits()
	}
}

func (r *reader[T]) HandleSourceEvent(e source.Event) error {
	switch ev := e.(type) {
	case switchEvent:
		return r.switchTo(ev)
	case noMoreSplitsEvent:
		switch {
		case ev.Source == r.index:
			r.cur.noMoreSplits()
		case ev.Source > r.index:
			r.laterFor(ev.Source).noMore = true
		}
		return nil
	case enumeratorEvent:
		switch {
		case ev.Source == r.index:
			return r.cur.handleEvent(ev.Event)
		case ev.Source > r.index:
			d := r.laterFor(ev.Source)
			d.events = append(d.events, ev.Event)
		}
		return nil
	}
	return fmt.Errorf("hybrid: reader %d got unexpected event %T", r.ctx.SubtaskIndex(), e)
}

// switchTo closes the current source reader and creates the one of source
// ev.Source, with what arrived for it early.
func (r *reader[T]) switchTo(ev switchEvent) error {
	j := ev.Source
	if j == r.index {
		return nil
	}
	if j < r.index {
		return fmt.Errorf("hybrid: reader %d reads source %d and was switched back to source %d", r.ctx.SubtaskIndex(), r.index, j)
	}
	for i, d := range r.later {
		if i < j && len(d.splits) > 0 {
			return fmt.Errorf("hybrid: reader %d holds %d splits of source %d (first %s) and was switched past it to source %d", r.ctx.SubtaskIndex(), len(d.splits), i, d.splits[0].SplitID(), j)
		}
	}
	if r.cur != nil {
		err := r.cur.close()
		r.cur = nil
		if err != nil {
			return fmt.Errorf("hybrid: close reader of source %d: %w", r.index, err)
		}
	}
	cr, err := ev.child.createReader(r.ctx, j)
	if err != nil {
		return fmt.Errorf("hybrid: create reader of source %d: %w", j, err)
	}
	r.index, r.cur, r.final, r.ended = j, cr, ev.Final, false
	if err := cr.start(r.runCtx); err != nil {
		return fmt.Errorf("hybrid: start reader of source %d: %w", j, err)
	}
	d := r.later[j]
	maps.DeleteFunc(r.later, func(i int, _ *deferred) bool { return i <= j })
	if d == nil {
		return nil
	}
	if len(d.splits) > 0 {
		if err := cr.addSplits(d.splits); err != nil {
			return fmt.Errorf("hybrid: source %d: %w", j, err)
		}
	}
	if d.noMore {
		cr.noMoreSplits()
	}
	for _, e := range d.events {
		if err := cr.handleEvent(e); err != nil {
			return err
		}
	}
	return nil
}

// SnapshotState returns the current source reader's splits and the splits
// held for later sources (a reader restored from a checkpoint holds its
// splits until it is switched to their source).
func (r *reader[T]) SnapshotState(checkpointID int64) ([]Split, error) {
	var out []Split
	if r.cur != nil {
		ss, err := r.cur.snapshot(checkpointID)
		if err != nil {
			return nil, fmt.Errorf("hybrid: source %d: %w", r.index, err)
		}
		out = ss
	}
	for _, j := range slices.Sorted(maps.Keys(r.later)) {
		out = append(out, r.later[j].splits...)
	}
	return out, nil
}

// PauseOrResumeSplits is passed to the current source reader; it fails
// with errors.ErrUnsupported if that reader cannot pause splits.
func (r *reader[T]) PauseOrResumeSplits(pause, resume []string) error {
	if r.cur == nil {
		return nil
	}
	return r.cur.pauseOrResume(pause, resume)
}

func (r *reader[T]) NotifyCheckpointComplete(checkpointID int64) error {
	if r.cur == nil {
		return nil
	}
	return r.cur.notifyComplete(checkpointID)
}

// NotifyCheckpointCommitted tells the current source's reader (a reader
// that was switched away from misses the notices after the switch).
func (r *reader[T]) NotifyCheckpointCommitted(checkpointID int64) error {
	if r.cur == nil {
		return nil
	}
	return r.cur.notifyCommitted(checkpointID)
}

func (r *reader[T]) NotifyCheckpointAborted(checkpointID int64) error {
	if r.cur == nil {
		return nil
	}
	return r.cur.notifyAborted(checkpointID)
}

func (r *reader[T]) Close() error {
	if r.cur == nil {
		return nil
	}
	err := r.cur.close()
	r.cur = nil
	return err
}
