package hybrid

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/sluice-io/sluice/source"
)

// enumerator runs the enumerator of the current source and switches to the
// next once every reader has read the current one to its end (Flink's
// HybridSourceSplitEnumerator). Its methods run on the coordinator
// goroutine only.
//
// Per reader it tracks the source the reader was last switched to
// (readerAt). A reader announces itself when it starts, with the sources
// it holds restored splits of; the enumerator switches it to the earliest
// source it still has work in — normally the current one, an earlier one
// after a regional restart that found the enumerator already past the
// reader's checkpoint. None of this is checkpointed: after a restore every
// reader announces itself again.
type enumerator[T any] struct {
	src     *Source[T]
	ctx     source.EnumeratorContext[Split]
	restore *EnumState
	runCtx  context.Context

	cur      int
	child    *childContext // of the current source; nil before Start
	enum     childEnum
	switched map[int]child // sources made so far, by index

	readerAt map[int]int             // subtask → source it was switched to
	need     map[int]map[int]bool    // subtask → earlier sources it holds restored splits of
	finished map[int]bool            // readers that finished the current source
	pending  map[int]map[int][]Split // subtask → source → splits added back after their source ended
}

var _ interface {
	source.Enumerator[Split, EnumState]
	source.EnumeratorEventHandler
	source.CheckpointListener
	source.CheckpointAbortListener
} = (*enumerator[int])(nil)

func newEnumerator[T any](src *Source[T], ctx source.EnumeratorContext[Split], restore *EnumState) *enumerator[T] {
	e := &enumerator[T]{src: src, ctx: ctx, restore: restore, switched: map[int]child{},
		readerAt: map[int]int{}, need: map[int]map[int]bool{}, finished: map[int]bool{}, pending: map[int]map[int][]Split{}}
	if restore != nil {
		e.cur = restore.Source
	}
	return e
}

func (e *enumerator[T]) Start(ctx context.Context) error {
	e.runCtx = ctx
	st := e.restore
	e.restore = nil
	if st != nil {
		p := max(e.ctx.Parallelism(), 1)
		for i, sp := range st.Pending {
			e.addPending(i%p, sp)
		}
	}
	return e.open(e.cur, nil, st)
}

func (e *enumerator[T]) addPending(subtask int, sp Split) {
	if e.pending[subtask] == nil {
		e.pending[subtask] = map[int][]Split{}
	}
	e.pending[subtask][sp.Source] = append(e.pending[subtask][sp.Source], sp)
}

// sourceOf returns source i, making it with its factory the first time.
func (e *enumerator[T]) sourceOf(i int, prev any) (child, error) {
	if c, ok := e.switched[i]; ok {
		return c, nil
	}
	en := e.src.entries[i]
	c := en.child
	if c == nil {
		made, err := en.factory(switchContext{index: i, prev: prev})
		if err != nil {
			return nil, fmt.Errorf("hybrid: factory of source %d: %w", i, err)
		}
		if made.c == nil {
			return nil, fmt.Errorf("hybrid: factory of source %d returned the zero Child", i)
		}
		if b := made.Boundedness(); b != en.boundedness {
			return nil, fmt.Errorf("hybrid: factory of source %d made a %v source, declared %v", i, b, en.boundedness)
		}
		c = made.c
	}
	e.switched[i] = c
	return c, nil
}

// open makes and starts the enumerator of source i (restored from st if
// not nil).
func (e *enumerator[T]) open(i int, prev any, st *EnumState) error {
	c, err := e.sourceOf(i, prev)
	if err != nil {
		return err
	}
	cc := &childContext{index: i, real: e.ctx}
	cc.readers = func() map[int]source.ReaderInfo { return e.readersAt(i) }
	cc.ctx, cc.cancel = context.WithCancel(e.runCtx)
	ce, err := c.createEnumerator(cc, st)
	if err != nil {
		cc.cancel()
		return fmt.Errorf("hybrid: create enumerator of source %d: %w", i, err)
	}
	e.cur, e.child, e.enum = i, cc, ce
	if err := ce.start(cc.ctx); err != nil {
		return fmt.Errorf("hybrid: start enumerator of source %d: %w", i, err)
	}
	return nil
}

// readersAt returns the registered readers that were switched to source i:
// a source's enumerator sees only its own readers.
func (e *enumerator[T]) readersAt(i int) map[int]source.ReaderInfo {
	all := e.ctx.RegisteredReaders()
	maps.DeleteFunc(all, func(sub int, _ source.ReaderInfo) bool {
		at, ok := e.readerAt[sub]
		return !ok || at != i
	})
	return all
}

func (e *enumerator[T]) closeCurrent() error {
	if e.enum == nil {
		return nil
	}
	e.child.cancel()
	err := e.enum.close()
	e.enum, e.child = nil, nil
	if err != nil {
		return fmt.Errorf("hybrid: close enumerator of source %d: %w", e.cur, err)
	}
	return nil
}

func (e *enumerator[T]) HandleSplitRequest(subtask int, location string) error {
	// A request from a reader of an earlier source (one catching up on
	// splits given back) has no enumerator to go to; it got its
	// no-more-splits already.
	if at, ok := e.readerAt[subtask]; !ok || at != e.cur {
		return nil
	}
	return e.enum.handleSplitRequest(subtask, location)
}

// AddSplitsBack gives splits of the current source to its enumerator and
// keeps those of earlier sources until the reader comes back (Flink's
// pendingSplits): the reader is then switched to each such source first.
func (e *enumerator[T]) AddSplitsBack(splits []Split, subtask int) error {
	var current []Split
	for _, sp := range splits {
		switch {
		case sp.Source == e.cur:
			current = append(current, sp)
		case sp.Source >= 0 && sp.Source < e.cur:
			e.addPending(subtask, sp)
		default:
			return fmt.Errorf("hybrid: split %s given back, but the hybrid is at source %d", sp.SplitID(), e.cur)
		}
	}
	if len(current) == 0 {
		return nil
	}
	return e.enum.addSplitsBack(current, subtask)
}

// AddReader forgets what it knew of the subtask's reader: a new reader
// announces itself when it starts.
func (e *enumerator[T]) AddReader(subtask int) error {
	delete(e.readerAt, subtask)
	delete(e.need, subtask)
	delete(e.finished, subtask)
	return nil
}

func (e *enumerator[T]) HandleSourceEvent(subtask int, ev source.Event) error {
	switch ev := ev.(type) {
	case readerStartedEvent:
		return e.readerStarted(subtask, ev.Restored)
	case readerFinishedEvent:
		return e.readerFinished(subtask, ev.Source)
	case readerEvent:
		// An event of a reader of another source has no enumerator to go to.
		if at, ok := e.readerAt[subtask]; ok && at == e.cur && ev.Source == e.cur {
			return e.enum.handleEvent(subtask, ev.Event)
		}
		return nil
	}
	return fmt.Errorf("hybrid: unexpected event %T from reader %d", ev, subtask)
}

// readerStarted switches a new reader to the first source it has work in.
func (e *enumerator[T]) readerStarted(subtask int, restored []int) error {
	delete(e.readerAt, subtask)
	delete(e.need, subtask)
	delete(e.finished, subtask)
	for _, j := range restored {
		switch {
		case j > e.cur:
			return fmt.Errorf("hybrid: reader %d restored splits of source %d, but the hybrid is at source %d: the checkpoint is inconsistent", subtask, j, e.cur)
		case j >= 0 && j < e.cur:
			if e.need[subtask] == nil {
				e.need[subtask] = map[int]bool{}
			}
			e.need[subtask][j] = true
		}
	}
	return e.advance(subtask, -1)
}

func (e *enumerator[T]) readerFinished(subtask, k int) error {
	at, known := e.readerAt[subtask]
	switch {
	case !known || k < at:
		return nil // a late message of an earlier reader or source
	case k > at:
		return fmt.Errorf("hybrid: reader %d finished source %d, but it was switched to source %d", subtask, k, at)
	case at < e.cur:
		return e.advance(subtask, at)
	}
	e.finished[subtask] = true
	if e.cur+1 >= len(e.src.entries) {
		return nil
	}
	// Switch once every reader finished; a reader that is down (not
	// registered) has not.
	registered := e.ctx.RegisteredReaders()
	for sub := range e.ctx.Parallelism() {
		if _, ok := registered[sub]; !ok || !e.finished[sub] {
			return nil
		}
	}
	return e.switchToNext()
}

// advance switches a reader that is done with source after (-1: a new
// reader) to the next source it has work in: an earlier source it holds
// restored or given-back splits of, else the current one.
func (e *enumerator[T]) advance(subtask, after int) error {
	next := e.cur
	for j := after + 1; j < e.cur; j++ {
		if e.need[subtask][j] || len(e.pending[subtask][j]) > 0 {
			next = j
			break
		}
	}
	return e.switchReader(subtask, next)
}

// switchReader tells a reader to read source j. For an earlier source
// (whose enumerator is gone) it also hands over the splits given back and
// says that no more will come; for the current one it registers the reader
// with the source's enumerator.
func (e *enumerator[T]) switchReader(subtask, j int) error {
	c, err := e.sourceOf(j, nil)
	if err != nil {
		return err
	}
	e.readerAt[subtask] = j
	delete(e.need[subtask], j)
	e.ctx.SendEventToReader(subtask, switchEvent{Source: j, child: c, Final: j == len(e.src.entries)-1})
	if j == e.cur {
		return e.enum.addReader(subtask)
	}
	if ps := e.pending[subtask][j]; len(ps) > 0 {
		delete(e.pending[subtask], j)
		if err := e.ctx.AssignSplits(map[int][]Split{subtask: ps}); err != nil {
			return err
		}
	}
	e.ctx.SendEventToReader(subtask, noMoreSplitsEvent{Source: j})
	return nil
}

// switchToNext closes the current source's enumerator, makes the next
// source (a factory gets the closed enumerator) and switches every reader
// to it.
func (e *enumerator[T]) switchToNext() error {
	prev := e.enum.raw()
	if err := e.closeCurrent(); err != nil {
		return err
	}
	clear(e.finished)
	if err := e.open(e.cur+1, prev, nil); err != nil {
		return err
	}
	for sub := range e.ctx.Parallelism() {
		if err := e.switchReader(sub, e.cur); err != nil {
			return err
		}
	}
	return nil
}

func (e *enumerator[T]) SnapshotState(checkpointID int64) (EnumState, error) {
	if e.enum == nil {
		return EnumState{}, errors.New("hybrid: snapshot of an enumerator that is not running")
	}
	v, st, err := e.enum.snapshot(checkpointID)
	if err != nil {
		return EnumState{}, fmt.Errorf("hybrid: snapshot enumerator of source %d: %w", e.cur, err)
	}
	out := EnumState{Source: e.cur, Version: v, State: st}
	for _, sub := range slices.Sorted(maps.Keys(e.pending)) {
		for _, j := range slices.Sorted(maps.Keys(e.pending[sub])) {
			out.Pending = append(out.Pending, e.pending[sub][j]...)
		}
	}
	return out, nil
}

func (e *enumerator[T]) NotifyCheckpointComplete(checkpointID int64) error {
	if e.enum == nil {
		return nil
	}
	return e.enum.notifyComplete(checkpointID)
}

func (e *enumerator[T]) NotifyCheckpointAborted(checkpointID int64) error {
	if e.enum == nil {
		return nil
	}
	return e.enum.notifyAborted(checkpointID)
}

func (e *enumerator[T]) Close() error { return e.closeCurrent() }
