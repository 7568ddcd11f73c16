package connectortest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/sluice-io/sluice/internal/sinkerase"
	"github.com/sluice-io/sluice/internal/sinkrt"
	"github.com/sluice-io/sluice/sink"
)

// probe watches a sink at parallelism 1 for records that become visible in
// the external system's committed view before the checkpoint they belong to
// completed. The pipeline adds every record right before the sink writer
// gets it (same goroutine, chained), PrepareCommit cuts them into the
// checkpoint's epoch, and the committed view is read right after
// PrepareCommit returns and right before the committer commits.
type probe struct {
	view func() ([]Record, error)

	mu       sync.Mutex
	epoch    []Record
	prepared map[int64][]Record // by checkpoint id, until committed
	checks   int                // checks before a commit
	errs     []string
}

func newProbe(view func() ([]Record, error)) *probe {
	return &probe{view: view, prepared: map[int64][]Record{}}
}

func (p *probe) add(r Record) {
	p.mu.Lock()
	p.epoch = append(p.epoch, r)
	p.mu.Unlock()
}

func (p *probe) failf(format string, args ...any) {
	p.mu.Lock()
	p.errs = append(p.errs, fmt.Sprintf(format, args...))
	p.mu.Unlock()
}

// afterPrepare moves the current epoch to checkpoint id and checks that
// none of it is visible.
func (p *probe) afterPrepare(id int64) {
	p.mu.Lock()
	p.prepared[id] = append(p.prepared[id], p.epoch...)
	p.epoch = nil
	p.mu.Unlock()
	p.check(id, fmt.Sprintf("right after PrepareCommit(%d)", id))
}

// beforeCommit checks that nothing of checkpoint id or later is visible.
func (p *probe) beforeCommit(id int64) {
	p.mu.Lock()
	p.checks++
	p.mu.Unlock()
	p.check(id, fmt.Sprintf("right before the committer commits checkpoint %d", id))
}

func (p *probe) check(from int64, when string) {
	view, err := p.view()
	if err != nil {
		p.failf("read the committed view %s: %v", when, err)
		return
	}
	visible := make(map[key]bool, len(view))
	for _, r := range view {
		visible[r.key()] = true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, rs := range p.prepared {
		if id < from {
			continue
		}
		for _, r := range rs {
			if visible[r.key()] {
				p.errs = append(p.errs, fmt.Sprintf("record split %d seq %d of checkpoint %d is visible in the committed view %s, before checkpoint %d completed and was committed", r.Split, r.Seq, id, when, id))
				return
			}
		}
	}
}

func (p *probe) result() (checks int, errs []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.checks, append([]string(nil), p.errs...)
}

// wrapProbe wraps s at the runtime's erased level so that the probe sees
// PrepareCommit and Commit (like faultinject.WrapSink).
func wrapProbe[T any](s sink.Sink[T], p *probe) sink.Sink[T] {
	return &probeSink[T]{inner: sinkerase.Erase(s), p: p}
}

type probeSink[T any] struct {
	inner sinkerase.Sink[T]
	p     *probe
}

var _ sinkerase.Sink[int] = (*probeSink[int])(nil)

func (s *probeSink[T]) CreateWriter(ctx context.Context, ic sink.InitContext) (sink.Writer[T], error) {
	w, _, err := s.NewWriter(ctx, ic, nil)
	return w, err
}

func (s *probeSink[T]) NewWriter(ctx context.Context, ic sink.InitContext, restored [][]byte) (sink.Writer[T], sinkrt.Writer, error) {
	front, w, err := s.inner.NewWriter(ctx, ic, restored)
	if err != nil {
		return nil, nil, err
	}
	return front, &probeWriter{Writer: w, p: s.p}, nil
}

func (s *probeSink[T]) NewCommitter(ctx context.Context, ic sink.InitContext) (sinkrt.Committer, error) {
	c, err := s.inner.NewCommitter(ctx, ic)
	if err != nil || c == nil {
		return c, err
	}
	return &probeCommitter{Committer: c, p: s.p}, nil
}

func (s *probeSink[T]) NewGlobalCommitter(ctx context.Context, ic sink.InitContext) (sinkrt.GlobalCommitter, error) {
	return s.inner.NewGlobalCommitter(ctx, ic)
}

func (s *probeSink[T]) Describe() string { return s.inner.Describe() }

type probeWriter struct {
	sinkrt.Writer
	p *probe
}

func (w *probeWriter) PrepareCommitRaw(ctx context.Context, id int64) ([][]byte, error) {
	cs, err := w.Writer.PrepareCommitRaw(ctx, id)
	if err == nil {
		w.p.afterPrepare(id)
	}
	return cs, err
}

type probeCommitter struct {
	sinkrt.Committer
	p *probe
}

func (c *probeCommitter) Commit(ctx context.Context, reqs []*sinkrt.Request) error {
	if len(reqs) > 0 {
		id := reqs[0].CheckpointID
		for _, r := range reqs {
			id = min(id, r.CheckpointID)
		}
		c.p.beforeCommit(id)
	}
	return c.Committer.Commit(ctx, reqs)
}

// commitSpy counts the commit requests a job's committers get and their
// outcomes.
type commitSpy struct {
	mu         sync.Mutex
	committers int // committers created
	requests   int
	outcomes   map[sinkrt.Outcome]int
}

func wrapSpy[T any](s sink.Sink[T], spy *commitSpy) sink.Sink[T] {
	return &spySink[T]{Sink: sinkerase.Erase(s), spy: spy}
}

type spySink[T any] struct {
	sinkerase.Sink[T]
	spy *commitSpy
}

func (s *spySink[T]) CreateWriter(ctx context.Context, ic sink.InitContext) (sink.Writer[T], error) {
	w, _, err := s.NewWriter(ctx, ic, nil)
	return w, err
}

func (s *spySink[T]) NewCommitter(ctx context.Context, ic sink.InitContext) (sinkrt.Committer, error) {
	c, err := s.Sink.NewCommitter(ctx, ic)
	if err != nil || c == nil {
		return c, err
	}
	s.spy.mu.Lock()
	s.spy.committers++
	s.spy.mu.Unlock()
	return &spyCommitter{Committer: c, spy: s.spy}, nil
}

type spyCommitter struct {
	sinkrt.Committer
	spy *commitSpy
}

func (c *spyCommitter) Commit(ctx context.Context, reqs []*sinkrt.Request) error {
	err := c.Committer.Commit(ctx, reqs)
	c.spy.mu.Lock()
	defer c.spy.mu.Unlock()
	if c.spy.outcomes == nil {
		c.spy.outcomes = map[sinkrt.Outcome]int{}
	}
	c.spy.requests += len(reqs)
	for _, r := range reqs {
		c.spy.outcomes[r.Outcome]++
	}
	return err
}

func (c *commitSpy) committed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.committers > 0
}

func (c *commitSpy) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprintf("%d requests, outcomes %v", c.requests, c.outcomes)
}

// commitHold holds the first commit of checkpoint at or later in its
// committer until release; with applied, the wrapped committer commits
// first, then the call is held.
type commitHold struct {
	at          int64
	applied     bool
	held        atomic.Int64 // checkpoint id of the held commit; 0 = none yet
	noCommitter atomic.Bool  // the sink made no committer
	once        sync.Once
	released    chan struct{}
	relOnce     sync.Once
}

func newCommitHold(at int64, applied bool) *commitHold {
	return &commitHold{at: at, applied: applied, released: make(chan struct{})}
}

func (h *commitHold) heldID() int64 { return h.held.Load() }

func (h *commitHold) release() { h.relOnce.Do(func() { close(h.released) }) }

func wrapHold[T any](s sink.Sink[T], h *commitHold) sink.Sink[T] {
	return &holdSink[T]{Sink: sinkerase.Erase(s), h: h}
}

type holdSink[T any] struct {
	sinkerase.Sink[T]
	h *commitHold
}

func (s *holdSink[T]) CreateWriter(ctx context.Context, ic sink.InitContext) (sink.Writer[T], error) {
	w, _, err := s.NewWriter(ctx, ic, nil)
	return w, err
}

func (s *holdSink[T]) NewCommitter(ctx context.Context, ic sink.InitContext) (sinkrt.Committer, error) {
	c, err := s.Sink.NewCommitter(ctx, ic)
	if err != nil {
		return c, err
	}
	if c == nil {
		s.h.noCommitter.Store(true)
		return c, nil
	}
	return &holdCommitter{Committer: c, h: s.h}, nil
}

type holdCommitter struct {
	sinkrt.Committer
	h *commitHold
}

func (c *holdCommitter) Commit(ctx context.Context, reqs []*sinkrt.Request) error {
	var id int64
	for _, r := range reqs {
		id = max(id, r.CheckpointID)
	}
	hold := false
	if id >= c.h.at {
		c.h.once.Do(func() { hold = true })
	}
	if !hold {
		return c.Committer.Commit(ctx, reqs)
	}
	var err error
	if c.h.applied {
		err = c.Committer.Commit(ctx, reqs)
	}
	c.h.held.Store(id)
	select {
	case <-ctx.Done():
	case <-c.h.released:
	}
	// The job is being cancelled: whatever the outcome, the runtime must
	// not count on this commit.
	for _, r := range reqs {
		r.Outcome, r.Err = sinkrt.FailedUnknown, errors.Join(errors.New("connectortest: commit held until the job was cancelled"), err)
	}
	return nil
}
