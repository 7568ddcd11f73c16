package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"testing"
)

// lowest is the smallest port Pick chooses.
const lowest = 10000

// attempts bounds the random ports Pick tries before it falls back to one
// from the ephemeral range.
const attempts = 100

// ephemeralLow is the first port of the kernel's ephemeral range (Linux:
// /proc/sys/net/ipv4/ip_local_port_range), 32768 when it cannot be read.
func ephemeralLow() int {
	lo := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		_, _ = fmt.Sscan(string(b), &lo)
	}
	return lo
}

// Pick returns a TCP port on 127.0.0.1 that is free now: a random one
// below the ephemeral range, or, when none of a bounded number of tries is
// free (or the range starts too low), one the kernel assigns.
func Pick(t testing.TB) int {
	t.Helper()
	if hi := ephemeralLow(); hi > lowest+1000 {
		for range attempts {
			p := lowest + rand.IntN(hi-lowest)
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				continue
			}
			_ = l.Close()
			return p
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("picking a free port on 127.0.0.1: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Addr is Pick as a host:port on 127.0.0.1.
func Addr(t testing.TB) string {
	t.Helper()
	return fmt.Sprintf("127.0.0.1:%d", Pick(t))
}
