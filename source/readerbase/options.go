package readerbase

import (
	"fmt"

	"github.com/sluice-io/sluice/source"
)

// Config is what a connector supplies to [New]. E is the fetched element
// type, T the record type, S the split type and SS the mutable split state
// (usually a pointer, so that the emitter can advance it in place).
type Config[E, T any, S source.Split, SS any] struct {
	// NewSplitReader makes a SplitReader. It is called on the task
	// goroutine, from AddSplits: once, for the first split, with
	// [SingleFetcher]; once per split with [FetcherPerSplit]. It must not
	// block on I/O; connect lazily in Fetch. Required.
	NewSplitReader func() (SplitReader[E, S], error)
	// Emitter turns fetched elements into records and advances split
	// states, on the task goroutine; one that implements [BatchEmitter]
	// gets each split's group of a batch in one call. Required.
	Emitter RecordEmitter[E, T, SS]
	// InitState makes the mutable state of a split when it is added.
	// Required, unless SS is *S: then nil means a pointer to a copy of the
	// split (func(s S) *S { return &s }).
	InitState func(split S) SS
	// ToSplit turns a state back into a split carrying the current
	// position, for SnapshotState. The returned split must not share
	// mutable memory with the state. Required, unless SS is *S: then nil
	// means a copy of the pointed-to split (func(s *S) S { return *s }),
	// which suits splits without slices or maps the emitter changes.
	ToSplit func(state SS) S
	// OnSplitFinished, if not nil, is called on the task goroutine with
	// the states of splits that have just been read to their end, after
	// their last records were emitted and the splits were dropped from
	// the reader. An error fails the reader.
	OnSplitFinished func(finished []SS) error
}

// pointerStateDefaults fills in InitState and ToSplit when SS is *S.
func (c *Config[E, T, S, SS]) pointerStateDefaults() {
	if f, ok := any(func(s S) *S { return &s }).(func(S) SS); ok && c.InitState == nil {
		c.InitState = f
	}
	if f, ok := any(func(s *S) S { return *s }).(func(SS) S); ok && c.ToSplit == nil {
		c.ToSplit = f
	}
}

func (c *Config[E, T, S, SS]) validate() error {
	c.pointerStateDefaults()
	switch {
	case c.NewSplitReader == nil:
		return fmt.Errorf("%w: Config.NewSplitReader is nil", ErrInvalidConfig)
	case c.Emitter == nil:
		return fmt.Errorf("%w: Config.Emitter is nil", ErrInvalidConfig)
	case c.InitState == nil:
		return fmt.Errorf("%w: Config.InitState is nil", ErrInvalidConfig)
	case c.ToSplit == nil:
		return fmt.Errorf("%w: Config.ToSplit is nil", ErrInvalidConfig)
	}
	return nil
}

// Option configures a [Reader]; see the functions that return one.
type Option interface{ apply(*options) }

type optionFunc func(*options)

func (f optionFunc) apply(o *options) { f(o) }

type options struct {
	perSplit      bool
	queueCapacity int
	pull          bool
}

// defaultOptions holds every default in one place.
func defaultOptions() options {
	return options{
		perSplit:      false,
		queueCapacity: 2,
		pull:          false,
	}
}

func (o *options) validate() error {
	if o.queueCapacity < 1 {
		return fmt.Errorf("%w: QueueCapacity is %d, must be at least 1", ErrInvalidConfig, o.queueCapacity)
	}
	return nil
}

// SingleFetcher makes the reader read all of its splits with one fetcher
// goroutine and one SplitReader, created when the first split is added and
// kept until Close. This is the default and suits clients that multiplex
// many splits over one connection (Kafka partitions). It overrides an
// earlier [FetcherPerSplit].
func SingleFetcher() Option {
	return optionFunc(func(o *options) { o.perSplit = false })
}

// FetcherPerSplit makes the reader start one fetcher goroutine with its own
// SplitReader for each split; the goroutine ends and closes its SplitReader
// once the split is read to its end. It suits splits that are read
// independently (files). Pausing works in this mode even if the SplitReader
// does not implement [source.SplitPauser]: a paused split's fetcher stops
// calling Fetch. It overrides an earlier [SingleFetcher]; the default is
// SingleFetcher.
func FetcherPerSplit() Option {
	return optionFunc(func(o *options) { o.perSplit = true })
}

// QueueCapacity sets how many batches the hand-over queue between the
// fetchers and the task goroutine holds (default 2, at least 1). A fetcher
// whose batch does not fit blocks until PollNext takes one, so each fetcher
// runs at most n+1 batches ahead of what has been emitted.
func QueueCapacity(n int) Option {
	return optionFunc(func(o *options) { o.queueCapacity = n })
}

// PullSplits makes the reader ask for splits (pull assignment, like Flink's
// FileSourceReader): whenever PollNext finds the reader with no unfinished
// split, without a request outstanding and before NotifyNoMoreSplits, it
// calls [source.ReaderContext.SendSplitRequest]. A request is outstanding
// from when it is sent until the next AddSplits. The first request is sent
// by the first PollNext rather than by Start, so that splits restored after
// Start are read before new ones are requested. The default is push
// assignment: the reader never asks.
func PullSplits() Option {
	return optionFunc(func(o *options) { o.pull = true })
}
