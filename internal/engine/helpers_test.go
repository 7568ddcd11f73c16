package engine_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/serde"
	"github.com/sluice-io/sluice/source"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rec is a record of the test source: split and position identify it.
type rec struct {
	Split string
	Pos   int64
}

func (r rec) String() string { return fmt.Sprintf("%s@%d", r.Split, r.Pos) }

// rangeSplit is a split of positions [Next, End).
type rangeSplit struct {
	ID   string
	Next int64
	End  int64
}

func (s rangeSplit) SplitID() string { return s.ID }

type enumState struct{ Unassigned []rangeSplit }

// scriptSource is a bounded source whose enumerator and reader call test
// hooks at interesting moments. Hooks run on the coordinator goroutine
// (enumerator) or the task goroutine (reader).
type scriptSource struct {
	splits []rangeSplit
	// onSnapshot runs in the enumerator's SnapshotState; assign hands out
	// splits from the pending ones by id.
	onSnapshot func(id int64, e *scriptEnum)
	// beforeSnapshot runs in SnapshotState before the state is taken.
	beforeSnapshot func(id int64, e *scriptEnum)
	// beforeTrigger runs on the coordinator right before a checkpoint
	// starts (installed with engine.SetBeforeTrigger by run).
	beforeTrigger func(id int64, e *scriptEnum)
	enum          *scriptEnum // the current attempt's enumerator
	// onRestore runs in Start of a restored enumerator.
	onRestore func(e *scriptEnum)
	// onAddReader runs in AddReader once the enumerator started (a reader
	// registering again after a regional restart); onSplitsBack in
	// AddSplitsBack.
	onAddReader  func(subtask int, e *scriptEnum)
	onSplitsBack func(splits []rangeSplit, subtask int)
	// readers counts CreateReader calls per subtask, if not nil.
	readers map[int]int
	mu      sync.Mutex
	// push: assign everything at AddReader time (round-robin); otherwise
	// splits are only handed out by hooks or on request.
	pull bool
	// holdUntil keeps the reader from reading a split until the checkpoint
	// with this id completed (first attempt only).
	holdUntil map[string]int64
	// hold, if set, keeps the reader from reading a split while it returns
	// true, given the highest completed checkpoint.
	hold func(completed int64, sp rangeSplit) bool
	// failAt makes the reader fail before emitting a record.
	failAt func(attempt int, r rec) bool
	// perPoll bounds records per PollNext.
	perPoll int
	// roundRobin reads the reader's splits in turn, perPoll records each,
	// instead of one after the other.
	roundRobin bool
	// readerErr / enumErr make the reader / enumerator fail at start.
	readerErr, enumErr error
}

func (s *scriptSource) Boundedness() source.Boundedness { return source.Bounded }
func (s *scriptSource) CreateEnumerator(ctx source.EnumeratorContext[rangeSplit]) (source.Enumerator[rangeSplit, enumState], error) {
	s.enum = &scriptEnum{s: s, ctx: ctx, pending: slices.Clone(s.splits)}
	return s.enum, nil
}
func (s *scriptSource) RestoreEnumerator(ctx source.EnumeratorContext[rangeSplit], st enumState) (source.Enumerator[rangeSplit, enumState], error) {
	s.enum = &scriptEnum{s: s, ctx: ctx, pending: st.Unassigned, restored: true}
	return s.enum, nil
}
func (s *scriptSource) CreateReader(ctx source.ReaderContext) (source.Reader[rec, rangeSplit], error) {
	s.mu.Lock()
	if s.readers != nil {
		s.readers[ctx.SubtaskIndex()]++
	}
	s.mu.Unlock()
	return &scriptReader{s: s, ctx: ctx, avail: make(chan struct{})}, nil
}
func (s *scriptSource) SplitSerializer() serde.Versioned[rangeSplit] {
	return serde.JSON[rangeSplit](1)
}
func (s *scriptSource) EnumeratorStateSerializer() serde.Versioned[enumState] {
	return serde.JSON[enumState](1)
}

type scriptEnum struct {
	s        *scriptSource
	ctx      source.EnumeratorContext[rangeSplit]
	pending  []rangeSplit
	restored bool
	started  bool
}

func (e *scriptEnum) Start(context.Context) error {
	e.started = true
	if e.restored && e.s.onRestore != nil {
		e.s.onRestore(e)
	}
	return e.s.enumErr
}

func (e *scriptEnum) HandleSplitRequest(subtask int, _ string) error {
	if len(e.pending) == 0 {
		e.ctx.SignalNoMoreSplits(subtask)
		return nil
	}
	sp := e.pending[0]
	e.pending = e.pending[1:]
	return e.ctx.AssignSplits(map[int][]rangeSplit{subtask: {sp}})
}

func (e *scriptEnum) AddSplitsBack(splits []rangeSplit, subtask int) error {
	if e.s.onSplitsBack != nil {
		e.s.onSplitsBack(splits, subtask)
	}
	e.pending = append(e.pending, splits...)
	return nil
}

func (e *scriptEnum) AddReader(subtask int) error {
	if e.started && e.s.onAddReader != nil {
		e.s.onAddReader(subtask, e)
	}
	return nil
}

// assign hands the pending split with this id to a subtask now.
func (e *scriptEnum) assign(id string, subtask int) {
	for i, sp := range e.pending {
		if sp.ID == id {
			e.pending = slices.Delete(e.pending, i, i+1)
			if err := e.ctx.AssignSplits(map[int][]rangeSplit{subtask: {sp}}); err != nil {
				panic(err)
			}
			return
		}
	}
}

// finish signals no more splits to every reader once nothing is pending.
func (e *scriptEnum) finish() {
	if len(e.pending) == 0 {
		for i := range e.ctx.Parallelism() {
			e.ctx.SignalNoMoreSplits(i)
		}
	}
}

func (e *scriptEnum) SnapshotState(id int64) (enumState, error) {
	if e.s.beforeSnapshot != nil {
		e.s.beforeSnapshot(id, e)
	}
	st := enumState{Unassigned: slices.Clone(e.pending)}
	if e.s.onSnapshot != nil {
		e.s.onSnapshot(id, e)
	}
	return st, nil
}

func (e *scriptEnum) Close() error { return nil }

type scriptReader struct {
	s         *scriptSource
	ctx       source.ReaderContext
	splits    []rangeSplit
	noMore    bool
	avail     chan struct{}
	completed int64
}

func (r *scriptReader) NotifyCheckpointComplete(id int64) error {
	r.completed = max(r.completed, id)
	return nil
}

func (r *scriptReader) Start(context.Context) error {
	if r.s.readerErr != nil {
		return r.s.readerErr
	}
	if r.s.pull {
		r.ctx.SendSplitRequest()
	}
	return nil
}

func (r *scriptReader) PollNext(out source.Output[rec]) (source.InputStatus, error) {
	if len(r.splits) == 0 {
		if r.noMore {
			return source.EndOfInput, nil
		}
		return source.NothingAvailable, nil
	}
	// Read the first split that is not held; held splits exist (for
	// watermarks) but have no data yet.
	k := -1
	for i, sp := range r.splits {
		out.ForSplit(sp.ID)
		if !r.held(sp) {
			k = i
			break
		}
	}
	if k < 0 {
		return source.NothingAvailable, nil
	}
	r.splits = append(r.splits[k:], r.splits[:k]...)
	sp := &r.splits[0]
	so := out.ForSplit(sp.ID)
	n := r.s.perPoll
	if n == 0 {
		n = 100
	}
	for ; n > 0 && sp.Next < sp.End; n-- {
		v := rec{sp.ID, sp.Next}
		if r.s.failAt != nil && r.s.failAt(r.ctx.Attempt(), v) {
			return source.MoreAvailable, fmt.Errorf("injected failure before %s", v)
		}
		so.Collect(v)
		sp.Next++
	}
	if sp.Next >= sp.End {
		out.ReleaseSplit(sp.ID)
		r.splits = r.splits[1:]
		if r.s.pull {
			r.ctx.SendSplitRequest()
		}
	} else if r.s.roundRobin && len(r.splits) > 1 {
		r.splits = append(r.splits[1:], r.splits[0])
	}
	return source.MoreAvailable, nil
}

func (r *scriptReader) held(sp rangeSplit) bool {
	if id, ok := r.s.holdUntil[sp.ID]; ok && r.completed < id && r.ctx.Attempt() == 0 {
		return true
	}
	return r.s.hold != nil && r.s.hold(r.completed, sp)
}

func (r *scriptReader) Available() <-chan struct{} { return r.avail }

func (r *scriptReader) AddSplits(splits []rangeSplit) error {
	r.splits = append(r.splits, splits...)
	return nil
}

func (r *scriptReader) NotifyNoMoreSplits() { r.noMore = true }

func (r *scriptReader) SnapshotState(int64) ([]rangeSplit, error) { return slices.Clone(r.splits), nil }

func (r *scriptReader) Close() error { return nil }

// expectExactlyOnce checks that got holds every record of the splits once,
// in order per split, and reports the first missing and duplicated record.
func expectExactlyOnce(t *testing.T, splits []rangeSplit, got []rec) {
	t.Helper()
	seen := map[rec]int{}
	last := map[string]int64{}
	for _, r := range got {
		seen[r]++
		if p, ok := last[r.Split]; ok && r.Pos <= p && seen[r] == 1 {
			t.Errorf("split %s out of order: %d after %d", r.Split, r.Pos, p)
		}
		last[r.Split] = r.Pos
	}
	var missing, dup []rec
	want := 0
	for _, sp := range splits {
		for p := sp.Next; p < sp.End; p++ {
			want++
			switch seen[rec{sp.ID, p}] {
			case 0:
				missing = append(missing, rec{sp.ID, p})
			case 1:
			default:
				dup = append(dup, rec{sp.ID, p})
			}
		}
	}
	if len(got) != want || len(missing) > 0 || len(dup) > 0 {
		sort.Slice(missing, func(i, j int) bool { return missing[i].String() < missing[j].String() })
		first := func(rs []rec) string {
			if len(rs) == 0 {
				return "none"
			}
			return rs[0].String()
		}
		t.Fatalf("got %d records, want %d: %d missing (first %s), %d duplicated (first %s)",
			len(got), want, len(missing), first(missing), len(dup), first(dup))
	}
}

type (
	sourceEnumCtx = source.EnumeratorContext[rangeSplit]
	sourceEnum    = source.Enumerator[rangeSplit, enumState]
)

// slowSnapshot makes the reader's SnapshotState of checkpoint `at` in the
// first attempt take d.
// blockedSnapshot is a scriptSource whose reader of the first attempt blocks
// in SnapshotState of checkpoint at until release is closed or the reader's
// task is cancelled.
type blockedSnapshot struct {
	*scriptSource
	at      int64
	release chan struct{}
}

func (s *blockedSnapshot) CreateReader(ctx source.ReaderContext) (source.Reader[rec, rangeSplit], error) {
	r, err := s.scriptSource.CreateReader(ctx)
	return &blockedReader{Reader: r, s: s, attempt: ctx.Attempt()}, err
}

type blockedReader struct {
	source.Reader[rec, rangeSplit]
	s       *blockedSnapshot
	attempt int
	ctx     context.Context // the task's, from Start
}

func (r *blockedReader) Start(ctx context.Context) error {
	r.ctx = ctx
	return r.Reader.Start(ctx)
}

func (r *blockedReader) NotifyCheckpointComplete(id int64) error {
	return r.Reader.(source.CheckpointListener).NotifyCheckpointComplete(id)
}

func (r *blockedReader) SnapshotState(id int64) ([]rangeSplit, error) {
	if id == r.s.at && r.attempt == 0 {
		select {
		case <-r.s.release:
		case <-r.ctx.Done():
		}
	}
	return r.Reader.SnapshotState(id)
}

// waitCheckpoints waits, bounded (a hang guard of about 60s: at a load of
// 40 on two cores 10s was too short), until the job completed n
// checkpoints.
func waitCheckpoints(t *testing.T, h *engine.Handle, n int) {
	t.Helper()
	for i := 0; h.Status().Checkpoints.Completed < n; i++ {
		if i > 30000 {
			t.Fatalf("only %d of %d checkpoints completed within 60s", h.Status().Checkpoints.Completed, n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
