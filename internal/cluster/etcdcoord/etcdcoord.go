package etcdcoord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluice-io/sluice/internal/cluster/coord"
)

// Coordinator is one node's session with etcd; it implements
// coord.Coordinator. Create it with New and end it with Close.
type Coordinator struct {
	cfg       config
	endpoints []string
	cli       *clientv3.Client
	sess      *concurrency.Session

	// ctx is cancelled by Close; it ends watches, campaigns and the
	// leadership goroutines.
	ctx    context.Context
	cancel context.CancelFunc
	// sessCancel ends the session's keep-alive context after Close revoked
	// the lease.
	sessCancel context.CancelFunc

	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	mu          sync.Mutex
	closed      bool
	member      string
	campaigning bool
}

var _ coord.Coordinator = (*Coordinator)(nil)

// New connects to the etcd cluster at endpoints (host:port or URLs) and
// starts a session: a lease with the configured TTL, kept alive until
// Close. Connecting and granting the lease are bounded by ctx and the dial
// timeout.
func New(ctx context.Context, endpoints []string, opts ...Option) (*Coordinator, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("etcdcoord: no etcd endpoints")
	}
	tlsCfg, err := cfg.tlsConfig()
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: cfg.dialTimeout,
		TLS:         tlsCfg,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("etcdcoord: connecting to etcd at %v: %w", endpoints, err)
	}
	gctx, gcancel := context.WithTimeout(ctx, cfg.dialTimeout)
	lease, err := cli.Grant(gctx, int64(cfg.ttlSeconds()))
	gcancel()
	if err != nil {
		_ = cli.Close()
		hint := ""
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			hint = fmt.Sprintf(" (no endpoint answered within the dial timeout %v: is etcd running there, and do its client URLs and TLS settings match this node's?)", cfg.dialTimeout)
		}
		return nil, fmt.Errorf("etcdcoord: creating the session lease at %v%s: %w", endpoints, hint, classify(ctx, err))
	}
	sctx, scancel := context.WithCancel(context.Background())
	sess, err := concurrency.NewSession(cli,
		concurrency.WithLease(lease.ID),
		concurrency.WithTTL(cfg.ttlSeconds()),
		concurrency.WithContext(sctx))
	if err != nil {
		scancel()
		_ = cli.Close()
		return nil, fmt.Errorf("etcdcoord: starting the session at %v: %w", endpoints, err)
	}
	c := &Coordinator{cfg: cfg, endpoints: endpoints, cli: cli, sess: sess, sessCancel: scancel}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	return c, nil
}

// Lease returns the id of the session's lease (for logs and tests).
func (c *Coordinator) Lease() int64 { return int64(c.sess.Lease()) }

func (c *Coordinator) membersPrefix() string { return c.cfg.prefix + "members/" }

// electionPrefix is the prefix handed to concurrency.Election, which adds
// the '/' itself: keys are <prefix>election/<lease hex>.
func (c *Coordinator) electionPrefix() string { return c.cfg.prefix + "election" }
func (c *Coordinator) statePrefix() string    { return c.cfg.prefix + "state/" }

// reqCtx bounds one etcd request by the request timeout and by Close.
func (c *Coordinator) reqCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	rctx, cancel := context.WithTimeout(ctx, c.cfg.requestTimeout)
	stop := context.AfterFunc(c.ctx, cancel)
	return rctx, func() { stop(); cancel() }
}

func (c *Coordinator) checkClosed() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return coord.ErrClosed
	}
	return nil
}

// classify wraps err with coord.ErrUnavailable when etcd could not be
// reached (or had no quorum) before the request's own deadline, and with
// coord.ErrSessionLost when the session's lease is gone. A caller's
// cancelled context is returned as is.
func classify(callerCtx context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return fmt.Errorf("%w: %w", coord.ErrSessionLost, err)
	case callerCtx.Err() != nil:
		return err
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, rpctypes.ErrNoLeader),
		errors.Is(err, rpctypes.ErrTimeout), errors.Is(err, rpctypes.ErrTimeoutDueToLeaderFail),
		errors.Is(err, rpctypes.ErrTimeoutDueToConnectionLost):
		return fmt.Errorf("%w: %w", coord.ErrUnavailable, err)
	}
	if s, ok := status.FromError(err); ok && (s.Code() == codes.Unavailable || s.Code() == codes.DeadlineExceeded) {
		return fmt.Errorf("%w: %w", coord.ErrUnavailable, err)
	}
	return err
}

// Join implements coord.Coordinator. The member key is created only if no
// other lease holds it, in one transaction.
func (c *Coordinator) Join(ctx context.Context, m coord.Member) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if err := c.checkClosed(); err != nil {
		return err
	}
	c.mu.Lock()
	prev := c.member
	c.mu.Unlock()
	if prev != "" && prev != m.ID {
		return fmt.Errorf("etcdcoord: join %q: this session already joined as %q", m.ID, prev)
	}
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("etcdcoord: encoding member %q: %w", m.ID, err)
	}
	key := c.membersPrefix() + m.ID
	lease := c.sess.Lease()
	rctx, cancel := c.reqCtx(ctx)
	defer cancel()
	// Create the key, or overwrite it if this session already holds it.
	resp, err := c.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(b), clientv3.WithLease(lease))).
		Else(clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.LeaseValue(key), "=", lease)},
			[]clientv3.Op{clientv3.OpPut(key, string(b), clientv3.WithLease(lease))},
			nil)).
		Commit()
	if err != nil {
		return fmt.Errorf("etcdcoord: join %q at %v: %w", m.ID, c.endpoints, classify(ctx, err))
	}
	if !resp.Succeeded && !resp.Responses[0].GetResponseTxn().Succeeded {
		return fmt.Errorf("etcdcoord: join %q: %w", m.ID, coord.ErrMemberExists)
	}
	c.mu.Lock()
	c.member = m.ID
	c.mu.Unlock()
	return nil
}

func decodeMembers(kvs []*mvccpb.KeyValue) map[string]coord.Member {
	ms := make(map[string]coord.Member, len(kvs))
	for _, kv := range kvs {
		var m coord.Member
		if err := json.Unmarshal(kv.Value, &m); err != nil {
			// A foreign or corrupt value: keep the member by its key so
			// it is not silently dropped from placement.
			m = coord.Member{ID: string(kv.Key[strings.LastIndexByte(string(kv.Key), '/')+1:])}
		}
		ms[string(kv.Key)] = m
	}
	return ms
}

func sortedMembers(ms map[string]coord.Member) []coord.Member {
	out := make([]coord.Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, m)
	}
	slices.SortFunc(out, func(a, b coord.Member) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// Members implements coord.Coordinator.
func (c *Coordinator) Members(ctx context.Context) ([]coord.Member, error) {
	if err := c.checkClosed(); err != nil {
		return nil, err
	}
	rctx, cancel := c.reqCtx(ctx)
	defer cancel()
	resp, err := c.cli.Get(rctx, c.membersPrefix(), clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("etcdcoord: listing members at %v: %w", c.endpoints, classify(ctx, err))
	}
	return sortedMembers(decodeMembers(resp.Kvs)), nil
}

// watchRetry is the pause before a member watch that failed (no leader,
// compaction, connection loss) is set up again.
const watchRetry = 200 * time.Millisecond

// WatchMembers implements coord.Coordinator. The watch starts at the
// revision of an initial listing, so no change is missed; after a watch
// failure the listing is read again.
func (c *Coordinator) WatchMembers(ctx context.Context) (<-chan []coord.Member, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, coord.ErrClosed
	}
	c.wg.Add(1)
	c.mu.Unlock()
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.ctx, cancel)
	list := func() (map[string]coord.Member, int64, error) {
		rctx, rcancel := context.WithTimeout(wctx, c.cfg.requestTimeout)
		defer rcancel()
		resp, err := c.cli.Get(rctx, c.membersPrefix(), clientv3.WithPrefix())
		if err != nil {
			return nil, 0, fmt.Errorf("etcdcoord: listing members at %v: %w", c.endpoints, classify(wctx, err))
		}
		return decodeMembers(resp.Kvs), resp.Header.Revision, nil
	}
	ms, rev, err := list()
	if err != nil {
		stop()
		cancel()
		c.wg.Done()
		return nil, err
	}
	out := make(chan []coord.Member, 1)
	go func() {
		defer c.wg.Done()
		defer close(out)
		defer stop()
		defer cancel()
		last := sortedMembers(ms)
		sendLatest(out, last)
		for wctx.Err() == nil {
			ictx, icancel := context.WithCancel(clientv3.WithRequireLeader(wctx))
			wch := c.cli.Watch(ictx, c.membersPrefix(), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
			for wr := range wch {
				if wr.Err() != nil {
					break
				}
				for _, ev := range wr.Events {
					switch ev.Type {
					case clientv3.EventTypePut:
						maps := decodeMembers([]*mvccpb.KeyValue{ev.Kv})
						ms[string(ev.Kv.Key)] = maps[string(ev.Kv.Key)]
					case clientv3.EventTypeDelete:
						delete(ms, string(ev.Kv.Key))
					}
				}
				rev = wr.Header.Revision
				if cur := sortedMembers(ms); !slices.Equal(cur, last) {
					last = cur
					sendLatest(out, cur)
				}
			}
			icancel()
			t := time.NewTimer(watchRetry)
			select {
			case <-wctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			if m2, r2, err := list(); err == nil {
				ms, rev = m2, r2
				if cur := sortedMembers(ms); !slices.Equal(cur, last) {
					last = cur
					sendLatest(out, cur)
				}
			}
		}
	}()
	return out, nil
}

// sendLatest puts v in the one-slot channel out, replacing an unread
// value. Only the owning goroutine sends on out, so it never blocks.
func sendLatest[T any](out chan T, v T) {
	select {
	case out <- v:
	default:
		select {
		case <-out:
		default:
		}
		out <- v
	}
}

// WatchLeader implements coord.Coordinator with Election.Observe, started
// again (after a pause) whenever etcd ends the observation.
func (c *Coordinator) WatchLeader(ctx context.Context) (<-chan coord.LeaderInfo, error) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, coord.ErrClosed
	}
	c.wg.Add(1)
	c.mu.Unlock()
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(c.ctx, cancel)
	out := make(chan coord.LeaderInfo, 1)
	go func() {
		defer c.wg.Done()
		defer close(out)
		defer stop()
		defer cancel()
		e := concurrency.NewElection(c.sess, c.electionPrefix())
		var last coord.LeaderInfo
		for wctx.Err() == nil {
			// Observe's goroutine closes its channel when wctx ends or its
			// watch breaks; ranging to the close waits for it.
			for resp := range e.Observe(clientv3.WithRequireLeader(wctx)) {
				kv := resp.Kvs[0]
				if li := (coord.LeaderInfo{ID: string(kv.Value), Term: kv.CreateRevision}); li != last {
					last = li
					sendLatest(out, li)
				}
			}
			t := time.NewTimer(watchRetry)
			select {
			case <-wctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
	return out, nil
}

// Campaign implements coord.Coordinator with concurrency.Election. It
// also ends when the session is lost or the Coordinator is closed.
func (c *Coordinator) Campaign(ctx context.Context) (coord.Leadership, error) {
	c.mu.Lock()
	switch {
	case c.closed:
		c.mu.Unlock()
		return nil, coord.ErrClosed
	case c.member == "":
		c.mu.Unlock()
		return nil, coord.ErrNotJoined
	case c.campaigning:
		c.mu.Unlock()
		return nil, fmt.Errorf("etcdcoord: campaign of %q: already campaigning", c.member)
	}
	c.campaigning = true
	id := c.member
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.campaigning = false
		c.mu.Unlock()
	}()

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopClose := context.AfterFunc(c.ctx, cancel)
	defer stopClose()
	stopSess := context.AfterFunc(c.sess.Ctx(), cancel)
	defer stopSess()

	e := concurrency.NewElection(c.sess, c.electionPrefix())
	if err := e.Campaign(cctx, id); err != nil {
		switch {
		case c.ctx.Err() != nil:
			return nil, coord.ErrClosed
		case c.sess.Ctx().Err() != nil:
			return nil, fmt.Errorf("etcdcoord: campaign of %q: %w", id, coord.ErrSessionLost)
		}
		return nil, fmt.Errorf("etcdcoord: campaign of %q at %v: %w", id, c.endpoints, classify(ctx, err))
	}
	// Campaign returns once every older candidate key is gone; make sure
	// ours was not lost meanwhile (our lease expired while we waited).
	rctx, rcancel := c.reqCtx(ctx)
	resp, err := c.cli.Get(rctx, e.Key())
	rcancel()
	if err != nil {
		return nil, fmt.Errorf("etcdcoord: campaign of %q: checking the leader key: %w", id, classify(ctx, err))
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != e.Rev() {
		return nil, fmt.Errorf("etcdcoord: campaign of %q: leader key %s gone: %w", id, e.Key(), coord.ErrSessionLost)
	}
	l := &leadership{c: c, e: e, key: e.Key(), term: e.Rev(), resigned: make(chan struct{}), done: make(chan struct{})}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, coord.ErrClosed
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		defer close(l.done)
		select {
		case <-c.sess.Done():
		case <-l.resigned:
		case <-c.ctx.Done():
		}
	}()
	return l, nil
}

// Leader implements coord.Coordinator.
func (c *Coordinator) Leader(ctx context.Context) (coord.LeaderInfo, error) {
	if err := c.checkClosed(); err != nil {
		return coord.LeaderInfo{}, err
	}
	rctx, cancel := c.reqCtx(ctx)
	defer cancel()
	resp, err := concurrency.NewElection(c.sess, c.electionPrefix()).Leader(rctx)
	if errors.Is(err, concurrency.ErrElectionNoLeader) {
		return coord.LeaderInfo{}, coord.ErrNoLeader
	}
	if err != nil {
		return coord.LeaderInfo{}, fmt.Errorf("etcdcoord: reading the leader at %v: %w", c.endpoints, classify(ctx, err))
	}
	kv := resp.Kvs[0]
	return coord.LeaderInfo{ID: string(kv.Value), Term: kv.CreateRevision}, nil
}

// Get implements coord.Reader.
func (c *Coordinator) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if err := coord.ValidateKey(key); err != nil {
		return nil, false, err
	}
	if err := c.checkClosed(); err != nil {
		return nil, false, err
	}
	rctx, cancel := c.reqCtx(ctx)
	defer cancel()
	resp, err := c.cli.Get(rctx, c.statePrefix()+key)
	if err != nil {
		return nil, false, fmt.Errorf("etcdcoord: reading %q at %v: %w", key, c.endpoints, classify(ctx, err))
	}
	if len(resp.Kvs) == 0 {
		return nil, false, nil
	}
	return resp.Kvs[0].Value, true, nil
}

// List implements coord.Reader.
func (c *Coordinator) List(ctx context.Context, prefix string) ([]coord.KV, error) {
	if err := c.checkClosed(); err != nil {
		return nil, err
	}
	rctx, cancel := c.reqCtx(ctx)
	defer cancel()
	sp := c.statePrefix()
	resp, err := c.cli.Get(rctx, sp+prefix, clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("etcdcoord: listing %q at %v: %w", prefix, c.endpoints, classify(ctx, err))
	}
	out := make([]coord.KV, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out = append(out, coord.KV{Key: strings.TrimPrefix(string(kv.Key), sp), Value: kv.Value})
	}
	return out, nil
}

// Done implements coord.Coordinator: it is closed when the session's
// keep-alive ends (the lease expired or was revoked, or etcd could not be
// reached for a whole TTL) or at Close.
func (c *Coordinator) Done() <-chan struct{} { return c.sess.Done() }

// Close implements coord.Coordinator. Revoking the lease is bounded by the
// lease TTL (when etcd is unreachable the lease then expires by itself).
func (c *Coordinator) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		c.cancel()
		c.wg.Wait()
		var errs []error
		if err := c.sess.Close(); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			errs = append(errs, fmt.Errorf("etcdcoord: revoking the session lease %x: %w", c.sess.Lease(), err))
		}
		c.sessCancel()
		if err := c.cli.Close(); err != nil {
			errs = append(errs, fmt.Errorf("etcdcoord: closing the etcd client: %w", err))
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}
