package etcdcoord_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/sluice-io/sluice/internal/cluster/coord"
	"github.com/sluice-io/sluice/internal/cluster/coord/coordtest"
	"github.com/sluice-io/sluice/internal/cluster/etcdcoord"
)

func TestMain(m *testing.M) {
	if os.Getenv(nodeChildEnv) != "" {
		os.Exit(nodeChildMain())
	}
	goleak.VerifyTestMain(m,
		// An embedded etcd member's peer transport (rafthttp over
		// net/http) leaves its keep-alive HTTP connections to the other
		// members open after Close: embed closes the peer listeners but not
		// the connections they accepted, and both ends live in this test
		// process. This package itself uses no net/http.
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreAnyFunction("net/http.(*conn).serve"),
		goleak.IgnoreAnyFunction("net/http.(*connReader).backgroundRead"),
	)
}

// harness runs the conformance suite on one embedded etcd; each subtest
// gets a key prefix of its own.
type harness struct {
	eps    []string
	admin  *clientv3.Client
	prefix string
}

func (h harness) NewNode(t *testing.T) coord.Coordinator {
	t.Helper()
	c, err := etcdcoord.New(t.Context(), h.eps, etcdcoord.WithPrefix(h.prefix), etcdcoord.WithLeaseTTL(5*time.Second))
	if err != nil {
		t.Fatalf("etcdcoord.New: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// Expire revokes the node's lease from another client: what etcd does
// when the node stops renewing it for a TTL.
func (h harness) Expire(t *testing.T, c coord.Coordinator) {
	t.Helper()
	id := c.(*etcdcoord.Coordinator).Lease()
	if _, err := h.admin.Revoke(t.Context(), clientv3.LeaseID(id)); err != nil {
		t.Fatalf("revoking lease %x: %v", id, err)
	}
}

func adminClient(t *testing.T, eps []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("admin client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func TestConformance(t *testing.T) {
	ec := startEtcd(t, 1)
	admin := adminClient(t, ec.endpoints())
	var n atomic.Int64
	coordtest.Run(t, func(t *testing.T) coordtest.Harness {
		return harness{eps: ec.endpoints(), admin: admin, prefix: fmt.Sprintf("/conformance/%d/", n.Add(1))}
	})
}

func TestNewBadConfig(t *testing.T) {
	ctx := t.Context()
	for _, tc := range []struct {
		name string
		eps  []string
		opts []etcdcoord.Option
	}{
		{"no endpoints", nil, nil},
		{"zero TTL", []string{"127.0.0.1:1"}, []etcdcoord.Option{etcdcoord.WithLeaseTTL(0)}},
		{"empty prefix", []string{"127.0.0.1:1"}, []etcdcoord.Option{etcdcoord.WithPrefix("")}},
		{"half TLS", []string{"127.0.0.1:1"}, []etcdcoord.Option{etcdcoord.WithTLSFiles("c.pem", "", "")}},
		{"missing TLS files", []string{"127.0.0.1:1"}, []etcdcoord.Option{etcdcoord.WithTLSFiles("/nonexistent/c.pem", "/nonexistent/k.pem", "/nonexistent/ca.pem")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if c, err := etcdcoord.New(ctx, tc.eps, tc.opts...); err == nil {
				_ = c.Close()
				t.Fatalf("New succeeded, want an error")
			} else {
				t.Log(err)
			}
		})
	}
}

func TestNewUnreachable(t *testing.T) {
	u := freeURL(t) // nothing listens there
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := etcdcoord.New(ctx, []string{u.String()}, etcdcoord.WithDialTimeout(500*time.Millisecond))
	if err == nil {
		_ = c.Close()
		t.Fatalf("New against %s succeeded, want an error", u.String())
	}
	t.Log(err)
}
