package etcdcoord_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/cluster/coord"
	"github.com/sluice-io/sluice/internal/cluster/etcdcoord"
)

// step bounds every wait of these tests.
const step = 60 * time.Second

func stepCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), step)
	t.Cleanup(cancel)
	return ctx
}

func newNode(t *testing.T, eps []string, id string, opts ...etcdcoord.Option) *etcdcoord.Coordinator {
	t.Helper()
	c, err := etcdcoord.New(stepCtx(t), eps, append([]etcdcoord.Option{etcdcoord.WithPrefix("/job/")}, opts...)...)
	if err != nil {
		t.Fatalf("New(%s): %v", id, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Join(stepCtx(t), coord.Member{ID: id, Addr: "127.0.0.1:7" + id}); err != nil {
		t.Fatalf("Join(%s): %v", id, err)
	}
	return c
}

// retry calls fn until it succeeds, at most for step; it returns the
// attempts made.
func retry(t *testing.T, what string, fn func(ctx context.Context) error) int {
	t.Helper()
	deadline := time.Now().Add(step)
	for n := 1; ; n++ {
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		err := fn(ctx)
		cancel()
		if err == nil {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %v (%d attempts): %v", what, step, n, err)
		}
		t.Logf("%s: attempt %d: %v", what, n, err)
		time.Sleep(200 * time.Millisecond)
	}
}

func wantPointer(t *testing.T, r coord.Reader, id, term int64) {
	t.Helper()
	var p coord.CheckpointPointer
	var ok bool
	retry(t, "reading the checkpoint pointer", func(ctx context.Context) (err error) {
		p, ok, err = coord.LatestCheckpoint(ctx, r)
		return err
	})
	if !ok || p.ID != id || p.Term != term {
		t.Fatalf("checkpoint pointer = %+v (found %v), want id %d of term %d", p, ok, id, term)
	}
}

func publish(t *testing.T, l coord.Leadership, id int64) {
	t.Helper()
	retry(t, fmt.Sprintf("publishing checkpoint %d", id), func(ctx context.Context) error {
		return coord.PublishCheckpoint(ctx, l, coord.CheckpointPointer{ID: id, Location: fmt.Sprintf("file:///cp/%d", id)})
	})
}

func awaitMembers(t *testing.T, ch <-chan []coord.Member, want ...string) {
	t.Helper()
	timeout := time.After(step)
	var got []string
	for {
		select {
		case ms, ok := <-ch:
			if !ok {
				t.Fatalf("member watch closed; last %v, want %v", got, want)
			}
			got = got[:0]
			for _, m := range ms {
				got = append(got, m.ID)
			}
			if slices.Equal(got, want) {
				return
			}
		case <-timeout:
			t.Fatalf("members %v, want %v within %v", got, want, step)
		}
	}
}

// campaign campaigns as a node does: etcd answering "unavailable" (a
// request timed out, no raft leader; it happens on a loaded machine) is
// retried after a pause, until ctx ends. Any other error is returned.
func campaign(ctx context.Context, n coord.Coordinator) (coord.Leadership, error) {
	for {
		l, err := n.Campaign(ctx)
		if err == nil || !errors.Is(err, coord.ErrUnavailable) || ctx.Err() != nil {
			return l, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

type won struct {
	id  string
	l   coord.Leadership
	err error
}

// TestThreeMemberCluster drives the coordination layer through the failures
// of issue 19 on a 3-member embedded etcd cluster: an etcd member killed,
// leader failover, a leader paused past its lease, and etcd losing quorum.
func TestThreeMemberCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-member etcd cluster; skipped with -short")
	}
	ec := startEtcd(t, 3)
	eps := ec.endpoints()
	ttl := etcdcoord.WithLeaseTTL(5 * time.Second)
	n0 := newNode(t, eps, "n0", ttl)
	n1 := newNode(t, eps, "n1", ttl)
	n2 := newNode(t, eps, "n2", ttl)
	obs := newNode(t, eps, "obs", ttl)
	nodes := map[string]*etcdcoord.Coordinator{"n1": n1, "n2": n2}

	watch, err := obs.WatchMembers(stepCtx(t))
	if err != nil {
		t.Fatalf("WatchMembers: %v", err)
	}
	awaitMembers(t, watch, "n0", "n1", "n2", "obs")
	leaders, err := obs.WatchLeader(stepCtx(t))
	if err != nil {
		t.Fatalf("WatchLeader: %v", err)
	}

	// n0 leads and completes checkpoint 1; n1 and n2 wait.
	l0, err := campaign(stepCtx(t), n0)
	if err != nil {
		t.Fatalf("Campaign(n0): %v", err)
	}
	publish(t, l0, 1)
	wantPointer(t, obs, 1, l0.Term())
	awaitLeaderInfo(t, leaders, coord.LeaderInfo{ID: "n0", Term: l0.Term()})
	wins := make(chan won, 2)
	for id, n := range nodes {
		ctx := stepCtx(t)
		go func() {
			l, err := campaign(ctx, n)
			wins <- won{id, l, err}
		}()
	}

	// An etcd member dies (the raft leader, the harder case): the others
	// carry on; n0 keeps its leadership and term.
	var k int
	retry(t, "finding etcd's raft leader", func(context.Context) error {
		if k = ec.raftLeader(); k < 0 {
			return errors.New("no raft leader")
		}
		return nil
	})
	t.Logf("stopping etcd member %d (raft leader)", k)
	ec.stop(k)
	publish(t, l0, 2)
	wantPointer(t, obs, 2, l0.Term())
	if li, err := obs.Leader(stepCtx(t)); err != nil || li.ID != "n0" || li.Term != l0.Term() {
		t.Fatalf("Leader after an etcd member died = %+v, %v; want n0 at term %d", li, err, l0.Term())
	}

	// The leader's session closes: one of n1, n2 wins with a higher term.
	if err := n0.Close(); err != nil {
		t.Fatalf("Close(n0): %v", err)
	}
	var w won
	select {
	case w = <-wins:
	case <-time.After(step):
		t.Fatalf("no new leader within %v of the leader's session closing", step)
	}
	if w.err != nil {
		t.Fatalf("Campaign(%s): %v", w.id, w.err)
	}
	if w.l.Term() <= l0.Term() {
		t.Fatalf("new term %d <= old term %d", w.l.Term(), l0.Term())
	}
	if err := l0.Apply(stepCtx(t), coord.Put(coord.CheckpointKey, []byte("{}"))); !errors.Is(err, coord.ErrNotLeader) {
		t.Fatalf("write of the closed leader = %v, want ErrNotLeader", err)
	}
	awaitMembers(t, watch, "n1", "n2", "obs")
	wantPointer(t, obs, 2, l0.Term()) // the new leader reads what to restore
	publish(t, w.l, 3)
	wantPointer(t, obs, 3, w.l.Term())
	t.Logf("%s leads at term %d", w.id, w.l.Term())
	awaitLeaderInfo(t, leaders, coord.LeaderInfo{ID: w.id, Term: w.l.Term()})

	// The new leader is paused past its lease: the remaining candidate
	// wins; every write of the paused one is refused and the pointer stays
	// the successor's.
	nodes[w.id].PauseKeepAliveForTest()
	var w2 won
	select {
	case w2 = <-wins:
	case <-time.After(step):
		t.Fatalf("no new leader within %v of pausing the leader", step)
	}
	if w2.err != nil {
		t.Fatalf("Campaign(%s): %v", w2.id, w2.err)
	}
	publish(t, w2.l, 4)
	awaitLeaderInfo(t, leaders, coord.LeaderInfo{ID: w2.id, Term: w2.l.Term()})
	for i, ops := range [][]coord.Op{
		{coord.Put(coord.CheckpointKey, []byte(`{"id":99}`))},
		{coord.Delete(coord.CheckpointKey)},
		{coord.Put("assign/src/0", []byte(w.id)), coord.Put("commit/5", []byte("x"))},
	} {
		err := w.l.Apply(stepCtx(t), ops...)
		if !errors.Is(err, coord.ErrFenced) {
			t.Fatalf("write %d of the paused leader = %v, want ErrFenced", i, err)
		}
	}
	if err := coord.PublishCheckpoint(stepCtx(t), w.l, coord.CheckpointPointer{ID: 5, Location: "x"}); !errors.Is(err, coord.ErrFenced) {
		t.Fatalf("checkpoint of the paused leader = %v, want ErrFenced", err)
	}
	wantPointer(t, obs, 4, w2.l.Term())
	if kvs, err := obs.List(stepCtx(t), ""); err != nil || len(kvs) != 1 {
		t.Fatalf("state after fenced writes = %v, %v; want only the checkpoint pointer", kvs, err)
	}
	awaitMembers(t, watch, w2.id, "obs")
	if err := w2.l.Resign(stepCtx(t)); err != nil {
		t.Fatalf("Resign(%s): %v", w2.id, err)
	}

	// etcd loses quorum: writes fail with ErrUnavailable and succeed when
	// it is back. This node's TTL outlasts the outage.
	n3 := newNode(t, eps, "n3", etcdcoord.WithLeaseTTL(30*time.Second), etcdcoord.WithRequestTimeout(time.Second))
	l3, err := campaign(stepCtx(t), n3)
	if err != nil {
		t.Fatalf("Campaign(n3): %v", err)
	}
	publish(t, l3, 5)
	k2 := (k + 1) % 3
	t.Logf("stopping etcd member %d: 1 of 3 left, no quorum", k2)
	ec.stop(k2)
	err = coord.PublishCheckpoint(stepCtx(t), l3, coord.CheckpointPointer{ID: 6, Location: "x"})
	if !errors.Is(err, coord.ErrUnavailable) {
		t.Fatalf("write without quorum = %v, want ErrUnavailable", err)
	}
	t.Logf("write without quorum: %v", err)
	ec.restart(k)
	ec.restart(k2)
	ec.awaitReady(k)
	ec.awaitReady(k2)
	publish(t, l3, 6)
	wantPointer(t, obs, 6, l3.Term())
	// The observer's watches came through the outage.
	awaitLeaderInfo(t, leaders, coord.LeaderInfo{ID: "n3", Term: l3.Term()})
	newNode(t, eps, "n4", ttl)
	awaitMembers(t, watch, w2.id, "n3", "n4", "obs")
}

func awaitLeaderInfo(t *testing.T, ch <-chan coord.LeaderInfo, want coord.LeaderInfo) {
	t.Helper()
	timeout := time.After(step)
	var last coord.LeaderInfo
	for {
		select {
		case li, ok := <-ch:
			if !ok {
				t.Fatalf("leader watch closed; last %+v, want %+v", last, want)
			}
			if last = li; li == want {
				return
			}
		case <-timeout:
			t.Fatalf("leader %+v, want %+v within %v", last, want, step)
		}
	}
}
