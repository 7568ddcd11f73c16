package readerbase

import (
	"context"
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"github.com/sluice-io/sluice/source"
)

// task is work the task goroutine hands to a fetcher: exactly one of add
// or (pause, resume) is set.
type task[S source.Split] struct {
	add           []S
	pause, resume []string
}

// fetcher runs one SplitReader on its own goroutine (Flink's SplitFetcher):
// it applies tasks, calls Fetch while it has unpaused splits, and puts
// non-empty batches into the handover queue. It sits blocked on its signal
// channel while it has nothing to fetch.
//
// The task goroutine talks to a running fetcher only through enqueue.
// The fetcher goroutine owns sr and assigned.
type fetcher[E any, S source.Split] struct {
	id           int
	sr           SplitReader[E, S]
	pauser       source.SplitPauser // sr, if it implements it
	h            *handover[E]
	exitWhenIdle bool // FetcherPerSplit: end once the split is finished

	signal chan struct{} // capacity 1: tasks are pending

	mu    sync.Mutex
	tasks []task[S]
	// wake cancels fctx with ErrWakeUp; nil before run starts and after
	// it ended.
	wake context.CancelCauseFunc

	// Owned by the fetcher goroutine. fctx is the ctx of the current or
	// next Fetch; it is replaced (under mu, with wake) only by the fetcher
	// goroutine, which reads it without mu.
	fctx     context.Context
	assigned map[string]bool // split id → paused
}

func newFetcher[E any, S source.Split](id int, sr SplitReader[E, S], h *handover[E], exitWhenIdle bool) *fetcher[E, S] {
	f := &fetcher[E, S]{
		id:           id,
		sr:           sr,
		h:            h,
		exitWhenIdle: exitWhenIdle,
		signal:       make(chan struct{}, 1),
		assigned:     map[string]bool{},
	}
	f.pauser, _ = sr.(source.SplitPauser)
	return f
}

// enqueue hands t to the fetcher and wakes it wherever it waits: idle on
// its signal, blocked putting a batch, or inside Fetch. It never blocks.
// Called from the task goroutine.
//
// The Fetch ctx is cancelled in the same critical section that appends t,
// and the fetcher takes its tasks and replaces a cancelled ctx in one
// critical section too (takeTasks). So a wake-up interrupts only a Fetch
// that started before t was taken, one that could not know of t, never
// one that the fetcher started after taking t. (A spurious interruption
// like that once cut short the open of a file source's split on s3://,
// and the split reader lost the split.)
func (f *fetcher[E, S]) enqueue(t task[S]) {
	f.mu.Lock()
	f.tasks = append(f.tasks, t)
	if f.wake != nil {
		f.wake(ErrWakeUp) // never calls back into the fetcher: a leaf
	}
	f.mu.Unlock()
	select {
	case f.signal <- struct{}{}:
	default:
	}
	if h := testHookEnqueued; h != nil {
		h()
	}
}

// testHookEnqueued, if set, is called at the end of enqueue (on the task
// goroutine), so a test can let the fetcher run before enqueue returns.
var testHookEnqueued func()

// takeTasks returns the pending tasks. If an enqueue cancelled the Fetch
// ctx, it replaces it in the same critical section: every wake-up so far
// was for a task taken now or before, so the next Fetch needs no
// interruption, and a task enqueued after this cancels the new ctx. After
// ctx is done it leaves the cancelled ctx in place.
func (f *fetcher[E, S]) takeTasks(ctx context.Context) []task[S] {
	f.mu.Lock()
	defer f.mu.Unlock()
	ts := f.tasks
	f.tasks = nil
	if f.fctx.Err() != nil && ctx.Err() == nil {
		f.fctx, f.wake = context.WithCancelCause(ctx)
	}
	return ts
}

// run is the fetcher goroutine. It returns when ctx is done, when the
// SplitReader fails, or (exitWhenIdle) when its splits are finished; then
// it closes the SplitReader.
//
// A panic in the SplitReader (Fetch, AddSplits, PauseOrResumeSplits, Close)
// is recovered here and handed to the task goroutine, where PollNext
// re-raises it as a *PanicError: the fetcher goroutine ends normally and
// Close still waits for it.
func (f *fetcher[E, S]) run(ctx context.Context) {
	f.mu.Lock()
	f.fctx, f.wake = context.WithCancelCause(ctx)
	f.mu.Unlock()
	defer func() {
		if r := recover(); r != nil {
			f.panicked("SplitReader", r, debug.Stack())
		}
		f.mu.Lock()
		f.wake(context.Canceled)
		f.wake = nil
		f.mu.Unlock()
		f.closeSplitReader()
	}()
	for {
		if ctx.Err() != nil {
			return
		}
		if !f.runTasks(ctx) {
			return
		}
		if !f.fetchable() {
			if f.exitWhenIdle && len(f.assigned) == 0 {
				return
			}
			select {
			case <-f.signal:
				continue
			case <-ctx.Done():
				return
			}
		}
		fctx := f.fctx
		b, err := f.sr.Fetch(fctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil && fctx.Err() == nil {
			f.fail(fmt.Errorf("fetch: %w", err))
			return
		}
		for _, id := range b.Finished {
			delete(f.assigned, id)
		}
		if b.empty() {
			b.recycle()
			continue
		}
		if !f.put(ctx, b) {
			return
		}
	}
}

// put hands b to the task goroutine, blocking while the queue is full
// (backpressure). While blocked it still applies tasks, and it gives up
// when ctx is done.
func (f *fetcher[E, S]) put(ctx context.Context, b Batch[E]) bool {
	for {
		select {
		case f.h.queue <- b:
			f.h.notify()
			return true
		case <-f.signal:
			if !f.runTasks(ctx) {
				return false
			}
		case <-ctx.Done():
			return false
		}
	}
}

// runTasks applies every pending task, including those enqueued while it
// runs. It reports false after a task failed (the failure is recorded).
func (f *fetcher[E, S]) runTasks(ctx context.Context) bool {
	for {
		ts := f.takeTasks(ctx)
		if len(ts) == 0 {
			return true
		}
		for _, t := range ts {
			if err := f.apply(t); err != nil {
				f.fail(err)
				return false
			}
		}
	}
}

func (f *fetcher[E, S]) apply(t task[S]) error {
	if t.add != nil {
		for _, s := range t.add {
			f.assigned[s.SplitID()] = false
		}
		if err := f.sr.AddSplits(t.add); err != nil {
			return fmt.Errorf("add splits: %w", err)
		}
		return nil
	}
	for _, id := range t.pause {
		if _, ok := f.assigned[id]; ok {
			f.assigned[id] = true
		}
	}
	for _, id := range t.resume {
		if _, ok := f.assigned[id]; ok {
			f.assigned[id] = false
		}
	}
	if f.pauser != nil {
		if err := f.pauser.PauseOrResumeSplits(t.pause, t.resume); err != nil {
			return fmt.Errorf("pause or resume splits: %w", err)
		}
	}
	return nil
}

// fetchable reports whether the fetcher holds a split that is not paused.
func (f *fetcher[E, S]) fetchable() bool {
	for _, paused := range f.assigned {
		if !paused {
			return true
		}
	}
	return false
}

// closeSplitReader closes the SplitReader, recording an error or a panic.
func (f *fetcher[E, S]) closeSplitReader() {
	defer func() {
		if r := recover(); r != nil {
			f.panicked("SplitReader.Close", r, debug.Stack())
		}
	}()
	if err := f.sr.Close(); err != nil {
		f.h.closeFailed(fmt.Errorf("readerbase: fetcher %d: close split reader: %w", f.id, err))
	}
}

// panicked records a panic of the SplitReader, naming the fetcher and its
// splits.
func (f *fetcher[E, S]) panicked(where string, v any, stack []byte) {
	f.h.panicked(&PanicError{Fetcher: f.id, Splits: slices.Sorted(maps.Keys(f.assigned)), In: where, Value: v, stack: stack})
}

// fail records err, naming the fetcher and its splits.
func (f *fetcher[E, S]) fail(err error) {
	ids := slices.Sorted(maps.Keys(f.assigned))
	f.h.fail(fmt.Errorf("readerbase: fetcher %d (splits %s): %w", f.id, strings.Join(ids, ", "), err))
}
