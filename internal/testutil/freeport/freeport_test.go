package freeport_test

import (
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/sluice-io/sluice/internal/testutil/freeport"
)

func TestPickIsFreeAndBelowEphemeral(t *testing.T) {
	hi := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if _, err := fmt.Sscan(string(b), &hi); err != nil || hi <= 11000 {
			t.Skipf("ephemeral range %q: Pick falls back to the kernel's ports", b)
		}
	}
	seen := map[int]bool{}
	for range 20 {
		p := freeport.Pick(t)
		if p < 10000 || p >= hi {
			t.Errorf("port %d outside [10000, %d)", p, hi)
		}
		seen[p] = true
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("binding the picked port %d: %v", p, err)
		}
		_ = l.Close()
	}
	if len(seen) < 10 {
		t.Errorf("20 picks gave only %d distinct ports", len(seen))
	}
}
