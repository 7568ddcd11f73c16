package tcpproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Direction is one way of a proxied connection.
type Direction int

const (
	// ToServer is the client's bytes to the target (requests).
	ToServer Direction = iota
	// ToClient is the target's bytes to the client (answers).
	ToClient
)

func (d Direction) String() string {
	if d == ToServer {
		return "to server"
	}
	return "to client"
}

// DialTimeout bounds the proxy's dial of the target for each accepted
// connection; a connection whose dial fails is closed.
const DialTimeout = 5 * time.Second

// upTimeout bounds Up's retries when the port is not free again yet.
const upTimeout = 10 * time.Second

// Proxy forwards loopback TCP connections to a target. Its methods are safe
// for concurrent use.
type Proxy struct {
	target string
	addr   string

	mu          sync.Mutex
	ln          net.Listener // nil while down or closed
	pairs       map[*pair]struct{}
	refuseUntil time.Time
	gates       [2]chan struct{} // per Direction: closed while forwarding
	closed      bool

	done chan struct{} // closed by Close
	once sync.Once
	wg   sync.WaitGroup

	accepted, cuts, refused atomic.Int64
	bytes                   [2]atomic.Int64
}

// pair is one proxied connection: the client's side and the target's.
type pair struct {
	client, server net.Conn
	dead           chan struct{} // closed when the pair is closed
	once           sync.Once
}

func (pr *pair) close(reset bool) {
	pr.once.Do(func() {
		close(pr.dead)
		for _, c := range []net.Conn{pr.client, pr.server} {
			if tc, ok := c.(*net.TCPConn); ok && reset {
				_ = tc.SetLinger(0)
			}
			c.Close()
		}
	})
}

// New starts a proxy on 127.0.0.1 (a free port) to target. Close it.
func New(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("tcpproxy: listen on 127.0.0.1: %w", err)
	}
	p := &Proxy{target: target, addr: ln.Addr().String(), pairs: map[*pair]struct{}{}, done: make(chan struct{})}
	for d := range p.gates {
		p.gates[d] = make(chan struct{})
		close(p.gates[d])
	}
	p.serve(ln)
	return p, nil
}

// Start is New for a test: it fails the test on an error and closes the
// proxy when the test ends.
func Start(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p, err := New(target)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Close)
	return p
}

// Addr is the proxy's address (127.0.0.1:port); it stays the same across
// Down and Up.
func (p *Proxy) Addr() string { return p.addr }

// Target is the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

func (p *Proxy) serve(ln net.Listener) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		ln.Close()
		return
	}
	p.ln = ln
	p.wg.Go(func() { p.accept(ln) })
}

func (p *Proxy) accept(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return // closed: Down or Close
		}
		p.accepted.Add(1)
		p.mu.Lock()
		refuse := time.Now().Before(p.refuseUntil)
		p.mu.Unlock()
		if refuse {
			p.refused.Add(1)
			c.Close()
			continue
		}
		s, err := net.DialTimeout("tcp", p.target, DialTimeout)
		if err != nil { // the target is down: so is this connection
			c.Close()
			continue
		}
		pr := &pair{client: c, server: s, dead: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			pr.close(false)
			return
		}
		p.pairs[pr] = struct{}{}
		p.wg.Go(func() { p.pipe(pr, s, c, ToServer) })
		p.wg.Go(func() { p.pipe(pr, c, s, ToClient) })
		p.mu.Unlock()
	}
}

// pipe copies src to dst, waiting while its direction is held; when
// either side ends it closes both.
func (p *Proxy) pipe(pr *pair, dst, src net.Conn, d Direction) {
	defer func() {
		pr.close(false)
		p.mu.Lock()
		delete(p.pairs, pr)
		p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			gate := p.gates[d]
			p.mu.Unlock()
			select {
			case <-gate:
			case <-pr.dead:
				return
			case <-p.done:
				return
			}
			p.bytes[d].Add(int64(n)) // before the write: a peer that got them finds them counted
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // io.EOF, or closed
			return
		}
	}
}

// Cut closes every open connection and returns how many (client
// connections) it closed. New connections are still accepted.
func (p *Proxy) Cut() int { return p.cut(false) }

// Reset is Cut with a TCP reset (SO_LINGER 0) instead of an orderly close.
func (p *Proxy) Reset() int { return p.cut(true) }

func (p *Proxy) cut(reset bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.pairs)
	for pr := range p.pairs {
		pr.close(reset)
		delete(p.pairs, pr)
	}
	p.cuts.Add(int64(n))
	return n
}

// Open returns the number of connections open through the proxy.
func (p *Proxy) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pairs)
}

// Hold stops forwarding the bytes of the given directions (both when none
// is given) until Release: they are read and kept, nothing is closed. A
// connection cut or the proxy closed while held drops what it kept.
func (p *Proxy) Hold(dirs ...Direction) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range directions(dirs) {
		select {
		case <-p.gates[d]: // forwarding: close the gate
			p.gates[d] = make(chan struct{})
		default: // held already
		}
	}
}

// Release forwards the given directions again (both when none is given),
// what was held first.
func (p *Proxy) Release(dirs ...Direction) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range directions(dirs) {
		select {
		case <-p.gates[d]:
		default:
			close(p.gates[d])
		}
	}
}

func directions(dirs []Direction) []Direction {
	if len(dirs) == 0 {
		return []Direction{ToServer, ToClient}
	}
	return dirs
}

// Refuse closes every connection accepted from now until d has passed as
// soon as it is accepted (the client sees its connection closed before
// any answer). Refuse(0) ends a refusal.
func (p *Proxy) Refuse(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuseUntil = time.Now().Add(d)
}

// Down closes the listener, so that dials are refused, and every open
// connection; it returns how many connections it closed. Up undoes it.
func (p *Proxy) Down() int {
	p.mu.Lock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	p.mu.Unlock()
	return p.Cut()
}

// ErrClosed is returned by Up on a closed proxy.
var ErrClosed = errors.New("tcpproxy: closed")

// Up listens again on the proxy's address after Down, retrying while the
// port is not free yet, until ctx ends or 10s passed. It does nothing
// when the proxy is up.
func (p *Proxy) Up(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, upTimeout)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		p.mu.Lock()
		up, closed := p.ln != nil, p.closed
		p.mu.Unlock()
		switch {
		case closed:
			return ErrClosed
		case up:
			return nil
		}
		ln, err := net.Listen("tcp", p.addr)
		if err == nil {
			p.serve(ln)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("tcpproxy: listen again on %s: %w (last: %v)", p.addr, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// Close stops the proxy: it closes the listener and every connection and
// waits for the proxy's goroutines. Calling it again does nothing.
func (p *Proxy) Close() {
	p.once.Do(func() {
		p.mu.Lock()
		p.closed = true
		if p.ln != nil {
			p.ln.Close()
			p.ln = nil
		}
		p.mu.Unlock()
		close(p.done)
		p.Cut()
		p.wg.Wait()
	})
}

// Accepted returns the number of connections accepted, refused ones
// included.
func (p *Proxy) Accepted() int64 { return p.accepted.Load() }

// Cuts returns the number of connections closed by Cut, Reset, Down and
// Close.
func (p *Proxy) Cuts() int64 { return p.cuts.Load() }

// Refused returns the number of connections closed at once by Refuse.
func (p *Proxy) Refused() int64 { return p.refused.Load() }

// Bytes returns the number of bytes forwarded (or being forwarded) in
// direction d.
func (p *Proxy) Bytes(d Direction) int64 { return p.bytes[d].Load() }
