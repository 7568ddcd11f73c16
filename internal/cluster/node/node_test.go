package node_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/internal/cluster/coord"
	"github.com/sluice-io/sluice/internal/cluster/memcoord"
	"github.com/sluice-io/sluice/internal/cluster/node"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// sessions hands out memcoord sessions and remembers them by node.
type sessions struct {
	c  *memcoord.Cluster
	mu sync.Mutex
	by map[string][]*memcoord.Node
}

func newSessions() *sessions {
	return &sessions{c: memcoord.NewCluster(), by: map[string][]*memcoord.Node{}}
}

func (s *sessions) connect(id string) func(context.Context) (coord.Coordinator, error) {
	return func(context.Context) (coord.Coordinator, error) {
		n := s.c.Node()
		s.mu.Lock()
		s.by[id] = append(s.by[id], n)
		s.mu.Unlock()
		return n, nil
	}
}

// expire ends the newest session of node id, as a lease running out.
func (s *sessions) expire(id string) {
	s.mu.Lock()
	ns := s.by[id]
	s.mu.Unlock()
	s.c.Expire(ns[len(ns)-1])
}

// led is one call of Lead as the test saw it.
type led struct {
	node    string
	term    node.Term
	ctx     context.Context
	release chan error // what Lead returns (after ctx ends unless sent earlier)
}

// harness runs nodes whose Lead reports each term and then waits.
type harness struct {
	t     *testing.T
	s     *sessions
	terms chan *led
	wg    sync.WaitGroup
	errs  map[string]chan error
}

func newHarness(t *testing.T) *harness {
	return &harness{t: t, s: newSessions(), terms: make(chan *led, 16), errs: map[string]chan error{}}
}

func (h *harness) start(ctx context.Context, id string) {
	errc := make(chan error, 1)
	h.errs[id] = errc
	cfg := node.Config{NodeID: id, Connect: h.s.connect(id), Logger: quiet, RetryDelay: 10 * time.Millisecond,
		Lead: func(ctx context.Context, t node.Term) error {
			l := &led{node: id, term: t, ctx: ctx, release: make(chan error, 1)}
			h.terms <- l
			select {
			case err := <-l.release:
				return err
			case <-ctx.Done():
				return ctx.Err()
			}
		}}
	h.wg.Go(func() { errc <- node.Run(ctx, cfg) })
}

func (h *harness) nextTerm() *led {
	h.t.Helper()
	select {
	case l := <-h.terms:
		return l
	case <-time.After(10 * time.Second):
		h.t.Fatal("no node started leading within 10s")
		return nil
	}
}

func (h *harness) noTerm(d time.Duration) {
	h.t.Helper()
	select {
	case l := <-h.terms:
		h.t.Fatalf("node %s unexpectedly leads (term %d)", l.node, l.term.Leadership.Term())
	case <-time.After(d):
	}
}

func (h *harness) runErr(id string) error {
	h.t.Helper()
	select {
	case err := <-h.errs[id]:
		return err
	case <-time.After(10 * time.Second):
		h.t.Fatalf("node %s: Run did not return within 10s", id)
		return nil
	}
}

// publish completes checkpoint id through a Storage of l's term.
func publish(t *testing.T, l *led, inner checkpoint.Storage, id int64) (checkpoint.Info, error) {
	t.Helper()
	st := node.NewStorage(inner, l.term, node.WithLogger(quiet), node.Retain(2))
	return st.Save(l.ctx, &checkpoint.Snapshot{ID: id, JobName: "j", Properties: map[string]string{"job.id": l.term.JobID}})
}

// TestFailoverRestoresFromPointer: the first leader starts fresh and
// completes checkpoints; when its lease ends its job's context ends (cause
// ErrLeadershipLost) and the standby leads under the same job id, restoring
// from the published pointer. The first node campaigns again with a new
// session and stands by.
func TestFailoverRestoresFromPointer(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(t.Context())
	h.start(ctx, "n1")
	first := h.nextTerm()
	h.start(ctx, "n2")
	if first.term.Restore != nil {
		t.Fatalf("first leader restores from %+v; want a fresh start", first.term.Restore)
	}
	if first.term.JobID == "" {
		t.Fatal("empty job id")
	}
	inner := checkpoint.NewMemory(checkpoint.Retain(0))
	for id := int64(1); id <= 3; id++ {
		if _, err := publish(t, first, inner, id); err != nil {
			t.Fatal(err)
		}
	}
	if infos, _ := inner.List(t.Context()); len(infos) != 2 {
		t.Errorf("retention kept %d checkpoints, want 2", len(infos))
	}
	h.noTerm(50 * time.Millisecond)
	h.s.expire(first.node)
	<-first.ctx.Done()
	if cause := context.Cause(first.ctx); !errors.Is(cause, node.ErrLeadershipLost) {
		t.Fatalf("first term ended with %v, want ErrLeadershipLost", cause)
	}
	second := h.nextTerm()
	if second.node == first.node {
		t.Fatalf("the expired node %s leads again before the standby", second.node)
	}
	if second.term.JobID != first.term.JobID {
		t.Errorf("job id %q after failover, want %q", second.term.JobID, first.term.JobID)
	}
	if p := second.term.Restore; p == nil || p.ID != 3 || p.Term != first.term.Leadership.Term() {
		t.Fatalf("restore pointer %+v, want checkpoint 3 of term %d", p, first.term.Leadership.Term())
	}
	// When the second leader loses its lease too, the next term (either
	// node, each with a new session) restores what the second published.
	if _, err := publish(t, second, inner, 4); err != nil {
		t.Fatal(err)
	}
	h.s.expire(second.node)
	third := h.nextTerm()
	if third.term.Restore == nil || third.term.Restore.ID != 4 || third.term.Restore.Term != second.term.Leadership.Term() {
		t.Fatalf("third term: node %s restore %+v, want checkpoint 4 of term %d", third.node, third.term.Restore, second.term.Leadership.Term())
	}
	cancel()
	for _, id := range []string{"n1", "n2"} {
		if err := h.runErr(id); err != nil {
			t.Errorf("node %s: Run: %v", id, err)
		}
	}
	h.wg.Wait()
}

// TestFencedPublishEndsTerm: a leader whose lease ended but which has not
// noticed yet stores a checkpoint: the pointer write is refused with
// ErrFenced, Save fails (so nothing is committed), Lost ends the term, and
// the pointer stays the successor's.
func TestFencedPublishEndsTerm(t *testing.T) {
	c := memcoord.NewCluster()
	ctx := t.Context()
	a, b := c.Node(), c.Node()
	defer a.Close()
	defer b.Close()
	for i, n := range []*memcoord.Node{a, b} {
		if err := n.Join(ctx, coord.Member{ID: []string{"a", "b"}[i]}); err != nil {
			t.Fatal(err)
		}
	}
	la, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var lostErr error
	st := node.NewStorage(checkpoint.NewMemory(checkpoint.Retain(0)), node.Term{Leadership: la, Lost: func(err error) { lostErr = err }}, node.WithLogger(quiet))
	if _, err := st.Save(ctx, &checkpoint.Snapshot{ID: 1}); err != nil {
		t.Fatal(err)
	}
	c.Expire(a)
	lb, err := b.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := coord.PublishCheckpoint(ctx, lb, coord.CheckpointPointer{ID: 2, Location: "b"}); err != nil {
		t.Fatal(err)
	}
	_, err = st.Save(ctx, &checkpoint.Snapshot{ID: 3})
	if !errors.Is(err, coord.ErrFenced) {
		t.Fatalf("Save of a fenced leader: %v, want ErrFenced", err)
	}
	if !errors.Is(lostErr, coord.ErrFenced) {
		t.Fatalf("Lost called with %v, want ErrFenced", lostErr)
	}
	p, ok, err := coord.LatestCheckpoint(ctx, b)
	if err != nil || !ok || p.ID != 2 || p.Term != lb.Term() {
		t.Fatalf("pointer %+v %v %v, want the successor's checkpoint 2", p, ok, err)
	}
}

// TestFinishedJobIsNotRunAgain: a Lead that returns nil marks the job
// finished; the standby then wins, runs nothing and returns nil.
func TestFinishedJobIsNotRunAgain(t *testing.T) {
	h := newHarness(t)
	h.start(t.Context(), "n1")
	first := h.nextTerm()
	h.start(t.Context(), "n2")
	first.release <- nil
	for _, id := range []string{"n1", "n2"} {
		if err := h.runErr(id); err != nil {
			t.Errorf("node %s: Run: %v", id, err)
		}
	}
	h.noTerm(10 * time.Millisecond)
	h.wg.Wait()
}

// TestFailedJobResigns: a job that fails on its own ends Run with its
// error and the standby takes over at once (it does not wait for a TTL).
func TestFailedJobResigns(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(t.Context())
	h.start(ctx, "n1")
	first := h.nextTerm()
	h.start(ctx, "n2")
	boom := errors.New("boom")
	first.release <- boom
	if err := h.runErr(first.node); !errors.Is(err, boom) {
		t.Fatalf("Run: %v, want boom", err)
	}
	second := h.nextTerm()
	if second.node != "n2" || second.term.JobID != first.term.JobID {
		t.Fatalf("second term: node %s job %s", second.node, second.term.JobID)
	}
	cancel()
	if err := h.runErr("n2"); err != nil {
		t.Fatal(err)
	}
	h.wg.Wait()
}

// TestConfigRequired: a Config without its required fields is refused.
func TestConfigRequired(t *testing.T) {
	if err := node.Run(t.Context(), node.Config{NodeID: "a/b", Connect: newSessions().connect("x"), Lead: func(context.Context, node.Term) error { return nil }}); err == nil {
		t.Fatal("node id with '/' accepted")
	}
	if err := node.Run(t.Context(), node.Config{NodeID: "a"}); err == nil {
		t.Fatal("Config without Connect and Lead accepted")
	}
}

// deafCoord hides the session's and the leadership's Done channels, as a
// node that has not noticed yet that its lease ended.
type deafCoord struct{ *memcoord.Node }

func (d deafCoord) Done() <-chan struct{} { return nil }

func (d deafCoord) Campaign(ctx context.Context) (coord.Leadership, error) {
	l, err := d.Node.Campaign(ctx)
	if err != nil {
		return nil, err
	}
	return deafLeadership{l}, nil
}

type deafLeadership struct{ coord.Leadership }

func (deafLeadership) Done() <-chan struct{} { return nil }

// TestJobFailedAfterLostTerm: a job that fails because its term ended,
// before the node noticed, is not a failed job: the node asks the store
// (a fenced write is refused) and campaigns again instead of exiting.
func TestJobFailedAfterLostTerm(t *testing.T) {
	c := memcoord.NewCluster()
	var mu sync.Mutex
	var sessions []*memcoord.Node
	calls := 0
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	second := make(chan node.Term, 1)
	cfg := node.Config{NodeID: "n1", Logger: quiet, RetryDelay: 10 * time.Millisecond,
		Connect: func(context.Context) (coord.Coordinator, error) {
			n := c.Node()
			mu.Lock()
			sessions = append(sessions, n)
			mu.Unlock()
			return deafCoord{n}, nil
		},
		Lead: func(ctx context.Context, tm node.Term) error {
			calls++
			if calls == 1 {
				mu.Lock()
				c.Expire(sessions[len(sessions)-1])
				mu.Unlock()
				return errors.New("producer fenced by a successor")
			}
			second <- tm
			<-ctx.Done()
			return ctx.Err()
		}}
	errc := make(chan error, 1)
	go func() { errc <- node.Run(ctx, cfg) }()
	select {
	case tm := <-second:
		if tm.JobID == "" {
			t.Error("empty job id in the second term")
		}
	case err := <-errc:
		t.Fatalf("Run returned %v; want the node to campaign again", err)
	case <-time.After(10 * time.Second):
		t.Fatal("no second term within 10s")
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// flakyLeadership fails its first n Apply calls with ErrUnavailable.
type flakyLeadership struct {
	coord.Leadership
	mu sync.Mutex
	n  int
}

func (f *flakyLeadership) Apply(ctx context.Context, ops ...coord.Op) error {
	f.mu.Lock()
	fail := f.n > 0
	f.n--
	f.mu.Unlock()
	if fail {
		return fmt.Errorf("etcd down: %w", coord.ErrUnavailable)
	}
	return f.Leadership.Apply(ctx, ops...)
}

// TestPublishWaitsForTheStore: while the store is unavailable Save keeps
// the stored checkpoint waiting and publishes it once the store answers;
// past PublishWait it fails the checkpoint without ending the term.
func TestPublishWaitsForTheStore(t *testing.T) {
	c := memcoord.NewCluster()
	ctx := t.Context()
	a := c.Node()
	defer a.Close()
	if err := a.Join(ctx, coord.Member{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	l, err := a.Campaign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fl := &flakyLeadership{Leadership: l, n: 3}
	lostCalled := false
	tm := node.Term{Leadership: fl, Lost: func(error) { lostCalled = true }}
	st := node.NewStorage(checkpoint.NewMemory(checkpoint.Retain(0)), tm, node.WithLogger(quiet))
	if _, err := st.Save(ctx, &checkpoint.Snapshot{ID: 1}); err != nil {
		t.Fatalf("Save after 3 unavailable publishes: %v", err)
	}
	if p, ok, err := coord.LatestCheckpoint(ctx, a); err != nil || !ok || p.ID != 1 {
		t.Fatalf("pointer %+v %v %v, want checkpoint 1", p, ok, err)
	}
	fl.mu.Lock()
	fl.n = 1000
	fl.mu.Unlock()
	st = node.NewStorage(checkpoint.NewMemory(checkpoint.Retain(0)), tm, node.WithLogger(quiet), node.PublishWait(300*time.Millisecond))
	if _, err := st.Save(ctx, &checkpoint.Snapshot{ID: 2}); !errors.Is(err, coord.ErrUnavailable) {
		t.Fatalf("Save with the store down past PublishWait: %v, want ErrUnavailable", err)
	}
	if lostCalled {
		t.Error("an unavailable store ended the term")
	}
	if p, _, _ := coord.LatestCheckpoint(ctx, a); p.ID != 1 {
		t.Errorf("pointer names %d, want 1", p.ID)
	}
}
