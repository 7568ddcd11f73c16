package exchange_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/cluster/exchange"
)

// u64Codec encodes uint64 records as 8 bytes.
type u64Codec struct{}

func (u64Codec) Append(dst []byte, v uint64) ([]byte, error) {
	return binary.LittleEndian.AppendUint64(dst, v), nil
}

func (u64Codec) Decode(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, errors.New("u64Codec: want 8 bytes")
	}
	return binary.LittleEndian.Uint64(b), nil
}

// startServer starts a server on a loopback port and returns it with its
// address; it is stopped at cleanup.
func startServer(t testing.TB, opts ...exchange.Option) (*exchange.Server, string) {
	t.Helper()
	srv, err := exchange.NewServer(opts...)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return srv, lis.Addr().String()
}

func dial(t testing.TB, addr string, opts ...exchange.Option) *exchange.Client {
	t.Helper()
	c, err := exchange.Dial(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var testCh = exchange.ChannelID{Job: "job", Edge: "map->sink", Src: 1, Dst: 2}

// eventually polls cond every millisecond for up to 20s (a loaded
// machine) and fails the test if it never holds.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// pair registers a receiver and opens its sender.
func pair[T any](t testing.TB, srv *exchange.Server, c *exchange.Client, codec exchange.Codec[T], ropts, sopts []exchange.Option) (*exchange.Receiver[T], *exchange.Sender[T]) {
	t.Helper()
	ep := exchange.Epoch{Attempt: 1, Generation: 1}
	r, err := exchange.Listen(srv, testCh, ep, codec, ropts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := exchange.Open(ctx, c, testCh, ep, codec, sopts...)
	if err != nil {
		_ = r.Close()
		t.Fatal(err)
	}
	return r, s
}
