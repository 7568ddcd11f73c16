package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/source"
	"github.com/sluice-io/sluice/watermark"
)

type sourceFactory interface {
	validate() error
	boundedness() source.Boundedness
	newEnumerator(ctx *enumContext, state []byte) (enumHandle, error)
	newHead(env *taskEnv, next any, restored [][]byte) (sourceHead, error)
}

// enumHandle is an enumerator with its split type erased.
type enumHandle interface {
	start(ctx context.Context) error
	handleSplitRequest(subtask int, location string) error
	addReader(subtask int) error
	addSplitsBack(splits any, subtask int) error
	snapshot(id int64) ([]byte, error)
	handleEvent(subtask int, e source.Event) error
	notifyComplete(id int64) error
	notifyAborted(id int64) error
	close() error
}

// sourceHead is a reader with its types erased, plus its output.
type sourceHead interface {
	start(ctx context.Context) error
	poll() (source.InputStatus, error)
	available() <-chan struct{}
	addSplits(splits any) error
	noMoreSplits()
	snapshot(id int64) ([][]byte, error)
	handleEvent(e source.Event) error
	notifyComplete(id int64) error
	notifyCommitted(id int64) error
	notifyAborted(id int64) error
	periodicWatermark()
	flushCount()
	close() error
}

// SourceNode adds a source with a watermark strategy.
func SourceNode[T any, S source.Split, E any](g *Graph, name string, src source.Source[T, S, E], ws watermark.Strategy[T]) *Node {
	return g.add(&Node{name: name, kind: kindSource, out: typedPort[T]{}, src: &sourceFact[T, S, E]{src: src, ws: ws}})
}

type sourceFact[T any, S source.Split, E any] struct {
	src source.Source[T, S, E]
	ws  watermark.Strategy[T]
}

func (f *sourceFact[T, S, E]) validate() error {
	if f.src == nil {
		return errors.New("source is nil")
	}
	if f.src.SplitSerializer() == nil {
		return errors.New("SplitSerializer() returned nil; a source must serialize its splits into checkpoints")
	}
	if f.src.EnumeratorStateSerializer() == nil {
		return errors.New("EnumeratorStateSerializer() returned nil; a source must serialize its enumerator state into checkpoints")
	}
	if a, ok := f.ws.Alignment(); ok {
		if err := a.Validate(); err != nil {
			return err
		}
	}
	return nil
}

func (f *sourceFact[T, S, E]) boundedness() source.Boundedness { return f.src.Boundedness() }

func (f *sourceFact[T, S, E]) newEnumerator(ctx *enumContext, state []byte) (enumHandle, error) {
	tctx := &typedEnumContext[S]{enumContext: ctx}
	var (
		e   source.Enumerator[S, E]
		err error
	)
	if state == nil {
		e, err = f.src.CreateEnumerator(tctx)
	} else {
		st, derr := serde.Unmarshal(f.src.EnumeratorStateSerializer(), state)
		if derr != nil {
			return nil, fmt.Errorf("restore enumerator state: %w", derr)
		}
		e, err = f.src.RestoreEnumerator(tctx, st)
	}
	if err != nil {
		return nil, err
	}
	if e == nil {
		return nil, errors.New("source returned a nil enumerator")
	}
	return &typedEnum[S, E]{e: e, ser: f.src.EnumeratorStateSerializer(), log: ctx.log()}, nil
}

// typedEnum calls the enumerator on the coordinator goroutine. A panic in
// a call becomes its error (wrapping ErrPanic), so the job fails naming the
// source's enumerator.
type typedEnum[S source.Split, E any] struct {
	e   source.Enumerator[S, E]
	ser serde.Versioned[E]
	log *slog.Logger
}

func (t *typedEnum[S, E]) start(ctx context.Context) (err error) {
	defer recoverTo(&err, t.log, "Enumerator.Start")
	return t.e.Start(ctx)
}
func (t *typedEnum[S, E]) handleSplitRequest(subtask int, loc string) (err error) {
	defer recoverTo(&err, t.log, "Enumerator.HandleSplitRequest")
	return t.e.HandleSplitRequest(subtask, loc)
}
func (t *typedEnum[S, E]) addReader(subtask int) (err error) {
	defer recoverTo(&err, t.log, "Enumerator.AddReader")
	return t.e.AddReader(subtask)
}
func (t *typedEnum[S, E]) addSplitsBack(splits any, subtask int) (err error) {
	defer recoverTo(&err, t.log, "Enumerator.AddSplitsBack")
	return t.e.AddSplitsBack(splits.([]S), subtask)
}
func (t *typedEnum[S, E]) snapshot(id int64) (_ []byte, err error) {
	defer recoverTo(&err, t.log, "Enumerator.SnapshotState")
	st, err := t.e.SnapshotState(id)
	if err != nil {
		return nil, err
	}
	return serde.Marshal(t.ser, st)
}
func (t *typedEnum[S, E]) handleEvent(subtask int, e source.Event) (err error) {
	defer recoverTo(&err, t.log, "Enumerator.HandleSourceEvent")
	if h, ok := t.e.(source.EnumeratorEventHandler); ok {
		return h.HandleSourceEvent(subtask, e)
	}
	return nil
}
func (t *typedEnum[S, E]) notifyComplete(id int64) (err error) {
	defer recoverTo(&err, t.log, "Enumerator.NotifyCheckpointComplete")
	if l, ok := t.e.(source.CheckpointListener); ok {
		return l.NotifyCheckpointComplete(id)
	}
	return nil
}
func (t *typedEnum[S, E]) notifyAborted(id int64) (err error) {
	defer recoverTo(&err, t.log, "Enumerator.NotifyCheckpointAborted")
	if l, ok := t.e.(source.CheckpointAbortListener); ok {
		return l.NotifyCheckpointAborted(id)
	}
	return nil
}
func (t *typedEnum[S, E]) close() (err error) {
	defer recoverTo(&err, t.log, "Enumerator.Close")
	return t.e.Close()
}

// typedEnumContext adds the typed AssignSplits to the shared context.
type typedEnumContext[S source.Split] struct{ *enumContext }

func (c *typedEnumContext[S]) AssignSplits(a map[int][]S) error {
	for subtask := range a {
		if subtask < 0 || subtask >= c.parallelism {
			return fmt.Errorf("assign splits: subtask %d does not exist (parallelism %d)", subtask, c.parallelism)
		}
		if _, ok := c.readers[subtask]; !ok {
			return fmt.Errorf("assign splits: reader %d is not registered", subtask)
		}
	}
	for subtask, splits := range a {
		if len(splits) == 0 {
			continue
		}
		c.assign(subtask, append([]S(nil), splits...))
	}
	return nil
}

func (f *sourceFact[T, S, E]) newHead(env *taskEnv, next any, restored [][]byte) (sourceHead, error) {
	out := &sourceOutput[T]{ws: f.ws, wmOn: f.ws.Enabled(), assign: f.ws.HasAssigner(), env: env,
		comb: watermark.NewCombiner[string](), splits: map[string]*splitOutput[T]{},
		buf: make([]elem[T], 0, env.att.job.cfg.BatchSize), batch: env.att.job.cfg.BatchSize}
	if err := setCollector(&out.next, next); err != nil {
		return nil, err
	}
	out.main = &splitOutput[T]{p: out, id: "", gen: nil}
	rctx := &readerContext{env: env}
	r, err := f.src.CreateReader(rctx)
	if err != nil {
		return nil, fmt.Errorf("create reader: %w", err)
	}
	if r == nil {
		return nil, errors.New("source returned a nil reader")
	}
	h := &readerHead[T, S]{r: r, out: out, ser: f.src.SplitSerializer(), in: rctx.Metrics().Counter(metrics.NumRecordsIn)}
	if a, ok := f.ws.Alignment(); ok {
		al, err := newAligner(env, a, r)
		if err != nil {
			_ = r.Close()
			return nil, err
		}
		h.al, out.al = al, al
	}
	if len(restored) > 0 {
		splits, err := serde.UnmarshalAll(h.ser, restored)
		if err != nil {
			_ = r.Close()
			return nil, fmt.Errorf("restore splits: %w", err)
		}
		h.restored = splits
	}
	out.wm.Store(watermark.Min)
	env.metrics.Gauge(metrics.CurrentOutputWatermark, out.wm.Load)
	out.lag.Store(-1)
	env.metrics.Gauge(metrics.CurrentEmitEventTimeLag, out.lag.Load)
	return h, nil
}

type readerHead[T any, S source.Split] struct {
	r        source.Reader[T, S]
	out      *sourceOutput[T]
	ser      serde.Versioned[S]
	restored []S
	in       *metrics.Counter
	al       *aligner // nil without watermark alignment
}

func (h *readerHead[T, S]) start(ctx context.Context) error {
	if err := h.r.Start(ctx); err != nil {
		return fmt.Errorf("start reader: %w", err)
	}
	if len(h.restored) > 0 {
		if h.al != nil {
			if err := h.alignAdd(h.restored); err != nil {
				return err
			}
		}
		if err := h.r.AddSplits(h.restored); err != nil {
			return fmt.Errorf("add restored splits: %w", err)
		}
		h.restored = nil
	}
	return nil
}

func (h *readerHead[T, S]) poll() (source.InputStatus, error) {
	if h.al != nil {
		h.al.kick = false
		if h.al.waiting {
			// Held back by watermark alignment: the reader is not polled;
			// the task serves its mailbox and the watermark ticks re-check.
			return source.NothingAvailable, nil
		}
	}
	st, err := h.r.PollNext(h.out)
	h.out.flush()
	if err != nil {
		return st, fmt.Errorf("poll reader: %w", err)
	}
	if h.out.failed != nil {
		return st, h.out.failed
	}
	if h.al != nil {
		if err := h.alignAfterPoll(st); err != nil {
			return st, err
		}
	}
	return st, nil
}

func (h *readerHead[T, S]) flushCount() {
	if h.out.n > 0 {
		h.in.Add(h.out.n)
		h.out.n = 0
	}
}

func (h *readerHead[T, S]) available() <-chan struct{} {
	if al := h.al; al != nil {
		if al.waiting {
			return nil // a watermark tick resumes the subtask
		}
		if al.kick {
			return readyChan // resumed: poll again
		}
	}
	return h.r.Available()
}

func (h *readerHead[T, S]) addSplits(splits any) error {
	ss, ok := splits.([]S)
	if !ok {
		return fmt.Errorf("internal: got splits of type %T", splits)
	}
	if h.al != nil {
		if err := h.alignAdd(ss); err != nil {
			return err
		}
	}
	if err := h.r.AddSplits(ss); err != nil {
		return fmt.Errorf("add splits: %w", err)
	}
	return nil
}

func (h *readerHead[T, S]) noMoreSplits() { h.r.NotifyNoMoreSplits() }

func (h *readerHead[T, S]) snapshot(id int64) ([][]byte, error) {
	splits, err := h.r.SnapshotState(id)
	if err != nil {
		return nil, fmt.Errorf("snapshot reader at checkpoint %d: %w", id, err)
	}
	b, err := serde.MarshalAll(h.ser, splits)
	if err != nil {
		return nil, fmt.Errorf("serialize splits at checkpoint %d: %w", id, err)
	}
	return b, nil
}

func (h *readerHead[T, S]) handleEvent(e source.Event) error {
	if eh, ok := h.r.(source.ReaderEventHandler); ok {
		return eh.HandleSourceEvent(e)
	}
	return nil
}

func (h *readerHead[T, S]) notifyComplete(id int64) error {
	if l, ok := h.r.(source.CheckpointListener); ok {
		return l.NotifyCheckpointComplete(id)
	}
	return nil
}

func (h *readerHead[T, S]) notifyCommitted(id int64) error {
	if l, ok := h.r.(source.CommitListener); ok {
		return l.NotifyCheckpointCommitted(id)
	}
	return nil
}

func (h *readerHead[T, S]) notifyAborted(id int64) error {
	if l, ok := h.r.(source.CheckpointAbortListener); ok {
		return l.NotifyCheckpointAborted(id)
	}
	return nil
}

func (h *readerHead[T, S]) periodicWatermark() {
	if h.out.wmOn {
		for _, s := range h.out.splits {
			if s.gen != nil {
				s.gen.OnPeriodicEmit(s)
			}
		}
		if h.out.mainUsed && h.out.main.gen != nil {
			h.out.main.gen.OnPeriodicEmit(h.out.main)
		}
	}
	if h.al != nil {
		h.alignTick()
	}
}

func (h *readerHead[T, S]) close() error { return h.r.Close() }

// sourceOutput implements source.Output on top of the chain: it assigns
// timestamps, runs one watermark generator per split, and combines the
// splits' watermarks into the reader's.
type sourceOutput[T any] struct {
	next     Collector[T]
	ws       watermark.Strategy[T]
	wmOn     bool
	assign   bool
	env      *taskEnv
	comb     *watermark.Combiner[string]
	splits   map[string]*splitOutput[T]
	main     *splitOutput[T]
	mainUsed bool
	n        int64
	failed   error
	buf      []elem[T]    // records emitted but not yet handed to the chain
	batch    int          // flush the buffer at this many records (slow path)
	lag      atomic.Int64 // currentEmitEventTimeLag in ms, or -1
	wm       atomic.Int64 // currentOutputWatermark: comb.Current(), for other goroutines
	idle     bool         // every output is idle
	wmDirty  bool         // a split's watermark or idleness changed since the last alignment check
	al       *aligner     // nil without watermark alignment
}

// flush hands the buffered records to the chain. It runs after every
// PollNext and before every watermark, so records and watermarks keep their
// order.
func (o *sourceOutput[T]) flush() {
	if len(o.buf) == 0 {
		return
	}
	recs := o.buf
	o.buf = o.buf[:0]
	o.n += int64(len(recs))
	if ts := recs[len(recs)-1].ts; ts != watermark.NoTimestamp {
		// Once per batch: the event-time lag of the newest record.
		o.lag.Store(time.Now().UnixMilli() - ts)
	}
	o.next.Collect(recs)
	clear(recs)
}

func (o *sourceOutput[T]) useMain() *splitOutput[T] {
	if !o.mainUsed {
		o.mainUsed = true
		if o.wmOn {
			o.main.gen = o.ws.NewGenerator()
			o.comb.Add("")
		}
	}
	return o.main
}

func (o *sourceOutput[T]) Collect(v T)             { o.useMain().CollectAt(v, watermark.NoTimestamp) }
func (o *sourceOutput[T]) CollectAt(v T, ts int64) { o.useMain().CollectAt(v, ts) }
func (o *sourceOutput[T]) EmitWatermark(ts int64)  { o.useMain().EmitWatermark(ts) }
func (o *sourceOutput[T]) MarkIdle()               { o.useMain().MarkIdle() }
func (o *sourceOutput[T]) ForSplit(id string) source.Output[T] {
	if s, ok := o.splits[id]; ok {
		return s.out
	}
	s := &splitOutput[T]{p: o, id: id}
	s.out = s
	if o.wmOn {
		s.gen = o.ws.NewGenerator()
		o.comb.Add(id)
	} else if !o.assign {
		s.out = &fastOutput[T]{o, s}
	}
	o.splits[id] = s
	return s.out
}

func (o *sourceOutput[T]) ReleaseSplit(id string) {
	if _, ok := o.splits[id]; !ok {
		return
	}
	delete(o.splits, id)
	if o.al != nil {
		o.al.released(id)
		o.wmDirty = true
	}
	if o.wmOn {
		o.comb.Remove(id)
		o.advance()
	}
}

func (o *sourceOutput[T]) advance() {
	o.flush()
	wm, advanced, allIdle := o.comb.Advance()
	if advanced {
		o.wm.Store(wm)
		o.env.emitWatermark(wm)
	} else if allIdle {
		o.env.markIdle()
	}
	if advanced || allIdle != o.idle {
		o.idle, o.wmDirty = allIdle, true
	}
}

// splitOutput is the output of one split (or of the reader as a whole).
type splitOutput[T any] struct {
	p   *sourceOutput[T]
	id  string
	gen watermark.Generator
	out source.Output[T] // what ForSplit hands out: s, or a fastOutput
}

func (s *splitOutput[T]) Collect(v T) { s.CollectAt(v, watermark.NoTimestamp) }

// fastOutput is the split output of a source without timestamp assigner
// and watermarks. Its Collect is small enough to be inlined into the method
// wrapper that an interface call on a generic type goes through, which
// halves the cost of the per-record call. It never flushes: the buffer
// grows to what one PollNext emits and is flushed after it.
type fastOutput[T any] struct {
	out *sourceOutput[T] // first: one load from the receiver
	*splitOutput[T]
}

func (f *fastOutput[T]) Collect(v T) {
	o := f.out
	o.buf = append(o.buf, elem[T]{v, watermark.NoTimestamp})
}

func (f *fastOutput[T]) CollectBatch(vs []T) {
	o := f.out
	buf := slices.Grow(o.buf, len(vs))
	n := len(buf)
	buf = buf[:n+len(vs)]
	for i, v := range vs {
		buf[n+i] = elem[T]{v, watermark.NoTimestamp}
	}
	o.buf = buf
}

func (s *splitOutput[T]) CollectBatch(vs []T) {
	for _, v := range vs {
		s.CollectAt(v, watermark.NoTimestamp)
	}
}

func (o *sourceOutput[T]) CollectBatch(vs []T) { o.useMain().CollectBatch(vs) }

var (
	_ source.BatchCollector[int] = (*fastOutput[int])(nil)
	_ source.BatchCollector[int] = (*splitOutput[int])(nil)
	_ source.BatchCollector[int] = (*sourceOutput[int])(nil)
)

func (f *fastOutput[T]) CollectAt(v T, ts int64) {
	o := f.out
	o.buf = append(o.buf, elem[T]{v, ts})
}

func (s *splitOutput[T]) CollectAt(v T, ts int64) {
	p := s.p
	if p.assign {
		ts = p.ws.Timestamp(v, ts)
	}
	if s.gen != nil {
		s.gen.OnEvent(ts, s)
	}
	p.buf = append(p.buf, elem[T]{v, ts})
	if len(p.buf) >= p.batch {
		p.flush()
	}
}

func (s *splitOutput[T]) EmitWatermark(ts int64) {
	if !s.p.wmOn {
		// Watermarks emitted by the reader itself still count.
		s.p.wmOn = true
	}
	if s.p.al != nil {
		if old, ok := s.p.comb.Watermark(s.id); !ok || ts > old {
			s.p.wmDirty = true // for watermark alignment
		}
	}
	s.p.comb.Update(s.id, ts)
	s.p.advance()
}

func (s *splitOutput[T]) MarkIdle() {
	s.p.comb.MarkIdle(s.id)
	s.p.advance()
}

func (s *splitOutput[T]) ForSplit(id string) source.Output[T] { return s.p.ForSplit(id) }
func (s *splitOutput[T]) ReleaseSplit(id string)              { s.p.ReleaseSplit(id) }

// endWatermark is emitted when a source ends, so that event time completes.
const endWatermark = math.MaxInt64
