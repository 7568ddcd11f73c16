package exchange_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/cluster/exchange"
	"github.com/sluice-io/sluice/internal/testutil/tcpproxy"
)

func TestNoCodec(t *testing.T) {
	srv, addr := startServer(t)
	c := dial(t, addr)
	ep := exchange.Epoch{Attempt: 1}
	if _, err := exchange.Listen[uint64](srv, testCh, ep, nil); !errors.Is(err, exchange.ErrNoCodec) || !strings.Contains(err.Error(), "map->sink") {
		t.Errorf("Listen without a codec: got %v, want ErrNoCodec naming the edge", err)
	}
	if _, err := exchange.Open[uint64](t.Context(), c, testCh, ep, nil); !errors.Is(err, exchange.ErrNoCodec) {
		t.Errorf("Open without a codec: got %v, want ErrNoCodec", err)
	}
}

// TestEpochs: a sender or receiver of an older epoch is refused; a newer
// receiver supersedes an older one.
func TestEpochs(t *testing.T) {
	srv, addr := startServer(t)
	c := dial(t, addr)
	ctx := t.Context()
	e1, e2 := exchange.Epoch{Attempt: 1, Generation: 5}, exchange.Epoch{Attempt: 2, Generation: 0}
	r1, err := exchange.Listen(srv, testCh, e1, u64Codec{})
	if err != nil {
		t.Fatal(err)
	}
	defer r1.Close()
	if _, err := exchange.Listen(srv, testCh, exchange.Epoch{Attempt: 1, Generation: 4}, u64Codec{}); !errors.Is(err, exchange.ErrStaleEpoch) {
		t.Errorf("Listen of an older epoch: got %v, want ErrStaleEpoch", err)
	}
	if _, err := exchange.Listen(srv, testCh, e1, u64Codec{}); !errors.Is(err, exchange.ErrStaleEpoch) {
		t.Errorf("Listen of the same epoch again: got %v, want ErrStaleEpoch", err)
	}
	r2, err := exchange.Listen(srv, testCh, e2, u64Codec{})
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	if _, _, err := r1.Poll(); !errors.Is(err, exchange.ErrSuperseded) {
		t.Errorf("Poll of a superseded receiver: got %v, want ErrSuperseded", err)
	}
	// A stale sender (the attempt before) is refused at once.
	if _, err := exchange.Open(ctx, c, testCh, e1, u64Codec{}); !errors.Is(err, exchange.ErrStaleEpoch) || !strings.Contains(err.Error(), "stale") {
		t.Errorf("Open of a stale sender: got %v, want ErrStaleEpoch", err)
	}
	s, err := exchange.Open(ctx, c, testCh, e2, u64Codec{})
	if err != nil {
		t.Fatal(err)
	}
	// One sender per receiver.
	if _, err := exchange.Open(ctx, c, testCh, e2, u64Codec{}); !errors.Is(err, exchange.ErrRefused) {
		t.Errorf("a second sender: got %v, want ErrRefused", err)
	}
	if err := s.SendBatch(ctx, []uint64{1, 2}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	m, err := r2.Next(ctx)
	if err != nil || len(m.Records) != 2 {
		t.Fatalf("got %v, %v; want a batch of 2", m, err)
	}
	if _, err := r2.Next(ctx); !errors.Is(err, exchange.ErrEndOfStream) {
		t.Fatalf("after the sender closed: got %v, want ErrEndOfStream", err)
	}
}

// TestAccept: a sender that comes before its receiver waits for it; one
// whose receiver never comes is refused after the accept timeout.
func TestAccept(t *testing.T) {
	srv, addr := startServer(t, exchange.WithAcceptTimeout(300*time.Millisecond))
	c := dial(t, addr)
	ctx := t.Context()
	ep := exchange.Epoch{Attempt: 3}
	other := testCh
	other.Dst = 9
	if _, err := exchange.Open(ctx, c, other, ep, u64Codec{}); !errors.Is(err, exchange.ErrRefused) || !strings.Contains(err.Error(), "no receiver") {
		t.Errorf("Open with no receiver: got %v, want ErrRefused", err)
	}
	type opened struct {
		s   *exchange.Sender[uint64]
		err error
	}
	ch := make(chan opened, 1)
	go func() {
		s, err := exchange.Open(ctx, c, testCh, ep, u64Codec{})
		ch <- opened{s, err}
	}()
	time.Sleep(50 * time.Millisecond) // the sender usually arrives first; either order works
	r, err := exchange.Listen(srv, testCh, ep, u64Codec{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	o := <-ch
	if o.err != nil {
		t.Fatalf("Open before Listen: %v", o.err)
	}
	if err := o.s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Open bounded by its context.
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	other.Dst = 10
	if _, err := exchange.Open(short, c, other, ep, u64Codec{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Open past its context: got %v, want DeadlineExceeded", err)
	}
}

// failCodec fails to encode 666 and to decode 13.
type failCodec struct{ u64Codec }

func (c failCodec) Append(dst []byte, v uint64) ([]byte, error) {
	if v == 666 {
		return dst, errors.New("cannot encode 666")
	}
	return c.u64Codec.Append(dst, v)
}

func (c failCodec) Decode(b []byte) (uint64, error) {
	v, err := c.u64Codec.Decode(b)
	if v == 13 {
		return 0, errors.New("cannot decode 13")
	}
	return v, err
}

// TestCodecErrors: a record that does not encode fails its batch only; one
// that does not decode breaks the channel on both sides, named.
func TestCodecErrors(t *testing.T) {
	srv, addr := startServer(t)
	c := dial(t, addr)
	r, s := pair[uint64](t, srv, c, failCodec{}, nil, []exchange.Option{exchange.WithMaxFrameSize(1024)})
	defer r.Close()
	ctx := t.Context()
	if err := s.SendBatch(ctx, []uint64{1, 666, 2}); err == nil || !strings.Contains(err.Error(), "record 1 of a batch of 3") {
		t.Errorf("encode error: got %v, want one naming record 1", err)
	}
	if err := s.SendBatch(ctx, make([]uint64, 200)); err == nil || !strings.Contains(err.Error(), "max frame size") {
		t.Errorf("a batch over the max frame size: got %v", err)
	}
	if err := s.SendBatch(ctx, []uint64{1, 2}); err != nil {
		t.Fatal(err)
	}
	if err := s.SendBatch(ctx, []uint64{12, 13}); err != nil {
		t.Fatal(err)
	}
	m, err := r.Next(ctx)
	if err != nil || len(m.Records) != 2 || m.Records[0] != 1 {
		t.Fatalf("first batch: got %v, %v", m, err)
	}
	if _, err := r.Next(ctx); !errors.Is(err, exchange.ErrBroken) || !strings.Contains(err.Error(), "decode record 1 of 2") {
		t.Errorf("decode error: got %v, want ErrBroken naming record 1", err)
	}
	if err := s.Close(ctx); !errors.Is(err, exchange.ErrBroken) {
		t.Errorf("sender after the receiver failed to decode: got %v, want ErrBroken", err)
	}
}

// TestReceiverClose: closing the receiver breaks the sender.
func TestReceiverClose(t *testing.T) {
	srv, addr := startServer(t)
	c := dial(t, addr)
	r, s := pair[uint64](t, srv, c, u64Codec{}, []exchange.Option{exchange.WithCredits(1)}, nil)
	ctx := t.Context()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.Poll(); !errors.Is(err, exchange.ErrClosed) {
		t.Errorf("Poll after Close: got %v, want ErrClosed", err)
	}
	var err error
	for i := 0; i < 1000 && err == nil; i++ {
		err = s.SendBatch(ctx, []uint64{1})
	}
	if !errors.Is(err, exchange.ErrBroken) {
		t.Errorf("SendBatch to a closed receiver: got %v, want ErrBroken", err)
	}
	if err := s.Close(ctx); !errors.Is(err, exchange.ErrBroken) {
		t.Errorf("Close: got %v, want ErrBroken", err)
	}
}

// TestSenderCloseStalled: Close with a stalled consumer gives up with its
// context and aborts the stream; the receiver delivers what it has, then
// ErrBroken.
func TestSenderCloseStalled(t *testing.T) {
	srv, addr := startServer(t)
	c := dial(t, addr)
	r, s := pair[uint64](t, srv, c, u64Codec{}, []exchange.Option{exchange.WithCredits(1)}, nil)
	defer r.Close()
	ctx := t.Context()
	for i := range 3 {
		if err := s.SendBatch(ctx, []uint64{uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if err := s.Close(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close with a stalled consumer: got %v, want DeadlineExceeded", err)
	}
	if err := s.SendBatch(ctx, []uint64{9}); !errors.Is(err, exchange.ErrClosed) {
		t.Errorf("SendBatch after Close: got %v, want ErrClosed", err)
	}
	m, err := r.Next(ctx)
	if err != nil || m.Records[0] != 0 {
		t.Fatalf("got %v, %v, want the first batch", m, err)
	}
	if _, err := r.Next(ctx); !errors.Is(err, exchange.ErrBroken) {
		t.Errorf("after an aborted close: got %v, want ErrBroken", err)
	}
}

// TestServerStop: stopping the receiving node's server breaks both ends.
func TestServerStop(t *testing.T) {
	srv, addr := startServer(t)
	c := dial(t, addr)
	r, s := pair[uint64](t, srv, c, u64Codec{}, nil, nil)
	defer r.Close()
	srv.Stop()
	ctx := t.Context()
	if _, err := r.Next(ctx); !errors.Is(err, exchange.ErrBroken) {
		t.Errorf("receiver: got %v, want ErrBroken", err)
	}
	if err := s.Close(ctx); !errors.Is(err, exchange.ErrBroken) {
		t.Errorf("sender: got %v, want ErrBroken", err)
	}
	if _, err := exchange.Listen(srv, testCh, exchange.Epoch{Attempt: 9}, u64Codec{}); !errors.Is(err, exchange.ErrClosed) {
		t.Errorf("Listen on a stopped server: got %v, want ErrClosed", err)
	}
}

// TestBrokenLink cuts the TCP connection under a busy channel: both ends
// fail with ErrBroken; the receiver delivers in order what it received
// before.
func TestBrokenLink(t *testing.T) {
	srv, addr := startServer(t)
	p := tcpproxy.Start(t, addr)
	c := dial(t, p.Addr())
	r, s := pair[uint64](t, srv, c, u64Codec{}, []exchange.Option{exchange.WithCredits(2)}, nil)
	defer r.Close()
	ctx := t.Context()

	sendErr := make(chan error, 1)
	go func() {
		recs := make([]uint64, 64)
		var next uint64
		for range 1_000_000 { // bounded: the cut ends it long before
			for i := range recs {
				recs[i] = next
				next++
			}
			if err := s.SendBatch(ctx, recs); err != nil {
				sendErr <- err
				return
			}
		}
		sendErr <- errors.New("the sender never noticed the cut")
	}()
	var n uint64
	var err error
	for err == nil {
		var m exchange.Message[uint64]
		m, err = r.Next(ctx)
		for _, v := range m.Records {
			if v != n {
				t.Fatalf("record %d: got %d", n, v)
			}
			n++
		}
		if n >= 10_000 && n < 10_064 {
			p.Down() // the connection closed, and no new one
		}
	}
	if !errors.Is(err, exchange.ErrBroken) {
		t.Errorf("receiver after the cut: got %v, want ErrBroken", err)
	}
	if err := <-sendErr; !errors.Is(err, exchange.ErrBroken) {
		t.Errorf("sender after the cut: got %v, want ErrBroken", err)
	}
	if err := s.Close(ctx); !errors.Is(err, exchange.ErrBroken) {
		t.Errorf("Close after the cut: got %v, want ErrBroken", err)
	}
	t.Logf("%d records before the cut was noticed", n)
}

// TestPartition freezes the link (nothing passes, nothing closes): the
// keepalive pings notice, and both ends fail with ErrBroken.
func TestPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for gRPC keepalive timeouts (about 15s)")
	}
	srv, addr := startServer(t, exchange.WithKeepalive(time.Second))
	p := tcpproxy.Start(t, addr)
	c := dial(t, p.Addr(), exchange.WithKeepalive(time.Second)) // gRPC makes it 10s
	r, s := pair[uint64](t, srv, c, u64Codec{}, nil, nil)
	defer r.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := s.SendBatch(ctx, []uint64{1}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(ctx); err != nil {
		t.Fatal(err)
	}
	p.Hold() // both ways: nothing passes, nothing closes
	start := time.Now()
	if _, err := r.Next(ctx); !errors.Is(err, exchange.ErrBroken) {
		t.Errorf("receiver across a partition: got %v, want ErrBroken", err)
	}
	t.Logf("receiver noticed after %v", time.Since(start).Round(time.Millisecond))
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err) // nothing is queued: Flush returns at once
	}
	for err := error(nil); err == nil; {
		err = s.SendBatch(ctx, []uint64{2})
		if err != nil && !errors.Is(err, exchange.ErrBroken) {
			t.Fatalf("sender across a partition: got %v, want ErrBroken", err)
		}
	}
	t.Logf("sender noticed after %v", time.Since(start).Round(time.Millisecond))
	_ = s.Close(ctx)
}
