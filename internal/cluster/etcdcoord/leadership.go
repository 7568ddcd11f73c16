package etcdcoord

import (
	"context"
	"fmt"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/sluice-io/sluice/internal/cluster/coord"
)

// leadership is a won concurrency.Election; it implements coord.Leadership.
type leadership struct {
	c    *Coordinator
	e    *concurrency.Election
	key  string // the leader key, <prefix>election/<lease hex>
	term int64  // its create revision

	resignOnce sync.Once
	resigned   chan struct{}
	done       chan struct{} // closed by the goroutine started in Campaign
}

var _ coord.Leadership = (*leadership)(nil)

func (l *leadership) Term() int64 { return l.term }

func (l *leadership) Done() <-chan struct{} { return l.done }

// Apply implements coord.Leadership: one etcd Txn,
// If(CreateRevision(leaderKey) == term).Then(ops...). It does not trust
// Done: a leader that believes it still leads (it was paused) is refused by
// etcd, and one that believes it lost may still finish a write etcd
// accepts while its key exists.
func (l *leadership) Apply(ctx context.Context, ops ...coord.Op) error {
	if err := coord.ValidateOps(ops); err != nil {
		return err
	}
	select {
	case <-l.resigned:
		return fmt.Errorf("etcdcoord: fenced write at term %d: %w", l.term, coord.ErrNotLeader)
	default:
	}
	if err := l.c.checkClosed(); err != nil {
		return fmt.Errorf("etcdcoord: fenced write at term %d: %w: %w", l.term, coord.ErrNotLeader, err)
	}
	sp := l.c.statePrefix()
	eops := make([]clientv3.Op, 0, len(ops))
	for _, op := range ops {
		if op.Delete {
			eops = append(eops, clientv3.OpDelete(sp+op.Key))
		} else {
			eops = append(eops, clientv3.OpPut(sp+op.Key, string(op.Value)))
		}
	}
	rctx, cancel := l.c.reqCtx(ctx)
	defer cancel()
	resp, err := l.c.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.term)).
		Then(eops...).
		Commit()
	if err != nil {
		return fmt.Errorf("etcdcoord: fenced write at term %d (%d ops, first %q) at %v: %w",
			l.term, len(ops), ops[0].Key, l.c.endpoints, classify(ctx, err))
	}
	if !resp.Succeeded {
		return fmt.Errorf("etcdcoord: fenced write at term %d (%d ops, first %q): leader key %s is gone: %w",
			l.term, len(ops), ops[0].Key, l.key, coord.ErrFenced)
	}
	return nil
}

// Resign implements coord.Leadership: it deletes the leader key if it still
// belongs to this term, so the next candidate wins at once.
func (l *leadership) Resign(ctx context.Context) error {
	first := false
	l.resignOnce.Do(func() { close(l.resigned); first = true })
	if !first {
		return nil
	}
	rctx, cancel := l.c.reqCtx(ctx)
	defer cancel()
	if err := l.e.Resign(rctx); err != nil {
		return fmt.Errorf("etcdcoord: resigning term %d at %v: %w", l.term, l.c.endpoints, classify(ctx, err))
	}
	return nil
}
