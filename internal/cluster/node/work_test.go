package node_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/cluster/node"
)

// worked is one call of Work as the test saw it.
type worked struct {
	node   string
	leader node.Leader
	ctx    context.Context
}

// TestWorkFollowsLeader: a standby's Work runs for the leader with the
// leader's announced address and term; a Work that returns while the
// leader leads is called again; when the leader's session ends, the work
// for it is cancelled and has returned before the standby leads, and the
// node that leads next is worked for by the other.
func TestWorkFollowsLeader(t *testing.T) {
	s := newSessions()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	leads := make(chan *led, 8)
	works := make(chan worked, 8)
	var working [2]atomic.Int32 // Work calls in progress, by node
	var calls atomic.Int32
	var errc [2]chan error
	for i, id := range []string{"n1", "n2"} {
		errc[i] = make(chan error, 1)
		cfg := node.Config{NodeID: id, Addr: "addr-" + id, Connect: s.connect(id), Logger: quiet, RetryDelay: 10 * time.Millisecond,
			Lead: func(ctx context.Context, term node.Term) error {
				if n := working[i].Load(); n != 0 {
					t.Errorf("%s leads while %d Work calls run", id, n)
				}
				leads <- &led{node: id, term: term, ctx: ctx}
				<-ctx.Done()
				return ctx.Err()
			},
			Work: func(ctx context.Context, l node.Leader) error {
				working[i].Add(1)
				defer working[i].Add(-1)
				works <- worked{node: id, leader: l, ctx: ctx}
				if calls.Add(1) == 1 {
					return errors.New("link broke") // called again for the same leader
				}
				<-ctx.Done()
				return nil
			}}
		go func() { errc[i] <- node.Run(ctx, cfg) }()
		if i == 0 {
			first := <-leads
			if first.node != "n1" {
				t.Fatalf("%s leads first", first.node)
			}
			ms, err := first.term.Members(ctx)
			if err != nil || len(ms) != 1 || ms[0].Addr != "addr-n1" {
				t.Fatalf("Term.Members: %v, %v", ms, err)
			}
		}
	}
	next := func() worked {
		t.Helper()
		select {
		case w := <-works:
			return w
		case <-time.After(10 * time.Second):
			t.Fatal("no Work call within 10s")
			return worked{}
		}
	}
	for range 2 { // the failed call and its retry
		w := next()
		if w.node != "n2" || w.leader.ID != "n1" || w.leader.Addr != "addr-n1" || w.leader.Term == 0 {
			t.Fatalf("Work call %+v, want n2 working for n1 at addr-n1", w)
		}
	}
	s.expire("n1")
	var l *led
	select {
	case l = <-leads:
	case <-time.After(10 * time.Second):
		t.Fatal("no new term within 10s")
	}
	w := next()
	other := map[string]string{"n1": "n2", "n2": "n1"}[l.node]
	if w.node != other || w.leader.ID != l.node || w.leader.Term != l.term.Leadership.Term() || w.leader.Addr != "addr-"+l.node {
		t.Fatalf("after the failover %s leads (term %d), but Work call %+v", l.node, l.term.Leadership.Term(), w)
	}
	cancel()
	for i := range errc {
		select {
		case err := <-errc[i]:
			if err != nil {
				t.Errorf("node %d: %v", i+1, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return within 10s")
		}
	}
}
