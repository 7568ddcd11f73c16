package coord

import (
	"context"
	"fmt"
	"strings"
)

// Member is one node of a cluster as seen through membership.
type Member struct {
	// ID names the node; unique among live members. It must be non-empty
	// and must not contain '/'.
	ID string `json:"id"`
	// Addr is where other nodes reach this node's data plane (host:port).
	Addr string `json:"addr"`
}

// Validate reports whether m can join: an empty ID or one containing '/'
// is refused.
func (m Member) Validate() error {
	if m.ID == "" {
		return fmt.Errorf("coord: member %+v: empty node id", m)
	}
	if strings.ContainsAny(m.ID, "/\x00") {
		return fmt.Errorf("coord: member id %q: must not contain '/' or NUL", m.ID)
	}
	return nil
}

// LeaderInfo names the current leader and its term.
type LeaderInfo struct {
	ID   string // the leader's node id
	Term int64  // the leader's Leadership.Term
}

// KV is one coordination-state entry.
type KV struct {
	Key   string // relative to the state namespace, as written
	Value []byte
}

// Reader reads coordination state. Reads need no leadership and may be
// made by any node.
type Reader interface {
	// Get returns the value of key and whether it exists.
	Get(ctx context.Context, key string) (value []byte, ok bool, err error)
	// List returns the entries whose keys start with prefix, sorted by key.
	List(ctx context.Context, prefix string) ([]KV, error)
}

// Coordinator is one node's session with the coordination store. The
// session is held by a lease: when the node stops renewing it (the process
// died, was paused past the TTL, or lost the store), its membership and any
// leadership end.
//
// A Coordinator is safe for concurrent use. Close ends every goroutine it
// started and the channels it returned.
type Coordinator interface {
	Reader

	// Join registers m as a live member for the life of the session.
	// Joining again with the same id from the same session updates the
	// address; an id held by another live session fails with
	// ErrMemberExists.
	Join(ctx context.Context, m Member) error

	// Members returns the live members, sorted by ID.
	Members(ctx context.Context) ([]Member, error)

	// WatchMembers sends the current live members (sorted by ID) at once
	// and again after every change. Snapshots are coalesced: a slow
	// receiver sees the latest, not every one. The channel is closed when
	// ctx ends or the Coordinator is closed.
	WatchMembers(ctx context.Context) (<-chan []Member, error)

	// Campaign blocks until this node is the leader or ctx ends; it needs
	// Join first. A node campaigns at most once at a time.
	Campaign(ctx context.Context) (Leadership, error)

	// Leader returns the current leader, or ErrNoLeader.
	Leader(ctx context.Context) (LeaderInfo, error)

	// WatchLeader sends the current leader as soon as there is one, and
	// again each time leadership passes to a new term; periods without a
	// leader are not reported. Like WatchMembers it coalesces, and the
	// channel is closed when ctx ends or the Coordinator is closed.
	WatchLeader(ctx context.Context) (<-chan LeaderInfo, error)

	// Done is closed when the session is known to be lost (the lease
	// expired or was revoked, or Close was called). It is advisory: the
	// store, not this channel, decides whether a fenced write succeeds.
	Done() <-chan struct{}

	// Close ends the session: it stops the goroutines, releases the lease
	// (so membership and leadership end at once rather than after the TTL)
	// and closes the connection. Close is idempotent.
	Close() error
}

// Leadership is a won election. Its writes are fenced (see the package doc).
// A Leadership is safe for concurrent use.
type Leadership interface {
	// Term is the store revision at which the leadership key was created.
	// Terms of successive leaders increase; peers can use it to refuse
	// commands from an older leader.
	Term() int64

	// Apply makes every op in one atomic transaction, conditioned on this
	// term still holding leadership. It returns ErrFenced when the store
	// refused it for that reason, ErrNotLeader after Resign or after the
	// Coordinator was closed (then also ErrClosed), and an error
	// wrapping ErrUnavailable when the store could not be reached.
	Apply(ctx context.Context, ops ...Op) error

	// Done is closed when leadership is known to be lost or was resigned.
	// Like Coordinator.Done it is advisory.
	Done() <-chan struct{}

	// Resign gives leadership up so that another candidate wins at once.
	// Later Apply calls fail with ErrNotLeader.
	Resign(ctx context.Context) error
}

// Op is one write of a fenced transaction; build it with Put or Delete.
type Op struct {
	Key    string
	Value  []byte // nil for a delete
	Delete bool
}

// Put returns an Op that sets key to value.
func Put(key string, value []byte) Op { return Op{Key: key, Value: value} }

// Delete returns an Op that removes key (a missing key is no error).
func Delete(key string) Op { return Op{Key: key, Delete: true} }

// ValidateKey reports whether key may name coordination state: it must be
// non-empty, must not start with '/' and must not contain NUL.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("coord: empty state key")
	case strings.HasPrefix(key, "/"):
		return fmt.Errorf("coord: state key %q: must be relative (no leading '/')", key)
	case strings.ContainsRune(key, 0):
		return fmt.Errorf("coord: state key %q: contains NUL", key)
	}
	return nil
}

// MaxOps is the most ops one fenced write may carry: etcd's default limit
// of operations in a transaction (--max-txn-ops), enforced by every
// implementation alike.
const MaxOps = 128

// ValidateOps checks every op's key and refuses an empty list, more than
// MaxOps ops, and a key written twice (etcd refuses that too).
func ValidateOps(ops []Op) error {
	if len(ops) == 0 {
		return fmt.Errorf("coord: fenced write with no ops")
	}
	if len(ops) > MaxOps {
		return fmt.Errorf("coord: fenced write with %d ops, more than %d", len(ops), MaxOps)
	}
	seen := make(map[string]int, len(ops))
	for i, op := range ops {
		if err := ValidateKey(op.Key); err != nil {
			return fmt.Errorf("coord: op %d: %w", i, err)
		}
		if j, dup := seen[op.Key]; dup {
			return fmt.Errorf("coord: ops %d and %d both write key %q", j, i, op.Key)
		}
		seen[op.Key] = i
	}
	return nil
}
