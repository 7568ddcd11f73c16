package etcdcoord_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/cluster/coord"
	"github.com/sluice-io/sluice/internal/cluster/etcdcoord"
)

// TestOutageLongerThanTTL: etcd is down longer than the node's lease TTL.
// The node's session ends (Done closes); once etcd is back the old term's
// writes are fenced, and the node recovers the documented way: a new
// Coordinator with the same node id joins (after the old lease is gone),
// wins and continues from the published pointer.
func TestOutageLongerThanTTL(t *testing.T) {
	if testing.Short() {
		t.Skip("stops and restarts etcd; skipped with -short")
	}
	ec := startEtcd(t, 1)
	eps := ec.endpoints()
	opts := []etcdcoord.Option{etcdcoord.WithLeaseTTL(time.Second), etcdcoord.WithRequestTimeout(time.Second)}
	n := newNode(t, eps, "n0", opts...)
	l, err := campaign(stepCtx(t), n)
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	publish(t, l, 1)

	ec.stop(0)
	select {
	case <-n.Done():
	case <-time.After(step):
		t.Fatalf("session Done not closed within %v of etcd going away (TTL 1s)", step)
	}
	select {
	case <-l.Done():
	case <-time.After(step):
		t.Fatalf("leadership Done not closed after the session ended")
	}
	ec.restart(0)
	ec.awaitReady(0)

	// Nobody renews the old lease any more: etcd expires it and fences
	// the old term.
	retry(t, "waiting for the old term to be fenced", func(ctx context.Context) error {
		err := l.Apply(ctx, coord.Put("probe", []byte("old")))
		if errors.Is(err, coord.ErrFenced) {
			return nil
		}
		return errors.New("old term not fenced yet: " + errString(err))
	})

	var n2 *etcdcoord.Coordinator
	retry(t, "rejoining as n0 with a new session", func(ctx context.Context) error {
		c, err := etcdcoord.New(ctx, eps, append([]etcdcoord.Option{etcdcoord.WithPrefix("/job/")}, opts...)...)
		if err != nil {
			return err
		}
		if err := c.Join(ctx, coord.Member{ID: "n0", Addr: "127.0.0.1:7000"}); err != nil {
			_ = c.Close()
			return err
		}
		n2 = c
		return nil
	})
	t.Cleanup(func() { _ = n2.Close() })
	l2, err := campaign(stepCtx(t), n2)
	if err != nil {
		t.Fatalf("Campaign with the new session: %v", err)
	}
	wantPointer(t, n2, 1, l.Term())
	publish(t, l2, 2)
	wantPointer(t, n2, 2, l2.Term())
}

func errString(err error) string {
	if err == nil {
		return "the write succeeded"
	}
	return err.Error()
}
