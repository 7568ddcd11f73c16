package tcpproxy_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluice-io/sluice/internal/testutil/tcpproxy"
)

// TestMain checks that the proxies and echo servers of the tests leave
// no goroutine behind once their tests' cleanups ran.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echoServer answers every line with the same line; it stops when the
// test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// dial connects to addr with a deadline for every read and write, so that
// no step of a test can hang.
func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	return c, bufio.NewReader(c)
}

func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, line string) {
	t.Helper()
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		t.Fatalf("write: %v", err)
	}
	got, err := r.ReadString('\n')
	if err != nil || got != line+"\n" {
		t.Fatalf("read back %q, %v; want %q", got, err, line)
	}
}

// TestForwardAndCut: bytes go both ways and are counted; Cut closes the
// open connections (the client reads EOF) and counts them; a new
// connection works after.
func TestForwardAndCut(t *testing.T) {
	p := tcpproxy.Start(t, echoServer(t))
	c, r := dial(t, p.Addr())
	roundTrip(t, c, r, "hello")
	if p.Bytes(tcpproxy.ToServer) != 6 || p.Bytes(tcpproxy.ToClient) != 6 || p.Accepted() != 1 || p.Open() != 1 {
		t.Errorf("bytes %d/%d, accepted %d, open %d; want 6/6, 1, 1", p.Bytes(tcpproxy.ToServer), p.Bytes(tcpproxy.ToClient), p.Accepted(), p.Open())
	}
	if n := p.Cut(); n != 1 {
		t.Errorf("Cut closed %d connections, want 1", n)
	}
	if _, err := r.ReadString('\n'); !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("read on a cut connection: %v, want EOF", err)
	}
	c2, r2 := dial(t, p.Addr())
	roundTrip(t, c2, r2, "again")
	if p.Cuts() != 1 || p.Accepted() != 2 {
		t.Errorf("cuts %d, accepted %d; want 1, 2", p.Cuts(), p.Accepted())
	}
	p.Close()
	p.Close() // again: nothing
}

// TestHold: a held direction forwards nothing until released, then what
// it held; the other direction keeps going.
func TestHold(t *testing.T) {
	p := tcpproxy.Start(t, echoServer(t))
	c, r := dial(t, p.Addr())
	roundTrip(t, c, r, "before")
	p.Hold(tcpproxy.ToClient)
	if _, err := io.WriteString(c, "held\n"); err != nil {
		t.Fatal(err)
	}
	// The request reaches the server (ToServer is not held): wait,
	// bounded, until the proxy forwarded it.
	for i := 0; p.Bytes(tcpproxy.ToServer) < 12; i++ {
		if i == 10000 {
			t.Fatalf("the request was not forwarded: %d bytes to the server", p.Bytes(tcpproxy.ToServer))
		}
		time.Sleep(time.Millisecond)
	}
	// Its answer does not come while held (a read that would return it
	// times out).
	if err := c.SetReadDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if got, err := r.ReadString('\n'); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read while held: %q, %v; want a timeout", got, err)
	}
	if err := c.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	p.Release()
	if got, err := r.ReadString('\n'); err != nil || got != "held\n" {
		t.Fatalf("after Release: %q, %v", got, err)
	}
	// Both directions held, then the connection cut: nothing hangs.
	p.Hold()
	if _, err := io.WriteString(c, "lost\n"); err != nil {
		t.Fatal(err)
	}
	if n := p.Cut(); n != 1 {
		t.Errorf("Cut while held closed %d, want 1", n)
	}
	p.Release()
	c2, r2 := dial(t, p.Addr())
	roundTrip(t, c2, r2, "after")
}

// TestRefuse: while refusing, a new connection is closed at once and
// counted; Refuse(0) ends it.
func TestRefuse(t *testing.T) {
	p := tcpproxy.Start(t, echoServer(t))
	p.Refuse(time.Hour)
	c, r := dial(t, p.Addr())
	_, _ = io.WriteString(c, "x\n")
	if _, err := r.ReadString('\n'); err == nil {
		t.Fatal("a refused connection answered")
	}
	if p.Refused() != 1 {
		t.Errorf("refused %d, want 1", p.Refused())
	}
	p.Refuse(0)
	c2, r2 := dial(t, p.Addr())
	roundTrip(t, c2, r2, "served")
}

// TestDownUp: Down closes the listener (a dial is refused) and the open
// connections; Up listens again on the same address.
func TestDownUp(t *testing.T) {
	p := tcpproxy.Start(t, echoServer(t))
	addr := p.Addr()
	c, r := dial(t, addr)
	roundTrip(t, c, r, "up")
	if n := p.Down(); n != 1 {
		t.Errorf("Down closed %d connections, want 1", n)
	}
	if c, err := net.DialTimeout("tcp", addr, 10*time.Second); err == nil {
		c.Close()
		t.Fatal("dial while down succeeded")
	}
	if err := p.Up(t.Context()); err != nil {
		t.Fatal(err)
	}
	if p.Addr() != addr {
		t.Errorf("address %s after Up, want %s", p.Addr(), addr)
	}
	c2, r2 := dial(t, addr)
	roundTrip(t, c2, r2, "up again")
	p.Close()
	if err := p.Up(t.Context()); !errors.Is(err, tcpproxy.ErrClosed) {
		t.Errorf("Up after Close: %v, want ErrClosed", err)
	}
}
