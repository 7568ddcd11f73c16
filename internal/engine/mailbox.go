package engine

import (
	"sync"
	"sync/atomic"
)

// queue is an unbounded FIFO that never blocks its producers: the
// coordinator enqueues into task mailboxes and tasks enqueue into the
// coordinator's inbox without waiting for each other. Consumers wait on
// Ready, which holds a token whenever the queue may be non-empty.
type queue[M any] struct {
	mu    sync.Mutex
	items []M
	n     atomic.Int64
	ready chan struct{}
}

func newQueue[M any]() *queue[M] { return &queue[M]{ready: make(chan struct{}, 1)} }

// Put appends m; it never blocks.
func (q *queue[M]) Put(m M) {
	q.mu.Lock()
	q.items = append(q.items, m)
	q.n.Add(1)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// Len is a cheap, racy hint.
func (q *queue[M]) Len() int64 { return q.n.Load() }

// Drain removes and returns everything queued, in order.
func (q *queue[M]) Drain(buf []M) []M {
	if q.n.Load() == 0 {
		return buf[:0]
	}
	q.mu.Lock()
	buf = append(buf[:0], q.items...)
	clear(q.items)
	q.items = q.items[:0]
	q.n.Store(0)
	q.mu.Unlock()
	return buf
}

// Ready returns a channel with a token after a Put.
func (q *queue[M]) Ready() <-chan struct{} { return q.ready }
