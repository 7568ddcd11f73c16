package engine

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
)

// Loopback is a task host in the coordinator's own process that still
// passes every message through its wire form, over an in-memory Conn: the
// seam of a remote host without a network, for tests. Cut breaks its link
// as a lost node would. Put it in a job's Placement; Close it after the
// job ended.
type Loopback struct {
	*Remote
	host   *pipeEnd
	mu     sync.Mutex
	cancel context.CancelFunc
	wg     sync.WaitGroup
	err    error
}

// NewLoopback returns a loopback task host named id. log (default
// slog.Default()) is the coordinator side's logger; the host side logs with
// the job's.
func NewLoopback(id string, log *slog.Logger) *Loopback {
	c, h := newPipe(64)
	l := &Loopback{host: h}
	l.Remote = NewRemote(id, c, log)
	l.Remote.onHello = l.serve
	return l
}

// exchangeAddr is the coordinator's own: the host side shares its
// process and its Network, unless SetExchangeAddr set another.
func (l *Loopback) exchangeAddr(j *Job) string {
	if a := l.Remote.exchangeAddr(j); a != "" {
		return a
	}
	return Local.exchangeAddr(j)
}

// serve runs the host side for j (the coordinator's job itself: the same
// graph).
func (l *Loopback) serve(j *Job) {
	ctx, cancel := context.WithCancel(context.Background())
	l.mu.Lock()
	l.cancel = cancel
	l.mu.Unlock()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		err := j.ServeTasks(ctx, l.host)
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
	}()
}

// Cut breaks the link, as a node that died or was cut off: the
// coordinator loses the host, and the host cancels its subtasks.
func (l *Loopback) Cut() { _ = l.host.Close() }

// Close ends the link and waits until the host side stopped its subtasks.
// It returns the error that ended the host side, if the link broke.
func (l *Loopback) Close() error {
	_ = l.Remote.Close()
	l.mu.Lock()
	cancel := l.cancel
	l.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	if errors.Is(l.err, errPipeClosed) {
		return nil
	}
	return l.err
}

// errPipeClosed is the error of a closed in-memory Conn.
var errPipeClosed = errors.New("link closed")

// pipeEnd is one end of an in-memory Conn pair. Closing either end closes
// both, as a broken connection does.
type pipeEnd struct {
	in     <-chan []byte
	out    chan<- []byte
	closed chan struct{}
	once   *sync.Once
}

// newPipe returns two connected ends; each direction buffers capacity
// frames.
func newPipe(capacity int) (*pipeEnd, *pipeEnd) {
	ab, ba := make(chan []byte, capacity), make(chan []byte, capacity)
	closed, once := make(chan struct{}), &sync.Once{}
	return &pipeEnd{in: ba, out: ab, closed: closed, once: once}, &pipeEnd{in: ab, out: ba, closed: closed, once: once}
}

func (p *pipeEnd) Send(b []byte) error {
	select {
	case <-p.closed:
		return errPipeClosed
	default:
	}
	select {
	case p.out <- slices.Clone(b):
		return nil
	case <-p.closed:
		return errPipeClosed
	}
}

func (p *pipeEnd) Recv() ([]byte, error) {
	select {
	case <-p.closed:
		return nil, errPipeClosed
	default:
	}
	select {
	case b := <-p.in:
		return b, nil
	case <-p.closed:
		return nil, errPipeClosed
	}
}

func (p *pipeEnd) Close() error {
	p.once.Do(func() { close(p.closed) })
	return nil
}
