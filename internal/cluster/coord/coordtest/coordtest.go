// Package coordtest is the conformance suite every coord.Coordinator
// implementation passes: the implementer hands in a Harness and Run checks
// membership, election, failover and fencing, each property as a subtest.
// It depends on the standard library only.
package coordtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/cluster/coord"
)

// Harness makes nodes of one cluster for a test.
type Harness interface {
	// NewNode starts a new session. The harness closes it at the test's
	// cleanup if the test did not.
	NewNode(t *testing.T) coord.Coordinator
	// Expire ends c's lease in the store without c's cooperation, as the
	// store does when a node was paused past its lease TTL. c is not
	// closed and may go on calling the store.
	Expire(t *testing.T, c coord.Coordinator)
}

// wait bounds every blocking step of the suite.
const wait = 30 * time.Second

// Run runs the suite; newHarness is called once per subtest.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"JoinAndMembers", testJoinAndMembers},
		{"DuplicateMember", testDuplicateMember},
		{"WatchMembers", testWatchMembers},
		{"CampaignNeedsJoin", testCampaignNeedsJoin},
		{"SingleLeader", testSingleLeader},
		{"FailoverOnClose", testFailoverOnClose},
		{"FailoverOnResign", testFailoverOnResign},
		{"WatchLeader", testWatchLeader},
		{"FencedAfterExpire", testFencedAfterExpire},
		{"ApplyAtomicAndList", testApplyAtomicAndList},
		{"CheckpointPointer", testCheckpointPointer},
		{"BadInput", testBadInput},
		{"Closed", testClosed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newHarness(t)) })
	}
}

func ctxFor(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), wait)
	t.Cleanup(cancel)
	return ctx
}

func join(t *testing.T, h Harness, id string) coord.Coordinator {
	t.Helper()
	c := h.NewNode(t)
	if err := c.Join(ctxFor(t), coord.Member{ID: id, Addr: "127.0.0.1:" + id}); err != nil {
		t.Fatalf("Join(%s): %v", id, err)
	}
	return c
}

func ids(ms []coord.Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

func wantMembers(t *testing.T, c coord.Coordinator, want ...string) {
	t.Helper()
	ms, err := c.Members(ctxFor(t))
	if err != nil {
		t.Fatalf("Members: %v", err)
	}
	if got := ids(ms); !slices.Equal(got, want) {
		t.Fatalf("Members = %v, want %v", got, want)
	}
}

func testJoinAndMembers(t *testing.T, h Harness) {
	a := join(t, h, "a")
	b := join(t, h, "b")
	wantMembers(t, a, "a", "b")
	ms, _ := b.Members(ctxFor(t))
	if ms[1].Addr != "127.0.0.1:b" {
		t.Fatalf("member b addr = %q, want 127.0.0.1:b", ms[1].Addr)
	}
	// Joining again from the same session updates the address.
	if err := b.Join(ctxFor(t), coord.Member{ID: "b", Addr: "127.0.0.1:9"}); err != nil {
		t.Fatalf("re-Join(b): %v", err)
	}
	ms, _ = a.Members(ctxFor(t))
	if ms[1].Addr != "127.0.0.1:9" {
		t.Fatalf("member b addr after re-join = %q, want 127.0.0.1:9", ms[1].Addr)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close(b): %v", err)
	}
	wantMembers(t, a, "a")
}

func testDuplicateMember(t *testing.T, h Harness) {
	a := join(t, h, "a")
	other := h.NewNode(t)
	err := other.Join(ctxFor(t), coord.Member{ID: "a", Addr: "x"})
	if !errors.Is(err, coord.ErrMemberExists) {
		t.Fatalf("second Join(a) = %v, want ErrMemberExists", err)
	}
	// Once the first holder's lease ends, the id is free again.
	h.Expire(t, a)
	if err := other.Join(ctxFor(t), coord.Member{ID: "a", Addr: "y"}); err != nil {
		t.Fatalf("Join(a) after the holder expired: %v", err)
	}
}

func recvMembers(t *testing.T, ch <-chan []coord.Member, want ...string) {
	t.Helper()
	deadline := time.After(wait)
	var last []string
	for {
		select {
		case ms, ok := <-ch:
			if !ok {
				t.Fatalf("WatchMembers channel closed; last %v, want %v", last, want)
			}
			last = ids(ms)
			if slices.Equal(last, want) {
				return
			}
		case <-deadline:
			t.Fatalf("WatchMembers: last %v, want %v within %v", last, want, wait)
		}
	}
}

func testWatchMembers(t *testing.T, h Harness) {
	a := join(t, h, "a")
	ctx, cancel := context.WithCancel(ctxFor(t))
	ch, err := a.WatchMembers(ctx)
	if err != nil {
		t.Fatalf("WatchMembers: %v", err)
	}
	recvMembers(t, ch, "a")
	b := join(t, h, "b")
	recvMembers(t, ch, "a", "b")
	h.Expire(t, b) // a member that died: its lease ends
	recvMembers(t, ch, "a")
	c := join(t, h, "c")
	recvMembers(t, ch, "a", "c")
	if err := c.Close(); err != nil {
		t.Fatalf("Close(c): %v", err)
	}
	recvMembers(t, ch, "a")
	cancel()
	for range ch { // must be closed after cancel
	}

	// Close ends a watch as well.
	ch2, err := a.WatchMembers(ctxFor(t))
	if err != nil {
		t.Fatalf("WatchMembers: %v", err)
	}
	recvMembers(t, ch2, "a")
	if err := a.Close(); err != nil {
		t.Fatalf("Close(a): %v", err)
	}
	for range ch2 {
	}
}

func testCampaignNeedsJoin(t *testing.T, h Harness) {
	c := h.NewNode(t)
	if _, err := c.Campaign(ctxFor(t)); !errors.Is(err, coord.ErrNotJoined) {
		t.Fatalf("Campaign before Join = %v, want ErrNotJoined", err)
	}
}

func campaign(t *testing.T, c coord.Coordinator) coord.Leadership {
	t.Helper()
	l, err := c.Campaign(ctxFor(t))
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	return l
}

type result struct {
	l   coord.Leadership
	err error
}

// campaignAsync campaigns in a goroutine the test waits for.
func campaignAsync(t *testing.T, c coord.Coordinator) <-chan result {
	ch := make(chan result, 1)
	ctx := ctxFor(t)
	go func() {
		l, err := c.Campaign(ctx)
		ch <- result{l, err}
	}()
	return ch
}

func awaitLeader(t *testing.T, ch <-chan result) coord.Leadership {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("Campaign: %v", r.err)
		}
		return r.l
	case <-time.After(wait + time.Second):
		t.Fatalf("Campaign did not return within %v", wait)
	}
	return nil
}

func wantLeader(t *testing.T, c coord.Coordinator, id string, term int64) {
	t.Helper()
	li, err := c.Leader(ctxFor(t))
	if err != nil {
		t.Fatalf("Leader: %v", err)
	}
	if li.ID != id || li.Term != term {
		t.Fatalf("Leader = %+v, want {ID:%s Term:%d}", li, id, term)
	}
}

func testSingleLeader(t *testing.T, h Harness) {
	a := join(t, h, "a")
	b := join(t, h, "b")
	if _, err := a.Leader(ctxFor(t)); !errors.Is(err, coord.ErrNoLeader) {
		t.Fatalf("Leader before any campaign = %v, want ErrNoLeader", err)
	}
	la := campaign(t, a)
	wantLeader(t, b, "a", la.Term())
	// b cannot win while a leads: its campaign ends with its context.
	ctx, cancel := context.WithTimeout(ctxFor(t), 300*time.Millisecond)
	defer cancel()
	if l, err := b.Campaign(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Campaign(b) while a leads = %v, %v; want context.DeadlineExceeded", l, err)
	}
	wantLeader(t, b, "a", la.Term())
	if err := la.Apply(ctxFor(t), coord.Put("k", []byte("v"))); err != nil {
		t.Fatalf("Apply by the leader: %v", err)
	}
}

func testFailoverOnClose(t *testing.T, h Harness) {
	a := join(t, h, "a")
	b := join(t, h, "b")
	la := campaign(t, a)
	ch := campaignAsync(t, b)
	if err := a.Close(); err != nil {
		t.Fatalf("Close(a): %v", err)
	}
	lb := awaitLeader(t, ch)
	if lb.Term() <= la.Term() {
		t.Fatalf("new term %d <= old term %d", lb.Term(), la.Term())
	}
	select {
	case <-la.Done():
	case <-time.After(wait):
		t.Fatalf("old leadership Done not closed after Close")
	}
	wantLeader(t, b, "b", lb.Term())
	if err := la.Apply(ctxFor(t), coord.Put("k", []byte("old"))); !errors.Is(err, coord.ErrNotLeader) {
		t.Fatalf("Apply by the closed leader = %v, want ErrNotLeader", err)
	}
	if err := lb.Apply(ctxFor(t), coord.Put("k", []byte("new"))); err != nil {
		t.Fatalf("Apply by the new leader: %v", err)
	}
}

func testFailoverOnResign(t *testing.T, h Harness) {
	a := join(t, h, "a")
	b := join(t, h, "b")
	la := campaign(t, a)
	ch := campaignAsync(t, b)
	if err := la.Resign(ctxFor(t)); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	lb := awaitLeader(t, ch)
	<-la.Done()
	err := la.Apply(ctxFor(t), coord.Put("k", []byte("old")))
	if !errors.Is(err, coord.ErrNotLeader) {
		t.Fatalf("Apply after Resign = %v, want ErrNotLeader", err)
	}
	if err := lb.Apply(ctxFor(t), coord.Put("k", []byte("new"))); err != nil {
		t.Fatalf("Apply by the new leader: %v", err)
	}
	// a may campaign again and wins after b resigns.
	ch = campaignAsync(t, a)
	if err := lb.Resign(ctxFor(t)); err != nil {
		t.Fatalf("Resign(b): %v", err)
	}
	la2 := awaitLeader(t, ch)
	if la2.Term() <= lb.Term() {
		t.Fatalf("term after re-election %d <= %d", la2.Term(), lb.Term())
	}
}

func getString(t *testing.T, r coord.Reader, key string) string {
	t.Helper()
	v, ok, err := r.Get(ctxFor(t), key)
	if err != nil {
		t.Fatalf("Get(%s): %v", key, err)
	}
	if !ok {
		return "<missing>"
	}
	return string(v)
}

func testFencedAfterExpire(t *testing.T, h Harness) {
	a := join(t, h, "a")
	b := join(t, h, "b")
	la := campaign(t, a)
	if err := la.Apply(ctxFor(t), coord.Put("pointer", []byte("a-1"))); err != nil {
		t.Fatalf("Apply(a-1): %v", err)
	}
	ch := campaignAsync(t, b)
	h.Expire(t, a) // a is "paused" past its TTL; it keeps running
	lb := awaitLeader(t, ch)
	if err := lb.Apply(ctxFor(t), coord.Put("pointer", []byte("b-1"))); err != nil {
		t.Fatalf("Apply(b-1): %v", err)
	}
	// Every write of the old leader is refused, whatever it tries.
	for i, ops := range [][]coord.Op{
		{coord.Put("pointer", []byte("a-2"))},
		{coord.Delete("pointer")},
		{coord.Put("other", []byte("x")), coord.Put("pointer", []byte("a-3"))},
	} {
		err := la.Apply(ctxFor(t), ops...)
		if !errors.Is(err, coord.ErrFenced) || !errors.Is(err, coord.ErrNotLeader) {
			t.Fatalf("write %d of the expired leader = %v, want ErrFenced (and ErrNotLeader)", i, err)
		}
	}
	if err := coord.PublishCheckpoint(ctxFor(t), la, coord.CheckpointPointer{ID: 9, Location: "x"}); !errors.Is(err, coord.ErrFenced) {
		t.Fatalf("PublishCheckpoint by the expired leader = %v, want ErrFenced", err)
	}
	if got := getString(t, b, "pointer"); got != "b-1" {
		t.Fatalf("pointer = %q, want b-1 (the new leader's)", got)
	}
	if got := getString(t, b, "other"); got != "<missing>" {
		t.Fatalf("other = %q: a fenced transaction was partly applied", got)
	}
	if _, ok, _ := coord.LatestCheckpoint(ctxFor(t), b); ok {
		t.Fatalf("a checkpoint pointer of the fenced leader was published")
	}
	select {
	case <-a.Done():
	case <-time.After(wait):
		t.Fatalf("Done of the expired session not closed within %v", wait)
	}
}

func testApplyAtomicAndList(t *testing.T, h Harness) {
	a := join(t, h, "a")
	la := campaign(t, a)
	ctx := ctxFor(t)
	if err := la.Apply(ctx,
		coord.Put("assign/src/1", []byte("a")),
		coord.Put("assign/src/0", []byte("b")),
		coord.Put("assignx", []byte("c")),
		coord.Put("commit/7", []byte("d")),
	); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if err := la.Apply(ctx, coord.Delete("commit/7"), coord.Delete("missing")); err != nil {
		t.Fatalf("Apply(delete): %v", err)
	}
	kvs, err := a.List(ctx, "assign/")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	got := fmt.Sprint(kvs)
	want := fmt.Sprint([]coord.KV{{Key: "assign/src/0", Value: []byte("b")}, {Key: "assign/src/1", Value: []byte("a")}})
	if got != want {
		t.Fatalf("List(assign/) = %s, want %s", got, want)
	}
	if v := getString(t, a, "commit/7"); v != "<missing>" {
		t.Fatalf("deleted key commit/7 = %q", v)
	}
}

func testCheckpointPointer(t *testing.T, h Harness) {
	a := join(t, h, "a")
	ctx := ctxFor(t)
	if _, ok, err := coord.LatestCheckpoint(ctx, a); ok || err != nil {
		t.Fatalf("LatestCheckpoint on an empty store = %v, %v; want none", ok, err)
	}
	la := campaign(t, a)
	for id := int64(1); id <= 3; id++ {
		p := coord.CheckpointPointer{ID: id, Location: fmt.Sprintf("file:///cp/%d", id)}
		if err := coord.PublishCheckpoint(ctx, la, p); err != nil {
			t.Fatalf("PublishCheckpoint(%d): %v", id, err)
		}
	}
	p, ok, err := coord.LatestCheckpoint(ctx, a)
	want := coord.CheckpointPointer{ID: 3, Location: "file:///cp/3", Term: la.Term()}
	if err != nil || !ok || p != want {
		t.Fatalf("LatestCheckpoint = %+v, %v, %v; want %+v", p, ok, err, want)
	}
}

func testBadInput(t *testing.T, h Harness) {
	a := h.NewNode(t)
	ctx := ctxFor(t)
	for _, m := range []coord.Member{{ID: ""}, {ID: "a/b"}} {
		if err := a.Join(ctx, m); err == nil {
			t.Fatalf("Join(%+v) succeeded, want an error", m)
		}
	}
	if err := a.Join(ctx, coord.Member{ID: "a"}); err != nil {
		t.Fatalf("Join(a): %v", err)
	}
	la := campaign(t, a)
	tooMany := make([]coord.Op, coord.MaxOps+1)
	for i := range tooMany {
		tooMany[i] = coord.Put(fmt.Sprint("k", i), nil)
	}
	for _, ops := range [][]coord.Op{
		nil, {coord.Put("", nil)}, {coord.Put("/abs", nil)},
		{coord.Put("k", nil), coord.Delete("k")}, tooMany,
	} {
		if err := la.Apply(ctx, ops...); err == nil {
			t.Fatalf("Apply(%d ops) succeeded, want an error", len(ops))
		}
	}
	maxOps := make([]coord.Op, coord.MaxOps)
	for i := range maxOps {
		maxOps[i] = coord.Put(fmt.Sprint("k", i), []byte("v"))
	}
	if err := la.Apply(ctx, maxOps...); err != nil {
		t.Fatalf("Apply(%d ops): %v", len(maxOps), err)
	}
	if _, _, err := a.Get(ctx, ""); err == nil {
		t.Fatalf("Get(\"\") succeeded, want an error")
	}
}

func testClosed(t *testing.T, h Harness) {
	a := join(t, h, "a")
	ctx := ctxFor(t)
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	<-a.Done()
	if _, err := a.Members(ctx); !errors.Is(err, coord.ErrClosed) {
		t.Fatalf("Members after Close = %v, want ErrClosed", err)
	}
	if _, err := a.Campaign(ctx); !errors.Is(err, coord.ErrClosed) {
		t.Fatalf("Campaign after Close = %v, want ErrClosed", err)
	}
	if _, err := a.WatchLeader(ctx); !errors.Is(err, coord.ErrClosed) {
		t.Fatalf("WatchLeader after Close = %v, want ErrClosed", err)
	}
	if _, err := a.WatchMembers(ctx); !errors.Is(err, coord.ErrClosed) {
		t.Fatalf("WatchMembers after Close = %v, want ErrClosed", err)
	}
	if _, _, err := a.Get(ctx, "k"); !errors.Is(err, coord.ErrClosed) {
		t.Fatalf("Get after Close = %v, want ErrClosed", err)
	}
}

func recvLeader(t *testing.T, ch <-chan coord.LeaderInfo, want coord.LeaderInfo) {
	t.Helper()
	deadline := time.After(wait)
	var last coord.LeaderInfo
	for {
		select {
		case li, ok := <-ch:
			if !ok {
				t.Fatalf("WatchLeader channel closed; last %+v, want %+v", last, want)
			}
			if last = li; li == want {
				return
			}
		case <-deadline:
			t.Fatalf("WatchLeader: last %+v, want %+v within %v", last, want, wait)
		}
	}
}

func testWatchLeader(t *testing.T, h Harness) {
	a := join(t, h, "a")
	b := join(t, h, "b")
	ctx, cancel := context.WithCancel(ctxFor(t))
	ch, err := b.WatchLeader(ctx)
	if err != nil {
		t.Fatalf("WatchLeader: %v", err)
	}
	la := campaign(t, a)
	recvLeader(t, ch, coord.LeaderInfo{ID: "a", Term: la.Term()})
	won := campaignAsync(t, b)
	if err := la.Resign(ctxFor(t)); err != nil {
		t.Fatalf("Resign: %v", err)
	}
	lb := awaitLeader(t, won)
	recvLeader(t, ch, coord.LeaderInfo{ID: "b", Term: lb.Term()})
	// A leader that dies (its lease ends) is followed by the next.
	ch2, err := a.WatchLeader(ctxFor(t))
	if err != nil {
		t.Fatalf("WatchLeader: %v", err)
	}
	recvLeader(t, ch2, coord.LeaderInfo{ID: "b", Term: lb.Term()})
	won = campaignAsync(t, a)
	h.Expire(t, b)
	la2 := awaitLeader(t, won)
	recvLeader(t, ch2, coord.LeaderInfo{ID: "a", Term: la2.Term()})
	cancel()
	for range ch {
	}
}
