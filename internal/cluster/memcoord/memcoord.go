package memcoord

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/sluice-io/sluice/internal/cluster/coord"
)

const (
	membersPrefix  = "members/"
	electionPrefix = "election/"
	statePrefix    = "state/"
)

// Cluster is the shared store of the in-process nodes. The zero value is
// not usable; call NewCluster.
type Cluster struct {
	mu        sync.Mutex
	rev       int64
	kv        map[string]entry
	nextLease int64
	live      map[int64]*Node // sessions whose lease has not ended
	changed   chan struct{}   // closed and replaced on every change
}

type entry struct {
	value  []byte
	create int64
	lease  int64
}

// NewCluster returns an empty store.
func NewCluster() *Cluster {
	return &Cluster{kv: map[string]entry{}, live: map[int64]*Node{}, changed: make(chan struct{})}
}

// Node starts a new session: a coord.Coordinator with a lease of its own.
func (c *Cluster) Node() *Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextLease++
	n := &Node{c: c, lease: c.nextLease, done: make(chan struct{}), quit: make(chan struct{})}
	c.live[n.lease] = n
	return n
}

// Expire ends n's lease as the store would when n stopped renewing it past
// its TTL: its membership and election keys disappear and its fenced writes
// are refused from now on. n itself is not closed.
func (c *Cluster) Expire(n *Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endLeaseLocked(n)
}

func (c *Cluster) endLeaseLocked(n *Node) {
	if c.live[n.lease] != n {
		return
	}
	delete(c.live, n.lease)
	removed := false
	for k, e := range c.kv {
		if e.lease == n.lease {
			delete(c.kv, k)
			removed = true
		}
	}
	if removed {
		c.rev++
	}
	close(n.done)
	if n.lead != nil {
		n.lead.end()
	}
	c.broadcastLocked()
}

func (c *Cluster) broadcastLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// putLocked writes one key at a new revision.
func (c *Cluster) putLocked(key string, value []byte, lease int64) {
	c.rev++
	create := c.rev
	if e, ok := c.kv[key]; ok {
		create = e.create
	}
	c.kv[key] = entry{value: slices.Clone(value), create: create, lease: lease}
}

// leaderLocked returns the election key with the lowest creation revision.
func (c *Cluster) leaderLocked() (key string, e entry, ok bool) {
	for k, v := range c.kv {
		if strings.HasPrefix(k, electionPrefix) && (!ok || v.create < e.create) {
			key, e, ok = k, v, true
		}
	}
	return key, e, ok
}

// Node is one node's session with a Cluster. It implements
// coord.Coordinator.
type Node struct {
	c     *Cluster
	lease int64
	done  chan struct{} // closed when the lease ends
	quit  chan struct{} // closed by Close

	closeOnce sync.Once
	wg        sync.WaitGroup

	// guarded by c.mu
	member      string
	campaigning bool
	lead        *leadership
	closed      bool
}

var _ coord.Coordinator = (*Node)(nil)

func (n *Node) checkClosedLocked() error {
	if n.closed {
		return coord.ErrClosed
	}
	return nil
}

// Join implements coord.Coordinator.
func (n *Node) Join(ctx context.Context, m coord.Member) error {
	if err := m.Validate(); err != nil {
		return err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("memcoord: encoding member %q: %w", m.ID, err)
	}
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := n.checkClosedLocked(); err != nil {
		return err
	}
	if c.live[n.lease] != n {
		return fmt.Errorf("memcoord: join %q: %w", m.ID, coord.ErrSessionLost)
	}
	if n.member != "" && n.member != m.ID {
		return fmt.Errorf("memcoord: join %q: this session already joined as %q", m.ID, n.member)
	}
	key := membersPrefix + m.ID
	if e, ok := c.kv[key]; ok && e.lease != n.lease {
		return fmt.Errorf("memcoord: join %q: %w", m.ID, coord.ErrMemberExists)
	}
	c.putLocked(key, b, n.lease)
	n.member = m.ID
	c.broadcastLocked()
	return nil
}

func (c *Cluster) membersLocked() ([]coord.Member, error) {
	var ms []coord.Member
	for k, e := range c.kv {
		if !strings.HasPrefix(k, membersPrefix) {
			continue
		}
		var m coord.Member
		if err := json.Unmarshal(e.value, &m); err != nil {
			return nil, fmt.Errorf("memcoord: decoding member %q: %w", k, err)
		}
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b coord.Member) int { return strings.Compare(a.ID, b.ID) })
	return ms, nil
}

// Members implements coord.Coordinator.
func (n *Node) Members(ctx context.Context) ([]coord.Member, error) {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	if err := n.checkClosedLocked(); err != nil {
		return nil, err
	}
	return n.c.membersLocked()
}

// WatchMembers implements coord.Coordinator.
func (n *Node) WatchMembers(ctx context.Context) (<-chan []coord.Member, error) {
	c := n.c
	c.mu.Lock()
	if err := n.checkClosedLocked(); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	n.wg.Add(1)
	c.mu.Unlock()
	out := make(chan []coord.Member, 1)
	go func() {
		defer n.wg.Done()
		defer close(out)
		var last []coord.Member
		first := true
		for {
			c.mu.Lock()
			ms, err := c.membersLocked()
			changed := c.changed
			c.mu.Unlock()
			if err == nil && (first || !slices.Equal(ms, last)) {
				first, last = false, ms
				sendLatest(out, ms)
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			case <-n.quit:
				return
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

// WatchLeader implements coord.Coordinator.
func (n *Node) WatchLeader(ctx context.Context) (<-chan coord.LeaderInfo, error) {
	c := n.c
	c.mu.Lock()
	if err := n.checkClosedLocked(); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	n.wg.Add(1)
	c.mu.Unlock()
	out := make(chan coord.LeaderInfo, 1)
	go func() {
		defer n.wg.Done()
		defer close(out)
		var last coord.LeaderInfo
		for {
			c.mu.Lock()
			_, e, ok := c.leaderLocked()
			changed := c.changed
			c.mu.Unlock()
			if li := (coord.LeaderInfo{ID: string(e.value), Term: e.create}); ok && li != last {
				last = li
				sendLatest(out, li)
			}
			select {
			case <-changed:
			case <-ctx.Done():
				return
			case <-n.quit:
				return
			}
		}
	}()
	return out, nil
}

// Campaign implements coord.Coordinator.
func (n *Node) Campaign(ctx context.Context) (coord.Leadership, error) {
	c := n.c
	c.mu.Lock()
	if err := n.checkClosedLocked(); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	if n.member == "" {
		c.mu.Unlock()
		return nil, coord.ErrNotJoined
	}
	if c.live[n.lease] != n {
		c.mu.Unlock()
		return nil, fmt.Errorf("memcoord: campaign of %q: %w", n.member, coord.ErrSessionLost)
	}
	if n.campaigning || n.lead != nil {
		c.mu.Unlock()
		return nil, fmt.Errorf("memcoord: campaign of %q: already campaigning or leading", n.member)
	}
	key := fmt.Sprintf("%s%x", electionPrefix, n.lease)
	c.putLocked(key, []byte(n.member), n.lease)
	n.campaigning = true
	c.broadcastLocked()
	c.mu.Unlock()
	for {
		c.mu.Lock()
		e, mine := c.kv[key]
		lk, _, ok := c.leaderLocked()
		switch {
		case !mine:
			n.campaigning = false
			c.mu.Unlock()
			return nil, fmt.Errorf("memcoord: campaign of %q: %w", n.member, coord.ErrSessionLost)
		case ok && lk == key:
			n.campaigning = false
			l := &leadership{n: n, key: key, term: e.create, resigned: make(chan struct{}), done: make(chan struct{})}
			n.lead = l
			c.mu.Unlock()
			return l, nil
		}
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			c.mu.Lock()
			n.campaigning = false
			if e, ok := c.kv[key]; ok && e.lease == n.lease {
				delete(c.kv, key)
				c.rev++
				c.broadcastLocked()
			}
			c.mu.Unlock()
			return nil, fmt.Errorf("memcoord: campaign of %q: %w", n.member, ctx.Err())
		case <-n.quit:
			return nil, coord.ErrClosed
		}
	}
}

// Leader implements coord.Coordinator.
func (n *Node) Leader(ctx context.Context) (coord.LeaderInfo, error) {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	if err := n.checkClosedLocked(); err != nil {
		return coord.LeaderInfo{}, err
	}
	_, e, ok := n.c.leaderLocked()
	if !ok {
		return coord.LeaderInfo{}, coord.ErrNoLeader
	}
	return coord.LeaderInfo{ID: string(e.value), Term: e.create}, nil
}

// Get implements coord.Reader.
func (n *Node) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if err := coord.ValidateKey(key); err != nil {
		return nil, false, err
	}
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	if err := n.checkClosedLocked(); err != nil {
		return nil, false, err
	}
	e, ok := n.c.kv[statePrefix+key]
	if !ok {
		return nil, false, nil
	}
	return slices.Clone(e.value), true, nil
}

// List implements coord.Reader.
func (n *Node) List(ctx context.Context, prefix string) ([]coord.KV, error) {
	n.c.mu.Lock()
	defer n.c.mu.Unlock()
	if err := n.checkClosedLocked(); err != nil {
		return nil, err
	}
	var out []coord.KV
	for k, e := range n.c.kv {
		if rel, ok := strings.CutPrefix(k, statePrefix); ok && strings.HasPrefix(rel, prefix) {
			out = append(out, coord.KV{Key: rel, Value: slices.Clone(e.value)})
		}
	}
	slices.SortFunc(out, func(a, b coord.KV) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// Done implements coord.Coordinator.
func (n *Node) Done() <-chan struct{} { return n.done }

// Close implements coord.Coordinator.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.c.mu.Lock()
		n.closed = true
		close(n.quit)
		n.c.endLeaseLocked(n)
		n.c.mu.Unlock()
		n.wg.Wait()
	})
	return nil
}

type leadership struct {
	n        *Node
	key      string
	term     int64
	once     sync.Once
	resigned chan struct{}
	done     chan struct{}
}

var _ coord.Leadership = (*leadership)(nil)

func (l *leadership) end() { l.once.Do(func() { close(l.done) }) }

func (l *leadership) Term() int64 { return l.term }

func (l *leadership) Done() <-chan struct{} { return l.done }

func (l *leadership) Apply(ctx context.Context, ops ...coord.Op) error {
	if err := coord.ValidateOps(ops); err != nil {
		return err
	}
	select {
	case <-l.resigned:
		return fmt.Errorf("memcoord: fenced write at term %d: %w", l.term, coord.ErrNotLeader)
	default:
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memcoord: fenced write at term %d: %w", l.term, err)
	}
	c := l.n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := l.n.checkClosedLocked(); err != nil {
		return fmt.Errorf("memcoord: fenced write at term %d: %w: %w", l.term, coord.ErrNotLeader, err)
	}
	if e, ok := c.kv[l.key]; !ok || e.create != l.term {
		return fmt.Errorf("memcoord: fenced write at term %d: %w", l.term, coord.ErrFenced)
	}
	c.rev++
	for _, op := range ops {
		k := statePrefix + op.Key
		if op.Delete {
			delete(c.kv, k)
			continue
		}
		create := c.rev
		if e, ok := c.kv[k]; ok {
			create = e.create
		}
		c.kv[k] = entry{value: slices.Clone(op.Value), create: create}
	}
	c.broadcastLocked()
	return nil
}

func (l *leadership) Resign(ctx context.Context) error {
	c := l.n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-l.resigned:
		return nil
	default:
	}
	close(l.resigned)
	l.end()
	if l.n.lead == l {
		l.n.lead = nil
	}
	if e, ok := c.kv[l.key]; ok && e.create == l.term {
		delete(c.kv, l.key)
		c.rev++
		c.broadcastLocked()
	}
	return nil
}
