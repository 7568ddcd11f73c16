package readerbase

import (
	"sync"
	"sync/atomic"
)

// handover is what the fetcher goroutines share with the task goroutine
// (Flink's FutureCompletingBlockingQueue plus the fetcher error slot): the
// bounded batch queue, the first fetcher error, and the availability
// channel.
//
// Availability without lost wake-ups: the task goroutine, finding nothing
// to do, first arms a fresh channel and only then looks at the queue and
// the error slot again. A fetcher first puts its batch (or stores its
// error) and only then notifies, which closes the armed channel. Whichever
// order the two interleave in, either the task goroutine sees the batch on
// its second look, or the fetcher sees the armed channel and closes it.
//
// Lock order: handover.mu is a leaf; nothing else is locked while holding
// it. fetcher.mu is never held while calling into handover.
type handover[E any] struct {
	queue chan Batch[E]
	err   atomic.Pointer[error]      // first fetcher error; never reset
	panc  atomic.Pointer[PanicError] // first fetcher panic; never reset

	mu       sync.Mutex
	armed    chan struct{} // closed on notify; nil when not armed
	closeErr error         // first error from closing a SplitReader
}

func newHandover[E any](capacity int) *handover[E] {
	return &handover[E]{queue: make(chan Batch[E], capacity)}
}

// arm returns a channel that notify will close. Called by the task
// goroutine only.
func (h *handover[E]) arm() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.armed == nil {
		h.armed = make(chan struct{})
	}
	return h.armed
}

// current returns the armed channel, or nil if none is armed.
func (h *handover[E]) current() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.armed
}

// notify closes the armed channel, if any. Safe from any goroutine.
func (h *handover[E]) notify() {
	h.mu.Lock()
	if h.armed != nil {
		close(h.armed)
		h.armed = nil
	}
	h.mu.Unlock()
}

// fail records err if it is the first fetcher error and wakes the task
// goroutine.
func (h *handover[E]) fail(err error) {
	h.err.CompareAndSwap(nil, &err)
	h.notify()
}

// panicked records p if it is the first fetcher panic and wakes the task
// goroutine.
func (h *handover[E]) panicked(p *PanicError) {
	h.panc.CompareAndSwap(nil, p)
	h.notify()
}

// failure returns the first fetcher error, or nil.
func (h *handover[E]) failure() error {
	if p := h.err.Load(); p != nil {
		return *p
	}
	return nil
}

// closeFailed records the first error from closing a SplitReader.
func (h *handover[E]) closeFailed(err error) {
	h.mu.Lock()
	if h.closeErr == nil {
		h.closeErr = err
	}
	h.mu.Unlock()
}

func (h *handover[E]) firstCloseErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.closeErr
}
