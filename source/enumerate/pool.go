package enumerate

import (
	"fmt"
	"maps"
	"slices"

	"github.com/sluice-io/sluice/source"
)

// Option configures how an enumerator assigns its splits. The default is
// pull assignment: a reader gets the first unassigned split when it asks
// ([source.ReaderContext.SendSplitRequest]).
type Option[S source.Split] func(*pool[S])

// Push makes the enumerator push each split to the reader owner(split,
// parallelism) as soon as that reader is registered, instead of waiting
// for requests; split requests are then ignored. owner must return a
// subtask in [0, parallelism); a split returned by [Fixed.AddSplitsBack]
// goes back to the same owner. The type parameter is inferred from owner.
func Push[S source.Split](owner func(split S, parallelism int) int) Option[S] {
	return func(p *pool[S]) { p.push, p.owner = true, owner }
}

// RoundRobin makes the enumerator push splits to the registered readers in
// turn (the next split to the next reader by subtask, wrapping around), as
// soon as there are registered readers. A split returned by
// [Fixed.AddSplitsBack] goes to whichever reader is next. Split requests
// are ignored.
func RoundRobin[S source.Split]() Option[S] {
	return func(p *pool[S]) { p.push, p.owner = true, nil }
}

// SortBy keeps the unassigned splits ordered by cmp (as slices.SortFunc
// orders), so pull requests get the smallest split first and splits that
// come back take their place again. By default the splits keep the order
// they were given or discovered in, and splits that come back go first.
func SortBy[S source.Split](cmp func(a, b S) int) Option[S] {
	return func(p *pool[S]) { p.cmp = cmp }
}

// pool is the assignment logic that Fixed and Discovered share: the
// unassigned splits and the rules for handing them out. Its methods run on
// the coordinator goroutine only.
type pool[S source.Split] struct {
	ctx     source.EnumeratorContext[S]
	pending []S
	bounded bool
	done    bool // every split is known (bounded: no-more-splits may be sent)
	started bool

	push  bool
	owner func(S, int) int // push; nil means round-robin
	next  int              // round-robin: the subtask to try first
	cmp   func(a, b S) int

	waiting []int        // pull: readers whose request is open, in order
	told    map[int]bool // got SignalNoMoreSplits since it last registered
	added   map[int]bool // AddReader was called for the subtask
}

func newPool[S source.Split](ctx source.EnumeratorContext[S], splits []S, b source.Boundedness, opts []Option[S]) *pool[S] {
	p := &pool[S]{ctx: ctx, pending: slices.Clone(splits), bounded: b == source.Bounded, told: map[int]bool{}, added: map[int]bool{}}
	for _, o := range opts {
		o(p)
	}
	p.sort()
	return p
}

func (p *pool[S]) sort() {
	if p.cmp != nil {
		slices.SortStableFunc(p.pending, p.cmp)
	}
}

func (p *pool[S]) start() error {
	p.started = true
	return p.serve()
}

// exhausted reports whether a bounded source has nothing more to hand out.
func (p *pool[S]) exhausted() bool { return p.bounded && p.done && len(p.pending) == 0 }

func (p *pool[S]) signal(subtask int) {
	p.told[subtask] = true
	p.ctx.SignalNoMoreSplits(subtask)
}

func (p *pool[S]) request(subtask int) error {
	if p.push {
		return nil // push readers do not ask; ignore stray requests
	}
	if len(p.pending) > 0 {
		sp := p.pending[0]
		p.pending = p.pending[1:]
		return p.ctx.AssignSplits(map[int][]S{subtask: {sp}})
	}
	if p.exhausted() {
		p.signal(subtask)
		return nil
	}
	if !slices.Contains(p.waiting, subtask) {
		p.waiting = append(p.waiting, subtask)
	}
	return nil
}

func (p *pool[S]) addBack(splits []S, subtask int) error {
	p.pending = append(slices.Clone(splits), p.pending...)
	p.sort()
	// The failed reader's open request, if any, died with it.
	p.waiting = slices.DeleteFunc(p.waiting, func(s int) bool { return s == subtask })
	return p.serve()
}

func (p *pool[S]) addReader(subtask int) error {
	if p.added[subtask] {
		delete(p.told, subtask) // a replaced reader: serve the new one afresh
	}
	p.added[subtask] = true
	if !p.started {
		return nil
	}
	if !p.push {
		// A pull reader asks when it needs a split, a new instance too;
		// its request gets a split or, with the pool exhausted,
		// no-more-splits. Signalling here, before it asks, would reach
		// a reader that may still be working through restored splits
		// (source/hybrid relies on answering requests only).
		return nil
	}
	return p.serve()
}

// add appends newly discovered splits.
func (p *pool[S]) add(splits []S) {
	p.pending = append(p.pending, splits...)
	p.sort()
}

// serve hands out what it can: pending splits to waiting readers (pull)
// or to their owners (push), then no-more-splits to the readers that will
// get nothing more.
func (p *pool[S]) serve() error {
	if !p.started {
		return nil
	}
	if p.push {
		return p.pushPending()
	}
	waiting := p.waiting
	p.waiting = nil
	readers := p.ctx.RegisteredReaders()
	for i, sub := range waiting {
		if _, ok := readers[sub]; !ok {
			continue // gone; it asks again when it registers again
		}
		if len(p.pending) == 0 && !p.exhausted() {
			p.waiting = append(p.waiting, waiting[i:]...)
			break
		}
		if err := p.request(sub); err != nil {
			return err
		}
	}
	return nil
}

func (p *pool[S]) pushPending() error {
	n := p.ctx.Parallelism()
	if n < 1 {
		return fmt.Errorf("enumerate: enumerator context reports parallelism %d", n)
	}
	readers := p.ctx.RegisteredReaders()
	eligible := func(sub int) bool { _, ok := readers[sub]; return ok && !p.told[sub] }
	subs := slices.Sorted(maps.Keys(readers))
	assign := map[int][]S{}
	owed := map[int]bool{} // readers that still own unassigned splits
	kept := p.pending[:0]
	for _, sp := range p.pending {
		owner := -1
		if p.owner != nil {
			owner = p.owner(sp, n)
			if owner < 0 || owner >= n {
				return fmt.Errorf("enumerate: owner of split %q is subtask %d, not in [0, %d)", sp.SplitID(), owner, n)
			}
		} else {
			for range subs {
				s := subs[p.next%len(subs)]
				p.next = (p.next + 1) % len(subs)
				if eligible(s) {
					owner = s
					break
				}
			}
		}
		if owner >= 0 && eligible(owner) {
			assign[owner] = append(assign[owner], sp)
		} else {
			kept = append(kept, sp)
			owed[owner] = true
		}
	}
	clear(p.pending[len(kept):])
	p.pending = kept
	if len(assign) > 0 {
		if err := p.ctx.AssignSplits(assign); err != nil {
			return err
		}
	}
	if !p.bounded || !p.done || (p.owner == nil && len(p.pending) > 0) {
		return nil
	}
	for _, sub := range subs {
		if !owed[sub] && !p.told[sub] {
			p.signal(sub)
		}
	}
	return nil
}
