package datagen

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/sluice-io/sluice/source"
)

// enumerator holds the unassigned splits. Its methods run on the
// coordinator goroutine only.
//
// Pull: each split request gets the lowest-numbered unassigned split. With
// nothing left a bounded source answers SignalNoMoreSplits; an unbounded one
// remembers the reader and serves it when splits come back (AddSplitsBack),
// so readers without splits stay idle instead of finishing. Readers of an
// unbounded source ask again after each split they get (their splits never
// finish), so all splits are handed out when there are more than readers.
//
// Push: split i goes to subtask i%parallelism once that reader is
// registered — at Start for the readers registered by then, at AddReader
// for later ones. For a bounded source, a registered reader that owns no
// unassigned split gets SignalNoMoreSplits, once per reader instance: a
// second AddReader for a subtask means the reader was replaced, and the new
// one is served afresh. Both orders of Start and the first AddReader work.
type enumerator struct {
	ctx     source.EnumeratorContext[Split]
	pending []Split // sorted by Num
	bounded bool
	push    bool
	started bool
	waiting []int        // pull, unbounded: readers whose request is open
	told    map[int]bool // push, bounded: got SignalNoMoreSplits since registering
	added   map[int]bool // push: AddReader was called for the subtask
}

func newEnumerator(ctx source.EnumeratorContext[Split], splits []Split, bounded, push bool) *enumerator {
	e := &enumerator{ctx: ctx, pending: splits, bounded: bounded, push: push, told: map[int]bool{}, added: map[int]bool{}}
	e.sortPending()
	return e
}

func (e *enumerator) sortPending() {
	slices.SortStableFunc(e.pending, func(a, b Split) int { return a.Num - b.Num })
}

func (e *enumerator) Start(context.Context) error {
	e.started = true
	if e.push {
		return e.pushPending()
	}
	return nil
}

func (e *enumerator) HandleSplitRequest(subtask int, _ string) error {
	if e.push {
		return nil // push readers do not ask; ignore stray requests
	}
	if len(e.pending) == 0 {
		if e.bounded {
			e.ctx.SignalNoMoreSplits(subtask)
		} else if !slices.Contains(e.waiting, subtask) {
			e.waiting = append(e.waiting, subtask)
		}
		return nil
	}
	sp := e.pending[0]
	e.pending = e.pending[1:]
	return e.ctx.AssignSplits(map[int][]Split{subtask: {sp}})
}

func (e *enumerator) AddSplitsBack(splits []Split, subtask int) error {
	e.pending = append(e.pending, splits...)
	e.sortPending()
	// The failed reader's open request, if any, died with it.
	e.waiting = slices.DeleteFunc(e.waiting, func(s int) bool { return s == subtask })
	if !e.started {
		return nil
	}
	if e.push {
		return e.pushPending()
	}
	return e.serveWaiting()
}

func (e *enumerator) AddReader(subtask int) error {
	if !e.push {
		return nil
	}
	if e.added[subtask] {
		delete(e.told, subtask) // a replaced reader: serve the new one afresh
	}
	e.added[subtask] = true
	if !e.started {
		return nil
	}
	return e.pushPending()
}

// serveWaiting hands pending splits to readers whose requests are open.
func (e *enumerator) serveWaiting() error {
	for len(e.waiting) > 0 && len(e.pending) > 0 {
		sub := e.waiting[0]
		e.waiting = e.waiting[1:]
		if _, ok := e.ctx.RegisteredReaders()[sub]; !ok {
			continue
		}
		if err := e.HandleSplitRequest(sub, ""); err != nil {
			return err
		}
	}
	return nil
}

// pushPending assigns every pending split whose owner is registered, then
// (bounded) tells registered readers without pending splits that no more
// will come.
func (e *enumerator) pushPending() error {
	p := e.ctx.Parallelism()
	if p < 1 {
		return fmt.Errorf("datagen: enumerator context reports parallelism %d", p)
	}
	readers := e.ctx.RegisteredReaders()
	assign := map[int][]Split{}
	owed := map[int]bool{} // readers that still own unassigned splits
	kept := e.pending[:0]
	for _, sp := range e.pending {
		owner := sp.Num % p
		// A reader told "no more splits" gets nothing more until it
		// registers again.
		if _, ok := readers[owner]; ok && !e.told[owner] {
			assign[owner] = append(assign[owner], sp)
		} else {
			kept = append(kept, sp)
			owed[owner] = true
		}
	}
	e.pending = kept
	if len(assign) > 0 {
		if err := e.ctx.AssignSplits(assign); err != nil {
			return err
		}
	}
	if !e.bounded {
		return nil
	}
	for _, sub := range slices.Sorted(maps.Keys(readers)) {
		if !owed[sub] && !e.told[sub] {
			e.told[sub] = true
			e.ctx.SignalNoMoreSplits(sub)
		}
	}
	return nil
}

func (e *enumerator) SnapshotState(int64) (EnumState, error) {
	return EnumState{Unassigned: slices.Clone(e.pending)}, nil
}

func (e *enumerator) Close() error { return nil }
