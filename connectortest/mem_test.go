package connectortest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/sink"
	"github.com/sluice-io/sluice/source"
)

// This file holds small in-memory connectors for the suite's own tests: a
// bounded source over slices and a two-phase sink into a map, each with
// switches that break them in one specific way.

// memSplit is split ID of a memSource, read up to Next.
type memSplit struct {
	ID    int `json:"id"`
	Next  int `json:"next"`
	Start int `json:"start"`
}

func (s memSplit) SplitID() string { return fmt.Sprint("mem-", s.ID) }

type memSource struct {
	data [][]Record
	// forgetPosition makes readers snapshot their splits at the position
	// they were assigned at, not where they are.
	forgetPosition bool
	// forgetIdle makes the enumerator signal no more splits only to
	// readers that got a split.
	forgetIdle bool
}

func (s *memSource) Boundedness() source.Boundedness { return source.Bounded }

func (s *memSource) CreateEnumerator(ctx source.EnumeratorContext[memSplit]) (source.Enumerator[memSplit, []memSplit], error) {
	e := &memEnum{ctx: ctx, s: s, served: map[int]bool{}}
	for i := range s.data {
		e.pending = append(e.pending, memSplit{ID: i})
	}
	return e, nil
}

func (s *memSource) RestoreEnumerator(ctx source.EnumeratorContext[memSplit], st []memSplit) (source.Enumerator[memSplit, []memSplit], error) {
	return &memEnum{ctx: ctx, s: s, pending: st, served: map[int]bool{}}, nil
}

func (s *memSource) CreateReader(ctx source.ReaderContext) (source.Reader[Record, memSplit], error) {
	return &memReader{s: s, ctx: ctx, avail: make(chan struct{})}, nil
}

func (s *memSource) SplitSerializer() serde.Versioned[memSplit] { return serde.JSON[memSplit](1) }
func (s *memSource) EnumeratorStateSerializer() serde.Versioned[[]memSplit] {
	return serde.JSON[[]memSplit](1)
}

type memEnum struct {
	ctx     source.EnumeratorContext[memSplit]
	s       *memSource
	pending []memSplit
	served  map[int]bool // subtasks that got a split
}

func (e *memEnum) Start(context.Context) error { return nil }
func (e *memEnum) AddReader(int) error         { return nil }
func (e *memEnum) Close() error                { return nil }

func (e *memEnum) HandleSplitRequest(subtask int, _ string) error {
	if len(e.pending) == 0 {
		if e.served[subtask] || !e.s.forgetIdle {
			e.ctx.SignalNoMoreSplits(subtask)
		}
		return nil
	}
	sp := e.pending[0]
	e.pending = e.pending[1:]
	e.served[subtask] = true
	return e.ctx.AssignSplits(map[int][]memSplit{subtask: {sp}})
}

func (e *memEnum) AddSplitsBack(splits []memSplit, _ int) error {
	e.pending = append(e.pending, splits...)
	return nil
}

func (e *memEnum) SnapshotState(int64) ([]memSplit, error) { return slices.Clone(e.pending), nil }

type memReader struct {
	s      *memSource
	ctx    source.ReaderContext
	splits []memSplit
	noMore bool
	avail  chan struct{}
}

func (r *memReader) Start(context.Context) error { r.ctx.SendSplitRequest(); return nil }

func (r *memReader) PollNext(out source.Output[Record]) (source.InputStatus, error) {
	if len(r.splits) == 0 {
		if r.noMore {
			return source.EndOfInput, nil
		}
		r.avail = make(chan struct{})
		return source.NothingAvailable, nil
	}
	sp := &r.splits[0]
	data := r.s.data[sp.ID]
	so := out.ForSplit(sp.SplitID())
	for n := 0; n < 100 && sp.Next < len(data); n++ {
		so.Collect(data[sp.Next])
		sp.Next++
	}
	if sp.Next == len(data) {
		out.ReleaseSplit(sp.SplitID())
		r.splits = r.splits[1:]
		r.ctx.SendSplitRequest()
	}
	return source.MoreAvailable, nil
}

func (r *memReader) wake() {
	select {
	case <-r.avail:
	default:
		close(r.avail)
	}
}

func (r *memReader) Available() <-chan struct{} { return r.avail }

func (r *memReader) AddSplits(splits []memSplit) error {
	for _, sp := range splits {
		sp.Start = sp.Next
		r.splits = append(r.splits, sp)
	}
	r.wake()
	return nil
}

func (r *memReader) NotifyNoMoreSplits() { r.noMore = true; r.wake() }

func (r *memReader) SnapshotState(int64) ([]memSplit, error) {
	out := slices.Clone(r.splits)
	if r.s.forgetPosition {
		for i := range out {
			out[i].Next = out[i].Start
		}
	}
	return out, nil
}

func (r *memReader) Close() error { return nil }

// memSourceContext is the SourceContext of a memSource.
type memSourceContext struct {
	src *memSource
}

func (c *memSourceContext) Write(split int, recs []Record) error {
	c.src.data[split] = append(c.src.data[split], recs...)
	return nil
}

func (c *memSourceContext) Source() (source.Source[Record, memSplit, []memSplit], error) {
	return c.src, nil
}

func (c *memSourceContext) Record(r Record) (Record, error) { return r, nil }
func (c *memSourceContext) Close() error                    { return nil }

func memSourceFactory(configure func(*memSource)) func(SourceSettings) (SourceContext[Record, memSplit, []memSplit], error) {
	return func(s SourceSettings) (SourceContext[Record, memSplit, []memSplit], error) {
		if !s.Bounded {
			return nil, fmt.Errorf("memSource is bounded: %w", errors.ErrUnsupported)
		}
		src := &memSource{data: make([][]Record, s.Splits)}
		configure(src)
		return &memSourceContext{src: src}, nil
	}
}

// memTxn names a staged transaction of a memStore.
type memTxn struct {
	Subtask    int   `json:"subtask"`
	Checkpoint int64 `json:"checkpoint"`
}

// memStore is an external system with transactions.
type memStore struct {
	// visibleInPrepare makes PrepareCommit write straight into the
	// committed view.
	visibleInPrepare bool
	// failOnRecommit makes committing a committed transaction an error.
	failOnRecommit bool
	// neverAbort makes writers leave the staged transactions of failed
	// attempts behind.
	neverAbort bool
	// forgetHigher makes writers abort only their own subtask's leftovers,
	// not those of subtasks beyond the parallelism (after scaling down).
	forgetHigher bool

	mu        sync.Mutex
	committed []Record
	staged    map[memTxn][]Record
	done      map[memTxn]bool
}

func newMemStore() *memStore {
	return &memStore{staged: map[memTxn][]Record{}, done: map[memTxn]bool{}}
}

func (s *memStore) CreateWriter(ctx context.Context, ic sink.InitContext) (sink.CommittingWriter[Record, memTxn], error) {
	sub, p := ic.SubtaskIndex(), ic.Parallelism()
	restored, ok := ic.RestoredCheckpointID()
	if (ic.Attempt() > 0 || ok) && !s.neverAbort {
		s.mu.Lock()
		for t := range s.staged {
			if (t.Subtask == sub || (sub == 0 && t.Subtask >= p && !s.forgetHigher)) && (!ok || t.Checkpoint > restored) {
				delete(s.staged, t)
			}
		}
		s.mu.Unlock()
	}
	return &memWriter{s: s, sub: sub}, nil
}

func (s *memStore) CreateCommitter(context.Context, sink.InitContext) (sink.Committer[memTxn], error) {
	return s, nil
}
func (s *memStore) CommittableSerializer() serde.Versioned[memTxn] { return serde.JSON[memTxn](1) }

func (s *memStore) Commit(_ context.Context, reqs []sink.CommitRequest[memTxn]) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range reqs {
		t := r.Committable()
		recs, ok := s.staged[t]
		switch {
		case s.done[t] && s.failOnRecommit:
			r.SignalFailedWithUnknownReason(fmt.Errorf("transaction %+v: already committed", t))
		case s.done[t]:
			r.SignalAlreadyCommitted()
		case !ok:
			r.SignalFailedWithUnknownReason(fmt.Errorf("transaction %+v is unknown", t))
		default:
			delete(s.staged, t)
			s.done[t] = true
			s.committed = append(s.committed, recs...)
		}
	}
	return nil
}

func (s *memStore) Close() error { return nil }

type memWriter struct {
	s   *memStore
	sub int
	buf []Record
}

func (w *memWriter) Write(ctx context.Context, r Record, _ sink.Meta) error {
	w.buf = append(w.buf, r)
	return nil
}
func (w *memWriter) Flush(context.Context, bool) error { return nil }
func (w *memWriter) Close() error                      { return nil }

func (w *memWriter) PrepareCommit(ctx context.Context, id int64) ([]memTxn, error) {
	if len(w.buf) == 0 {
		return nil, nil
	}
	t := memTxn{Subtask: w.sub, Checkpoint: id}
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	if w.s.visibleInPrepare {
		w.s.committed = append(w.s.committed, w.buf...)
		w.s.staged[t] = nil
	} else {
		w.s.staged[t] = w.buf
	}
	w.buf = nil
	return []memTxn{t}, nil
}

// memSinkContext is the SinkContext of a memStore.
type memSinkContext struct{ s *memStore }

func (c *memSinkContext) Sink() (sink.Sink[Record], error) {
	return sink.NewTwoPhase[Record, memTxn](c.s), nil
}

func (c *memSinkContext) Value(r Record) Record { return r }

func (c *memSinkContext) Committed() ([]Record, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return slices.Clone(c.s.committed), nil
}

func (c *memSinkContext) Pending() ([]string, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	var out []string
	for t := range c.s.staged {
		out = append(out, fmt.Sprintf("%+v", t))
	}
	return out, nil
}

func (c *memSinkContext) Close() error { return nil }

func memSinkFactory(configure func(*memStore)) func(SinkSettings) (SinkContext[Record], error) {
	return func(s SinkSettings) (SinkContext[Record], error) {
		if s.Guarantee != ExactlyOnce {
			return nil, fmt.Errorf("memStore is exactly-once only: %w", errors.ErrUnsupported)
		}
		st := newMemStore()
		configure(st)
		return &memSinkContext{s: st}, nil
	}
}

// memUpsert is an idempotent sink without a committer: a writer stores
// each record under its key at once, so a replay rewrites the same
// entries. It gives exactly-once results without two-phase commit, as an
// upsert into a keyed table does.
type memUpsert struct {
	mu   sync.Mutex
	rows map[key]Record
}

func (s *memUpsert) CreateWriter(context.Context, sink.InitContext) (sink.Writer[Record], error) {
	return memUpsertWriter{s}, nil
}

type memUpsertWriter struct{ s *memUpsert }

func (w memUpsertWriter) Write(_ context.Context, r Record, _ sink.Meta) error {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	w.s.rows[r.key()] = r
	return nil
}
func (memUpsertWriter) Flush(context.Context, bool) error { return nil }
func (memUpsertWriter) Close() error                      { return nil }

// memUpsertContext is the SinkContext of a memUpsert.
type memUpsertContext struct{ s *memUpsert }

func (c *memUpsertContext) Sink() (sink.Sink[Record], error) { return c.s, nil }
func (c *memUpsertContext) Value(r Record) Record            { return r }
func (c *memUpsertContext) Pending() ([]string, error)       { return nil, nil }
func (c *memUpsertContext) Close() error                     { return nil }

func (c *memUpsertContext) Committed() ([]Record, error) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	out := make([]Record, 0, len(c.s.rows))
	for _, r := range c.s.rows {
		out = append(out, r)
	}
	// A keyed table has no order of its own: read it back by key.
	slices.SortFunc(out, func(a, b Record) int {
		if a.Split != b.Split {
			return a.Split - b.Split
		}
		return int(a.Seq - b.Seq)
	})
	return out, nil
}

func memUpsertFactory(s SinkSettings) (SinkContext[Record], error) {
	return &memUpsertContext{s: &memUpsert{rows: map[key]Record{}}}, nil
}
