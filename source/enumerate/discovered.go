package enumerate

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/sluice-io/sluice/source"
)

// Discovery says how a [Discovered] enumerator finds splits.
type Discovery[S source.Split] struct {
	// Discover lists the splits that exist now: all of them, not only the
	// new ones. It runs off the coordinator goroutine (through
	// [source.EnumeratorContext.CallAsync]) and may block; it must return
	// promptly when ctx is done. Required.
	Discover func(ctx context.Context) ([]S, error)
	// Interval is the time between the end of one discovery and the start
	// of the next, for an unbounded source. A bounded source discovers
	// once; so does an unbounded one with Interval 0.
	Interval time.Duration
	// Key names what discovery remembers: a split whose key is known is
	// not assigned again. Several splits may share a key (the blocks of
	// one file); they are new together. The default is the split's
	// SplitID.
	Key func(S) string
	// ForgetGone makes the enumerator forget the keys a discovery no longer
	// returns, so that the memory stays as large as the listing (a file
	// that disappears and comes back is read again). By default keys are
	// remembered for good (a partition missing from one listing is not
	// read again from the start when it reappears).
	ForgetGone bool
	// Prepare, if not nil, completes newly discovered splits before they
	// are assigned, off the coordinator goroutine (for example, looks up
	// their start offsets). first is true for the splits of the first
	// successful discovery of a fresh start, false for later ones and after
	// a restore from a state whose first discovery was done. Its splits are
	// assigned instead of fresh; an error fails the job. While a Prepare
	// runs, discoveries that end are dropped (the next one finds what is
	// still new), and a checkpoint does not contain the splits being
	// prepared: after a restore they are discovered again.
	Prepare func(ctx context.Context, fresh []S, first bool) ([]S, error)
	// OnError is called on the coordinator goroutine with each failed
	// discovery and the number of failures in a row. A non-nil result fails
	// the job with it; nil retries: an unbounded source at the next
	// interval (if it has one), otherwise after RetryDelay. The default
	// fails the job with the discovery's error.
	OnError func(err error, failures int) error
	// RetryDelay is the wait before discovering again after a failure that
	// OnError let through, unless the next periodic discovery does. The
	// default is one second.
	RetryDelay time.Duration
}

// DiscoveredState is the checkpoint state of a [Discovered] enumerator.
type DiscoveredState[S source.Split] struct {
	// Pending holds the splits not assigned yet, in assignment order.
	Pending []S `json:"pending"`
	// Known holds the keys of the splits discovered so far (with
	// ForgetGone, of those the last discovery returned), sorted. The keys
	// of Pending are known whether or not they are listed here.
	Known []string `json:"known,omitempty"`
	// Done is true once a discovery succeeded and its splits were added: a
	// bounded source never discovers again, and an unbounded one's later
	// discoveries are not the first.
	Done bool `json:"done,omitempty"`
}

// Discovered is a [source.Enumerator] for splits found while the source
// runs: files appearing in a directory, partitions added to a topic. It
// runs [Discovery.Discover] with CallAsync (once for a bounded source,
// every Interval for an unbounded one), turns the splits with keys it has
// not seen into pending splits (through [Discovery.Prepare], if set), and
// assigns them by the same rules as [Fixed]. A bounded source signals
// no-more-splits only once discovery has succeeded and every split is
// assigned; until then, pull requests wait.
type Discovered[S source.Split] struct {
	p         *pool[S]
	d         Discovery[S]
	known     map[string]bool
	fails     int
	preparing bool
}

var _ source.Enumerator[source.Split, DiscoveredState[source.Split]] = (*Discovered[source.Split])(nil)

// NewDiscovered returns an enumerator that discovers splits with d,
// starting from st (the zero value for a fresh start, a checkpoint's state
// to restore). The type parameter is inferred from ctx.
func NewDiscovered[S source.Split](ctx source.EnumeratorContext[S], d Discovery[S], b source.Boundedness, st DiscoveredState[S], opts ...Option[S]) *Discovered[S] {
	if d.Key == nil {
		d.Key = func(s S) string { return s.SplitID() }
	}
	if d.OnError == nil {
		d.OnError = func(err error, _ int) error { return err }
	}
	if d.RetryDelay <= 0 {
		d.RetryDelay = time.Second
	}
	e := &Discovered[S]{p: newPool(ctx, st.Pending, b, opts), d: d, known: map[string]bool{}}
	e.p.done = st.Done
	for _, k := range st.Known {
		e.known[k] = true
	}
	for _, sp := range st.Pending {
		e.known[d.Key(sp)] = true // discovered, so known, whatever st says
	}
	return e
}

func (e *Discovered[S]) periodic() bool { return !e.p.bounded && e.d.Interval > 0 }

// Start begins discovery (unless a restored bounded source finished it)
// and assigns what the restored state holds.
func (e *Discovered[S]) Start(context.Context) error {
	switch {
	case e.periodic():
		e.p.ctx.CallAsync(e.discover, e.handle, 0, e.d.Interval)
	case !(e.p.bounded && e.p.done):
		e.p.ctx.CallAsync(e.discover, e.handle, 0, 0)
	}
	return e.p.start()
}

// Done reports whether a discovery has succeeded and its splits were
// added (for a bounded source: whether discovery is over).
func (e *Discovered[S]) Done() bool { return e.p.done }

func (e *Discovered[S]) discover(ctx context.Context) (any, error) { return e.d.Discover(ctx) }

// handle runs on the coordinator goroutine with a discovery's result.
func (e *Discovered[S]) handle(res any, err error) {
	if err != nil {
		e.fails++
		if ferr := e.d.OnError(err, e.fails); ferr != nil {
			e.p.ctx.FailJob(ferr)
		} else if !e.periodic() {
			e.p.ctx.CallAsync(e.discover, e.handle, e.d.RetryDelay, 0)
		}
		return
	}
	e.fails = 0
	if (e.p.bounded && e.p.done) || e.preparing {
		return // a bounded source discovers once; a Prepare is under way
	}
	splits, _ := res.([]S)
	present := make(map[string]bool, len(splits))
	var fresh []S
	for _, sp := range splits {
		k := e.d.Key(sp)
		present[k] = true
		if !e.known[k] { // several splits may share a key: all are new
			fresh = append(fresh, sp)
		}
	}
	if e.d.Prepare == nil || len(fresh) == 0 {
		e.add(fresh, present)
		return
	}
	e.preparing = true
	first := !e.p.done
	e.p.ctx.CallAsync(func(ctx context.Context) (any, error) {
		return e.d.Prepare(ctx, fresh, first)
	}, func(res any, err error) {
		e.preparing = false
		if err != nil {
			e.p.ctx.FailJob(err)
			return
		}
		prepared, _ := res.([]S)
		e.add(prepared, present)
	}, 0, 0)
}

// add makes fresh splits pending and known, and assigns what it can.
func (e *Discovered[S]) add(fresh []S, present map[string]bool) {
	if e.d.ForgetGone {
		maps.DeleteFunc(e.known, func(k string, _ bool) bool { return !present[k] })
		for _, sp := range e.p.pending {
			e.known[e.d.Key(sp)] = true // still pending, so still known
		}
	}
	for _, sp := range fresh {
		e.known[e.d.Key(sp)] = true
	}
	e.p.add(fresh)
	e.p.done = true
	if err := e.p.serve(); err != nil {
		e.p.ctx.FailJob(err)
	}
}

// HandleSplitRequest answers a pull request; push enumerators ignore it.
func (e *Discovered[S]) HandleSplitRequest(subtask int, _ string) error {
	return e.p.request(subtask)
}

// AddSplitsBack returns splits to the pool and assigns them again.
func (e *Discovered[S]) AddSplitsBack(splits []S, subtask int) error {
	return e.p.addBack(splits, subtask)
}

// AddReader registers a reader, or re-registers one after a restart.
func (e *Discovered[S]) AddReader(subtask int) error { return e.p.addReader(subtask) }

// SnapshotState returns the pending splits, the known keys and whether the
// first discovery is done.
func (e *Discovered[S]) SnapshotState(int64) (DiscoveredState[S], error) {
	return DiscoveredState[S]{
		Pending: slices.Clone(e.p.pending),
		Known:   slices.Sorted(maps.Keys(e.known)),
		Done:    e.p.done,
	}, nil
}

// Unassigned returns a copy of the splits not assigned yet.
func (e *Discovered[S]) Unassigned() []S { return slices.Clone(e.p.pending) }

// Close does nothing: the runtime cancels the discovery's ctx when the
// enumerator closes.
func (e *Discovered[S]) Close() error { return nil }
