package hybrid

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/source"
)

var (
	_ child                           = (*typedChild[int, Split, EnumState])(nil)
	_ childEnum                       = (*typedEnum[Split, EnumState])(nil)
	_ childReader                     = (*typedReader[int, Split])(nil)
	_ source.EnumeratorContext[Split] = (*typedContext[Split])(nil)
	_ source.ReaderContext            = (*childReaderContext)(nil)
)

// child is a source of the chain with its types erased; the record type
// is erased too (poll takes the output as any), so that no interface here
// is generic.
type child interface {
	boundedness() source.Boundedness
	source() any
	createEnumerator(ctx *childContext, state *EnumState) (childEnum, error)
	createReader(ctx source.ReaderContext, index int) (childReader, error)
}

// typedChild is a child that knows its source's types.
type typedChild[T any, S source.Split, E any] struct {
	src source.Source[T, S, E]
}

func (c *typedChild[T, S, E]) boundedness() source.Boundedness { return c.src.Boundedness() }
func (c *typedChild[T, S, E]) source() any                     { return c.src }

func wrapSplit[S source.Split](index int, ser serde.Versioned[S], s S) (Split, error) {
	data, err := ser.Serialize(s)
	if err != nil {
		return Split{}, fmt.Errorf("hybrid: serialize split %s of source %d: %w", s.SplitID(), index, err)
	}
	return Split{Source: index, ID: s.SplitID(), Version: ser.Version(), Data: data}, nil
}

func unwrapSplits[S source.Split](ser serde.Versioned[S], splits []Split) ([]S, error) {
	out := make([]S, 0, len(splits))
	for _, sp := range splits {
		s, err := ser.Deserialize(sp.Version, sp.Data)
		if err != nil {
			return nil, fmt.Errorf("hybrid: deserialize split %s: %w", sp.SplitID(), err)
		}
		out = append(out, s)
	}
	return out, nil
}

func (c *typedChild[T, S, E]) createEnumerator(ctx *childContext, state *EnumState) (childEnum, error) {
	tctx := &typedContext[S]{childContext: ctx, ser: c.src.SplitSerializer()}
	var (
		e   source.Enumerator[S, E]
		err error
	)
	stser := c.src.EnumeratorStateSerializer()
	if state == nil {
		e, err = c.src.CreateEnumerator(tctx)
	} else {
		st, derr := stser.Deserialize(state.Version, state.State)
		if derr != nil {
			return nil, fmt.Errorf("deserialize enumerator state: %w", derr)
		}
		e, err = c.src.RestoreEnumerator(tctx, st)
	}
	if err != nil {
		return nil, err
	}
	if e == nil {
		return nil, errors.New("the source returned a nil enumerator")
	}
	return &typedEnum[S, E]{e: e, ctx: tctx, ser: stser}, nil
}

func (c *typedChild[T, S, E]) createReader(ctx source.ReaderContext, index int) (childReader, error) {
	r, err := c.src.CreateReader(&childReaderContext{ReaderContext: ctx, index: index})
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, errors.New("the source returned a nil reader")
	}
	return &typedReader[T, S]{r: r, ser: c.src.SplitSerializer(), index: index}, nil
}

// childEnum is the enumerator of one source, with its types erased.
type childEnum interface {
	start(ctx context.Context) error
	handleSplitRequest(subtask int, location string) error
	addSplitsBack(splits []Split, subtask int) error
	addReader(subtask int) error
	snapshot(checkpointID int64) (version int, state []byte, err error)
	handleEvent(subtask int, e source.Event) error
	notifyComplete(checkpointID int64) error
	notifyAborted(checkpointID int64) error
	close() error
	raw() any
}

type typedEnum[S source.Split, E any] struct {
	e   source.Enumerator[S, E]
	ctx *typedContext[S]
	ser serde.Versioned[E]
}

func (t *typedEnum[S, E]) start(ctx context.Context) error { return t.e.Start(ctx) }
func (t *typedEnum[S, E]) handleSplitRequest(subtask int, location string) error {
	return t.e.HandleSplitRequest(subtask, location)
}
func (t *typedEnum[S, E]) addSplitsBack(splits []Split, subtask int) error {
	ss, err := unwrapSplits(t.ctx.ser, splits)
	if err != nil {
		return err
	}
	return t.e.AddSplitsBack(ss, subtask)
}
func (t *typedEnum[S, E]) addReader(subtask int) error { return t.e.AddReader(subtask) }
func (t *typedEnum[S, E]) snapshot(id int64) (int, []byte, error) {
	st, err := t.e.SnapshotState(id)
	if err != nil {
		return 0, nil, err
	}
	b, err := t.ser.Serialize(st)
	if err != nil {
		return 0, nil, fmt.Errorf("serialize enumerator state: %w", err)
	}
	return t.ser.Version(), b, nil
}
func (t *typedEnum[S, E]) handleEvent(subtask int, e source.Event) error {
	if h, ok := t.e.(source.EnumeratorEventHandler); ok {
		return h.HandleSourceEvent(subtask, e)
	}
	return nil
}
func (t *typedEnum[S, E]) notifyComplete(id int64) error {
	if l, ok := t.e.(source.CheckpointListener); ok {
		return l.NotifyCheckpointComplete(id)
	}
	return nil
}
func (t *typedEnum[S, E]) notifyAborted(id int64) error {
	if l, ok := t.e.(source.CheckpointAbortListener); ok {
		return l.NotifyCheckpointAborted(id)
	}
	return nil
}
func (t *typedEnum[S, E]) close() error { return t.e.Close() }
func (t *typedEnum[S, E]) raw() any     { return t.e }

// childContext is the untyped part of the enumerator context of one
// source: it wraps splits, signals and events with the source's index, and
// shows the source only the readers that were switched to it.
type childContext struct {
	index   int
	real    source.EnumeratorContext[Split]
	readers func() map[int]source.ReaderInfo
	ctx     context.Context // done when the source's enumerator is closed
	cancel  context.CancelFunc
}

func (c *childContext) closed() bool { return c.ctx.Err() != nil }

func (c *childContext) Parallelism() int                             { return c.real.Parallelism() }
func (c *childContext) RegisteredReaders() map[int]source.ReaderInfo { return c.readers() }
func (c *childContext) Metrics() metrics.Group                       { return c.real.Metrics() }
func (c *childContext) FailJob(err error)                            { c.real.FailJob(err) }

// SignalNoMoreSplits becomes an event, so that a reader can tell which
// source it is for (a reader restored from a checkpoint may not have
// switched to the source yet).
func (c *childContext) SignalNoMoreSplits(subtask int) {
	if !c.closed() {
		c.real.SendEventToReader(subtask, noMoreSplitsEvent{Source: c.index})
	}
}

func (c *childContext) SendEventToReader(subtask int, e source.Event) {
	if !c.closed() {
		c.real.SendEventToReader(subtask, enumeratorEvent{Source: c.index, Event: e})
	}
}

// CallAsync runs through the hybrid's context, but stops with the source's
// enumerator: fn's ctx is cancelled when it closes, and neither fn nor the
// handler runs after that. (A periodic call's goroutine belongs to the
// runtime and ends with the hybrid's enumerator.)
func (c *childContext) CallAsync(fn func(context.Context) (any, error), handler func(any, error), delay, period time.Duration) {
	done := c.ctx
	c.real.CallAsync(func(ctx context.Context) (any, error) {
		if done.Err() != nil {
			return nil, done.Err()
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		stop := context.AfterFunc(done, cancel)
		defer stop()
		return fn(ctx)
	}, func(res any, err error) {
		if done.Err() == nil {
			handler(res, err)
		}
	}, delay, period)
}

// typedContext adds the typed AssignSplits.
type typedContext[S source.Split] struct {
	*childContext
	ser serde.Versioned[S]
}

func (c *typedContext[S]) AssignSplits(a map[int][]S) error {
	if c.closed() {
		return fmt.Errorf("hybrid: source %d assigned splits after its enumerator was closed", c.index)
	}
	wrapped := make(map[int][]Split, len(a))
	for sub, ss := range a {
		ws := make([]Split, 0, len(ss))
		for _, s := range ss {
			w, err := wrapSplit(c.index, c.ser, s)
			if err != nil {
				return err
			}
			ws = append(ws, w)
		}
		wrapped[sub] = ws
	}
	return c.real.AssignSplits(wrapped)
}

// childReaderContext tags a source reader's events with its source index.
type childReaderContext struct {
	source.ReaderContext
	index int
}

func (c *childReaderContext) SendEventToEnumerator(e source.Event) {
	c.ReaderContext.SendEventToEnumerator(readerEvent{Source: c.index, Event: e})
}

// childReader is the reader of one source, with its split type erased;
// poll takes the hybrid reader's source.Output[T].
type childReader interface {
	start(ctx context.Context) error
	poll(out any) (source.InputStatus, error)
	available() <-chan struct{}
	addSplits(splits []Split) error
	noMoreSplits()
	snapshot(checkpointID int64) ([]Split, error)
	handleEvent(e source.Event) error
	pauseOrResume(pause, resume []string) error
	notifyComplete(checkpointID int64) error
	notifyCommitted(checkpointID int64) error
	notifyAborted(checkpointID int64) error
	close() error
}

type typedReader[T any, S source.Split] struct {
	r     source.Reader[T, S]
	ser   serde.Versioned[S]
	index int
}

func (t *typedReader[T, S]) start(ctx context.Context) error { return t.r.Start(ctx) }
func (t *typedReader[T, S]) poll(out any) (source.InputStatus, error) {
	return t.r.PollNext(out.(source.Output[T]))
}
func (t *typedReader[T, S]) available() <-chan struct{} { return t.r.Available() }
func (t *typedReader[T, S]) addSplits(splits []Split) error {
	ss, err := unwrapSplits(t.ser, splits)
	if err != nil {
		return err
	}
	return t.r.AddSplits(ss)
}
func (t *typedReader[T, S]) noMoreSplits() { t.r.NotifyNoMoreSplits() }
func (t *typedReader[T, S]) snapshot(id int64) ([]Split, error) {
	ss, err := t.r.SnapshotState(id)
	if err != nil {
		return nil, err
	}
	out := make([]Split, 0, len(ss))
	for _, s := range ss {
		w, err := wrapSplit(t.index, t.ser, s)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}
func (t *typedReader[T, S]) handleEvent(e source.Event) error {
	if h, ok := t.r.(source.ReaderEventHandler); ok {
		return h.HandleSourceEvent(e)
	}
	return nil
}
func (t *typedReader[T, S]) pauseOrResume(pause, resume []string) error {
	if p, ok := t.r.(source.SplitPauser); ok {
		return p.PauseOrResumeSplits(pause, resume)
	}
	return fmt.Errorf("hybrid: the reader of source %d cannot pause splits: %w", t.index, errors.ErrUnsupported)
}
func (t *typedReader[T, S]) notifyComplete(id int64) error {
	if l, ok := t.r.(source.CheckpointListener); ok {
		return l.NotifyCheckpointComplete(id)
	}
	return nil
}
func (t *typedReader[T, S]) notifyCommitted(id int64) error {
	if l, ok := t.r.(source.CommitListener); ok {
		return l.NotifyCheckpointCommitted(id)
	}
	return nil
}
func (t *typedReader[T, S]) notifyAborted(id int64) error {
	if l, ok := t.r.(source.CheckpointAbortListener); ok {
		return l.NotifyCheckpointAborted(id)
	}
	return nil
}
func (t *typedReader[T, S]) close() error { return t.r.Close() }
