package connectortest

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-io/sluice/source"
)

// gate paces the readers of a job: it limits each reader to rate records per
// second and can hold every reader once the readers together emitted pauseAt
// records, until release. Readers check the gate between PollNext calls, so
// they overshoot by at most one call's records. A gate is shared by the
// attempts and jobs of one case and is safe for concurrent use.
//
// With perCheckpoint set, a reader also emits at most perCheckpoint records
// more than (completed checkpoints + 1) × perCheckpoint, so that the data
// spreads over many checkpoints however slow checkpoints are (a loaded
// machine, a slow broker) and faults planned at checkpoint N find data
// around it.
type gate struct {
	rate          float64 // records per second per reader; 0 = unlimited
	perCheckpoint int64   // records per reader per completed checkpoint; 0 = unlimited
	emitted       atomic.Int64
	pauseAt       atomic.Int64 // 0 = never
	completed     atomic.Int64 // checkpoints completed (highest id seen by a reader)
	mu            sync.Mutex
	open          chan struct{} // closed by release
	progress      chan struct{} // closed and replaced when a checkpoint completes
}

// paced returns a gate that lets each reader emit about share records in a
// second and spreads them over at least chunks checkpoints.
func paced(share float64, chunks int64) *gate {
	g := newGate(share)
	g.perCheckpoint = max(1, int64(share)/chunks)
	return g
}

// checkpointed records that checkpoint id completed and wakes readers that
// wait for one.
func (g *gate) checkpointed(id int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if id <= g.completed.Load() {
		return
	}
	g.completed.Store(id)
	if g.progress != nil {
		close(g.progress)
		g.progress = nil
	}
}

// nextCheckpoint returns a channel closed when the next checkpoint completes.
func (g *gate) nextCheckpoint() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.progress == nil {
		g.progress = make(chan struct{})
	}
	return g.progress
}

func newGate(ratePerReader float64) *gate {
	return &gate{rate: ratePerReader, open: make(chan struct{})}
}

// holdAfter makes readers wait once n records were emitted in total.
func (g *gate) holdAfter(n int64) { g.pauseAt.Store(n) }

// held reports whether readers are being held.
func (g *gate) held() bool {
	n := g.pauseAt.Load()
	return n > 0 && g.emitted.Load() >= n && !g.released()
}

func (g *gate) released() bool {
	select {
	case <-g.open:
		return true
	default:
		return false
	}
}

// release lets held readers go on and disables holding.
func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.released() {
		close(g.open)
	}
}

// wrapGate returns src with readers paced by g (nil: src).
func wrapGate[T any, S source.Split, E any](src source.Source[T, S, E], g *gate) source.Source[T, S, E] {
	if g == nil {
		return src
	}
	return &gatedSource[T, S, E]{Source: src, g: g}
}

type gatedSource[T any, S source.Split, E any] struct {
	source.Source[T, S, E]
	g *gate
}

func (s *gatedSource[T, S, E]) CreateReader(ctx source.ReaderContext) (source.Reader[T, S], error) {
	r, err := s.Source.CreateReader(ctx)
	if err != nil || r == nil {
		return r, err
	}
	w := &gatedReader[T, S]{Reader: r, g: s.g}
	w.out.n = &w.n
	ev, hasEv := r.(source.ReaderEventHandler)
	pa, hasPa := r.(source.SplitPauser)
	switch {
	case hasEv && hasPa:
		return struct {
			*gatedReader[T, S]
			source.ReaderEventHandler
			source.SplitPauser
		}{w, ev, pa}, nil
	case hasEv:
		return struct {
			*gatedReader[T, S]
			source.ReaderEventHandler
		}{w, ev}, nil
	case hasPa:
		return struct {
			*gatedReader[T, S]
			source.SplitPauser
		}{w, pa}, nil
	}
	return w, nil
}

// gatedReader is used from its subtask's goroutine only.
type gatedReader[T any, S source.Split] struct {
	source.Reader[T, S]
	g     *gate
	start time.Time
	n     int64 // records emitted by this reader
	out   countingOutput[T]
	wait  <-chan struct{} // set while the gate holds the reader back
}

func (r *gatedReader[T, S]) Start(ctx context.Context) error {
	r.start = time.Now()
	return r.Reader.Start(ctx)
}

func (r *gatedReader[T, S]) PollNext(out source.Output[T]) (source.InputStatus, error) {
	r.wait = nil
	if r.g.held() {
		r.wait = r.g.open
		return source.NothingAvailable, nil
	}
	if pc := r.g.perCheckpoint; pc > 0 {
		wait := r.g.nextCheckpoint()
		if r.n >= (r.g.completed.Load()+1)*pc {
			r.wait = wait
			return source.NothingAvailable, nil
		}
	}
	if r.g.rate > 0 {
		due := r.start.Add(time.Duration(float64(r.n) / r.g.rate * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			c := make(chan struct{})
			time.AfterFunc(d, func() { close(c) })
			r.wait = c
			return source.NothingAvailable, nil
		}
	}
	before := r.n
	r.out.inner = out
	st, err := r.Reader.PollNext(&r.out)
	r.g.emitted.Add(r.n - before)
	return st, err
}

func (r *gatedReader[T, S]) Available() <-chan struct{} {
	if r.wait != nil {
		return r.wait
	}
	return r.Reader.Available()
}

func (r *gatedReader[T, S]) NotifyCheckpointComplete(id int64) error {
	r.g.checkpointed(id)
	if l, ok := r.Reader.(source.CheckpointListener); ok {
		return l.NotifyCheckpointComplete(id)
	}
	return nil
}

func (r *gatedReader[T, S]) NotifyCheckpointAborted(id int64) error {
	if l, ok := r.Reader.(source.CheckpointAbortListener); ok {
		return l.NotifyCheckpointAborted(id)
	}
	return nil
}

// countingOutput counts the records emitted on it and on its per-split
// outputs.
type countingOutput[T any] struct {
	inner  source.Output[T]
	n      *int64
	splits map[string]*countingOutput[T]
}

func (o *countingOutput[T]) Collect(v T)             { *o.n++; o.inner.Collect(v) }
func (o *countingOutput[T]) CollectAt(v T, ts int64) { *o.n++; o.inner.CollectAt(v, ts) }
func (o *countingOutput[T]) EmitWatermark(ts int64)  { o.inner.EmitWatermark(ts) }
func (o *countingOutput[T]) MarkIdle()               { o.inner.MarkIdle() }

func (o *countingOutput[T]) ForSplit(id string) source.Output[T] {
	if o.splits == nil {
		o.splits = map[string]*countingOutput[T]{}
	}
	so, ok := o.splits[id]
	if !ok {
		so = &countingOutput[T]{n: o.n}
		o.splits[id] = so
	}
	so.inner = o.inner.ForSplit(id)
	return so
}

func (o *countingOutput[T]) ReleaseSplit(id string) {
	delete(o.splits, id)
	o.inner.ReleaseSplit(id)
}
