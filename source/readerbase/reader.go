package readerbase

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/source"
)

// Reader is a [source.Reader] built from a connector's [SplitReader],
// [RecordEmitter] and split state (Flink's SourceReaderBase). It also
// implements [source.SplitPauser].
//
// Like every source.Reader, its methods are called from the subtask's
// goroutine (the task goroutine), never concurrently, and none of them
// blocks on I/O: the SplitReaders run on fetcher goroutines that the Reader
// owns. Start is called first; Close, last, stops and waits for every
// fetcher goroutine. A connector may embed *Reader in its own reader type to
// add [source.CheckpointListener] or [source.ReaderEventHandler].
//
// The split states are touched only on the task goroutine, by the
// RecordEmitter during PollNext and by SnapshotState, so a snapshot holds
// exactly the progress of the records emitted so far; batches still in the
// hand-over queue are read again after a restore.
type Reader[E, T any, S source.Split, SS any] struct {
	cfg       Config[E, T, S, SS]
	batchEm   BatchEmitter[E, T, SS] // cfg.Emitter, if it implements it
	opts      options
	rctx      source.ReaderContext
	recordsIn *metrics.Counter
	h         *handover[E]
	ready     chan struct{} // closed: Available when nothing is armed

	// Owned by the task goroutine.
	runCtx         context.Context
	stop           context.CancelFunc
	fetchers       sync.WaitGroup
	started        bool
	closed         bool
	closeErr       error
	err            error // sticky error from the task goroutine's side
	noMoreSplits   bool
	requestPending bool
	states         map[string]SS
	order          []string // the ids in states, in the order added
	single         *fetcher[E, S]
	bySplit        map[string]*fetcher[E, S] // FetcherPerSplit only
	nextFetcherID  int
}

// Compile-time check that every instantiation implements the interfaces.
func _[E, T any, S source.Split, SS any]() {
	var _ source.Reader[T, S] = (*Reader[E, T, S, SS])(nil)
	var _ source.SplitPauser = (*Reader[E, T, S, SS])(nil)
}

// MetricRecordsFetched counts the fetched elements handed to the emitter,
// once per batch. (The runtime itself counts numRecordsIn, the records the
// emitter emits.)
const MetricRecordsFetched = "numRecordsFetched"

// New returns a Reader for one subtask. rctx supplies split requests (with
// [PullSplits]) and the metric group, where the Reader counts
// [MetricRecordsFetched]. Without options the Reader uses [SingleFetcher], a queue of 2
// batches ([QueueCapacity]) and push assignment.
//
// New starts no goroutine and creates no SplitReader; that happens when
// splits are added.
func New[E, T any, S source.Split, SS any](rctx source.ReaderContext, cfg Config[E, T, S, SS], opts ...Option) (*Reader[E, T, S, SS], error) {
	if rctx == nil {
		return nil, fmt.Errorf("%w: ReaderContext is nil", ErrInvalidConfig)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	o := defaultOptions()
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	var recordsIn *metrics.Counter
	if g := rctx.Metrics(); g != nil {
		recordsIn = g.Counter(MetricRecordsFetched)
	} else {
		recordsIn = new(metrics.Counter)
	}
	ready := make(chan struct{})
	close(ready)
	r := &Reader[E, T, S, SS]{
		cfg:       cfg,
		opts:      o,
		rctx:      rctx,
		recordsIn: recordsIn,
		h:         newHandover[E](o.queueCapacity),
		ready:     ready,
		states:    map[string]SS{},
	}
	r.batchEm, _ = cfg.Emitter.(BatchEmitter[E, T, SS])
	if o.perSplit {
		r.bySplit = map[string]*fetcher[E, S]{}
	}
	return r, nil
}

// Start prepares the reader; fetcher goroutines run under a context derived
// from ctx, so cancelling ctx stops them too. Start must be called once,
// before AddSplits. With [PullSplits] the first split request is sent by
// the first PollNext, not here.
func (r *Reader[E, T, S, SS]) Start(ctx context.Context) error {
	switch {
	case r.closed:
		return ErrClosed
	case r.started:
		return errors.New("readerbase: Start called twice")
	}
	r.runCtx, r.stop = context.WithCancel(ctx)
	r.started = true
	return nil
}

// PollNext emits at most one fetched batch into out and never blocks. Each
// split's records go through out.ForSplit(id), in read order; a split
// finished by the batch is then dropped from the reader, released with
// out.ReleaseSplit and passed to [Config.OnSplitFinished].
//
// It returns MoreAvailable if another batch is waiting, EndOfInput once
// NotifyNoMoreSplits was called and every split has been read and emitted,
// and NothingAvailable otherwise; then Available returns a channel that is
// ready when a batch arrives or the state changes. An error from a fetcher
// (wrapped with the fetcher and its splits), the emitter or
// OnSplitFinished is returned by this and every later call; the status is
// then meaningless. A panic in a SplitReader on a fetcher goroutine is
// re-raised here as a *[PanicError].
func (r *Reader[E, T, S, SS]) PollNext(out source.Output[T]) (source.InputStatus, error) {
	if r.closed {
		return source.NothingAvailable, ErrClosed
	}
	if r.err != nil {
		return source.NothingAvailable, r.err
	}
	r.repanic()
	if err := r.h.failure(); err != nil {
		return source.NothingAvailable, err
	}
	select {
	case b := <-r.h.queue:
		if err := r.emit(out, &b); err != nil {
			r.err = err
			return source.NothingAvailable, err
		}
		if len(r.h.queue) > 0 {
			return source.MoreAvailable, nil
		}
	default:
	}
	return r.idle()
}

// repanic re-raises a fetcher's panic on the calling goroutine (see
// PanicError); later calls return it as their error.
func (r *Reader[E, T, S, SS]) repanic() {
	if p := r.h.panc.Load(); p != nil {
		r.err = p
		panic(p)
	}
}

// idle decides the status when the queue looked empty.
func (r *Reader[E, T, S, SS]) idle() (source.InputStatus, error) {
	r.maybeRequestSplit()
	if r.noMoreSplits && len(r.states) == 0 {
		// Every split's last batch has been emitted, so the fetchers have
		// nothing left to put.
		return source.EndOfInput, nil
	}
	// Arm first, then look again: a batch put after this look closes the
	// armed channel (see handover).
	r.h.arm()
	r.repanic()
	if err := r.h.failure(); err != nil {
		return source.NothingAvailable, err
	}
	if len(r.h.queue) > 0 {
		r.h.notify()
		return source.MoreAvailable, nil
	}
	return source.NothingAvailable, nil
}

// emit runs the batch's records through the emitter (a split's group in
// one call to a BatchEmitter) and finishes the splits the batch reports
// finished.
func (r *Reader[E, T, S, SS]) emit(out source.Output[T], b *Batch[E]) error {
	em, bem := r.cfg.Emitter, r.batchEm
	n := 0
	for _, g := range b.Records {
		if len(g.Records) == 0 {
			continue
		}
		st, ok := r.states[g.SplitID]
		if !ok {
			r.recordsIn.Add(int64(n))
			return fmt.Errorf("%w: %d records for split %q", ErrUnknownSplit, len(g.Records), g.SplitID)
		}
		so := out.ForSplit(g.SplitID)
		if bem != nil {
			if err := bem.EmitBatch(g.Records, so, st); err != nil {
				r.recordsIn.Add(int64(n + len(g.Records)))
				return fmt.Errorf("readerbase: split %q: emit: %w", g.SplitID, err)
			}
			n += len(g.Records)
			continue
		}
		for i, e := range g.Records {
			if err := em.Emit(e, so, st); err != nil {
				r.recordsIn.Add(int64(n + i))
				return fmt.Errorf("readerbase: split %q: emit: %w", g.SplitID, err)
			}
		}
		n += len(g.Records)
	}
	r.recordsIn.Add(int64(n))
	if len(b.Finished) > 0 {
		if err := r.finish(out, b.Finished); err != nil {
			return err
		}
	}
	b.recycle()
	return nil
}

// finish drops finished splits from the reader.
func (r *Reader[E, T, S, SS]) finish(out source.Output[T], ids []string) error {
	done := make([]SS, 0, len(ids))
	for _, id := range ids {
		st, ok := r.states[id]
		if !ok {
			return fmt.Errorf("%w: finished split %q", ErrUnknownSplit, id)
		}
		delete(r.states, id)
		if i := slices.Index(r.order, id); i >= 0 {
			r.order = slices.Delete(r.order, i, i+1)
		}
		delete(r.bySplit, id) // its fetcher ends by itself
		out.ReleaseSplit(id)
		done = append(done, st)
	}
	if r.cfg.OnSplitFinished != nil {
		if err := r.cfg.OnSplitFinished(done); err != nil {
			return fmt.Errorf("readerbase: OnSplitFinished: %w", err)
		}
	}
	r.maybeRequestSplit()
	return nil
}

func (r *Reader[E, T, S, SS]) maybeRequestSplit() {
	if r.opts.pull && r.started && !r.noMoreSplits && !r.requestPending && len(r.states) == 0 {
		r.requestPending = true
		r.rctx.SendSplitRequest()
	}
}

// Available returns a channel that is ready when PollNext can make
// progress after it returned NothingAvailable: a batch arrived, a fetcher
// failed, splits were added or NotifyNoMoreSplits was called. At any other
// time it returns a ready channel. A new channel may be returned after each
// PollNext.
func (r *Reader[E, T, S, SS]) Available() <-chan struct{} {
	if ch := r.h.current(); ch != nil {
		return ch
	}
	return r.ready
}

// AddSplits adds splits (assigned, or restored from a snapshot after
// Start) and hands them to the fetchers: with [SingleFetcher] to the one
// fetcher, created with the first split; with [FetcherPerSplit] to a new
// fetcher goroutine per split. It does not wait for the fetchers. A split
// whose id the reader already holds is rejected with [ErrDuplicateSplit],
// and nothing is added; so is a split added after NotifyNoMoreSplits
// ([ErrSplitsAfterNoMoreSplits]). The caller keeps ownership of splits.
func (r *Reader[E, T, S, SS]) AddSplits(splits []S) error {
	switch {
	case r.closed:
		return ErrClosed
	case !r.started:
		return ErrNotStarted
	case r.noMoreSplits:
		return ErrSplitsAfterNoMoreSplits
	case len(splits) == 0:
		return nil
	}
	seen := make(map[string]struct{}, len(splits))
	for _, s := range splits {
		id := s.SplitID()
		_, held := r.states[id]
		_, twice := seen[id]
		if held || twice {
			return fmt.Errorf("%w: %q", ErrDuplicateSplit, id)
		}
		seen[id] = struct{}{}
	}
	var err error
	if r.opts.perSplit {
		err = r.addPerSplit(splits)
	} else {
		err = r.addSingle(splits)
	}
	if err != nil {
		return err
	}
	r.requestPending = false
	r.h.notify()
	return nil
}

func (r *Reader[E, T, S, SS]) newSplitReader() (SplitReader[E, S], error) {
	sr, err := r.cfg.NewSplitReader()
	if err != nil {
		return nil, fmt.Errorf("readerbase: new split reader: %w", err)
	}
	if sr == nil {
		return nil, errors.New("readerbase: NewSplitReader returned a nil SplitReader")
	}
	return sr, nil
}

func (r *Reader[E, T, S, SS]) addState(s S) {
	id := s.SplitID()
	r.states[id] = r.cfg.InitState(s)
	r.order = append(r.order, id)
}

func (r *Reader[E, T, S, SS]) startFetcher(sr SplitReader[E, S], exitWhenIdle bool, first []S) *fetcher[E, S] {
	f := newFetcher(r.nextFetcherID, sr, r.h, exitWhenIdle)
	r.nextFetcherID++
	f.enqueue(task[S]{add: first})
	ctx := r.runCtx
	r.fetchers.Go(func() { f.run(ctx) })
	return f
}

func (r *Reader[E, T, S, SS]) addSingle(splits []S) error {
	splits = slices.Clone(splits)
	if r.single == nil {
		sr, err := r.newSplitReader()
		if err != nil {
			return err
		}
		for _, s := range splits {
			r.addState(s)
		}
		r.single = r.startFetcher(sr, false, splits)
		return nil
	}
	for _, s := range splits {
		r.addState(s)
	}
	r.single.enqueue(task[S]{add: splits})
	return nil
}

func (r *Reader[E, T, S, SS]) addPerSplit(splits []S) error {
	srs := make([]SplitReader[E, S], 0, len(splits))
	for range splits {
		sr, err := r.newSplitReader()
		if err != nil {
			// Never used by a fetcher: close them here.
			errs := []error{err}
			for _, sr := range srs {
				errs = append(errs, sr.Close())
			}
			return errors.Join(errs...)
		}
		srs = append(srs, sr)
	}
	for i, s := range splits {
		r.addState(s)
		r.bySplit[s.SplitID()] = r.startFetcher(srs[i], true, []S{s})
	}
	return nil
}

// NotifyNoMoreSplits records that no more splits will be added; once the
// held splits are read, PollNext returns EndOfInput. A reader that holds no
// split ends at the next PollNext.
func (r *Reader[E, T, S, SS]) NotifyNoMoreSplits() {
	r.noMoreSplits = true
	r.h.notify()
}

// SnapshotState returns every unfinished split, with the position reached
// by the records emitted so far (splits added but not yet fetched at their
// starting position), in the order they were added. It does not wait for
// the fetchers.
func (r *Reader[E, T, S, SS]) SnapshotState(checkpointID int64) ([]S, error) {
	if r.closed {
		return nil, ErrClosed
	}
	out := make([]S, 0, len(r.order))
	for _, id := range r.order {
		out = append(out, r.cfg.ToSplit(r.states[id]))
	}
	return out, nil
}

// PauseOrResumeSplits stops and restarts fetching of splits (for watermark
// alignment). Ids of splits the reader does not hold are ignored. The
// change reaches the fetchers asynchronously: batches fetched before it
// are still emitted.
//
// With [FetcherPerSplit], a paused split's fetcher stops calling Fetch, and
// the call is also passed on to SplitReaders that implement
// [source.SplitPauser]. With [SingleFetcher], the SplitReader must
// implement source.SplitPauser and skip paused splits in Fetch (the fetcher
// stops calling Fetch only when every split is paused); otherwise pausing
// returns an error wrapping [errors.ErrUnsupported].
func (r *Reader[E, T, S, SS]) PauseOrResumeSplits(pause, resume []string) error {
	if r.closed {
		return ErrClosed
	}
	held := func(ids []string) []string {
		var out []string
		for _, id := range ids {
			if _, ok := r.states[id]; ok {
				out = append(out, id)
			}
		}
		return out
	}
	pause, resume = held(pause), held(resume)
	if len(pause) == 0 && len(resume) == 0 {
		return nil
	}
	if !r.opts.perSplit {
		if r.single.pauser == nil {
			if len(pause) > 0 {
				return fmt.Errorf("readerbase: pause splits %q: the SplitReader does not implement source.SplitPauser (use FetcherPerSplit or implement it): %w", pause, errors.ErrUnsupported)
			}
			return nil
		}
		r.single.enqueue(task[S]{pause: pause, resume: resume})
		return nil
	}
	for _, id := range pause {
		r.bySplit[id].enqueue(task[S]{pause: []string{id}})
	}
	for _, id := range resume {
		r.bySplit[id].enqueue(task[S]{resume: []string{id}})
	}
	return nil
}

// Close stops every fetcher goroutine (cancelling the ctx of a running
// Fetch and of a fetcher blocked on the full queue), waits for them, and
// returns the first error from closing a SplitReader. Each fetcher closes
// its own SplitReader on its goroutine. Close is idempotent: later calls
// return the same result. Fetcher errors already reported by PollNext are
// not returned again.
func (r *Reader[E, T, S, SS]) Close() error {
	if r.closed {
		return r.closeErr
	}
	r.closed = true
	if r.stop != nil {
		r.stop()
	}
	r.fetchers.Wait()
	r.closeErr = r.h.firstCloseErr()
	if p := r.h.panc.Load(); p != nil && r.err != error(p) {
		// A panic PollNext did not re-raise (in Close, say) is not lost.
		r.closeErr = errors.Join(r.closeErr, p)
	}
	r.h.notify()
	return r.closeErr
}
