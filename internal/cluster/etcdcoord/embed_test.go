package etcdcoord_test

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/sluice-io/sluice/internal/testutil/freeport"
)

// etcdMember is one embedded etcd server that a test can stop and start
// again on the same data directory and ports.
type etcdMember struct {
	name      string
	dir       string
	peerURL   url.URL
	clientURL url.URL
	e         *embed.Etcd
}

// etcdCluster is a cluster of embedded etcd servers on 127.0.0.1.
type etcdCluster struct {
	t       testing.TB
	members []*etcdMember
	initial string
	// tls, when set, serves the client URLs (https) with it.
	tls *transport.TLSInfo
}

func freeURL(t testing.TB) url.URL {
	t.Helper()
	return url.URL{Scheme: "http", Host: freeport.Addr(t)}
}

// startEtcd starts an n-member embedded etcd cluster and stops it at the
// test's cleanup. Ticks are short (50ms heartbeat, 500ms election), so the
// smallest lease TTL etcd grants is 1s.
func startEtcd(t testing.TB, n int) *etcdCluster { return startEtcdTLS(t, n, nil) }

// startEtcdTLS is startEtcd with client URLs served over TLS when tls is
// not nil.
//
// The ports come from freeURL, which must let them go before etcd binds
// them; when another process took one meanwhile (several test binaries
// run at once), the whole cluster is started again on new ports.
func startEtcdTLS(t testing.TB, n int, tls *transport.TLSInfo) *etcdCluster {
	t.Helper()
	const attempts = 5
	for a := 1; ; a++ {
		c, err := tryStartEtcd(t, n, tls)
		if err == nil {
			return c
		}
		if !errors.Is(err, syscall.EADDRINUSE) || a == attempts {
			t.Fatalf("starting a %d-member etcd cluster (attempt %d): %v", n, a, err)
		}
		t.Logf("starting a %d-member etcd cluster (attempt %d): %v; again on other ports", n, a, err)
	}
}

// newEtcdCluster describes an n-member cluster on new ports and a new data
// directory; nothing runs yet.
func newEtcdCluster(t testing.TB, n int, tls *transport.TLSInfo) *etcdCluster {
	t.Helper()
	c := &etcdCluster{t: t, tls: tls}
	dir := t.TempDir()
	var initial []string
	for i := range n {
		m := &etcdMember{
			name:      fmt.Sprintf("m%d", i),
			dir:       filepath.Join(dir, fmt.Sprintf("m%d", i)),
			peerURL:   freeURL(t),
			clientURL: freeURL(t),
		}
		if tls != nil {
			m.clientURL.Scheme = "https"
		}
		c.members = append(c.members, m)
		initial = append(initial, m.name+"="+m.peerURL.String())
	}
	c.initial = strings.Join(initial, ",")
	return c
}

func tryStartEtcd(t testing.TB, n int, tls *transport.TLSInfo) (*etcdCluster, error) {
	t.Helper()
	c := newEtcdCluster(t, n, tls)
	for i := range c.members {
		if err := c.tryLaunch(i); err != nil {
			for j := range i {
				c.stop(j)
			}
			return nil, err
		}
	}
	t.Cleanup(func() {
		for i := range c.members {
			c.stop(i)
		}
	})
	for i := range c.members {
		c.awaitReady(i)
	}
	return c, nil
}

func (c *etcdCluster) launch(i int) {
	c.t.Helper()
	if err := c.tryLaunch(i); err != nil {
		c.t.Fatalf("%v", err)
	}
}

func (c *etcdCluster) tryLaunch(i int) error {
	m := c.members[i]
	cfg := embed.NewConfig()
	cfg.Name = m.name
	cfg.Dir = m.dir
	cfg.ListenPeerUrls = []url.URL{m.peerURL}
	cfg.AdvertisePeerUrls = []url.URL{m.peerURL}
	cfg.ListenClientUrls = []url.URL{m.clientURL}
	cfg.AdvertiseClientUrls = []url.URL{m.clientURL}
	cfg.InitialCluster = c.initial
	cfg.InitialClusterToken = "sluice-etcdcoord-test"
	cfg.TickMs = 50
	cfg.ElectionMs = 500
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{filepath.Join(filepath.Dir(m.dir), m.name+".log")}
	if c.tls != nil {
		cfg.ClientTLSInfo = *c.tls
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("starting etcd member %s: %w", m.name, err)
	}
	m.e = e
	return nil
}

func (c *etcdCluster) awaitReady(i int) {
	c.t.Helper()
	m := c.members[i]
	select {
	case <-m.e.Server.ReadyNotify():
	case err := <-m.e.Err():
		c.t.Fatalf("etcd member %s: %v", m.name, err)
	case <-time.After(60 * time.Second):
		c.t.Fatalf("etcd member %s not ready within 60s", m.name)
	}
}

// stop stops member i (a no-op when it is stopped).
func (c *etcdCluster) stop(i int) {
	if m := c.members[i]; m.e != nil {
		closeEtcd(m.e)
		m.e = nil
	}
}

// closeEtcd closes an embedded etcd server, also one that never became
// ready. embed.Etcd.Close (v3.7.3) first waits for the client servers,
// which are created only once the server is ready or stopping, and stops
// the server only after that: a member that never got its quorum (its
// peers failed to start) would hang Close, and with it the test binary,
// until go test's timeout. Stopping the server first ends that wait (the
// upstream issue is etcd-io/etcd#9533).
func closeEtcd(e *embed.Etcd) {
	select {
	case <-e.Server.ReadyNotify():
	default:
		e.Server.HardStop()
	}
	e.Close()
}

// restart starts a stopped member i again on its data and ports; it does
// not wait for it to be ready (that needs a quorum).
func (c *etcdCluster) restart(i int) { c.launch(i) }

func (c *etcdCluster) endpoints() []string {
	var eps []string
	for _, m := range c.members {
		eps = append(eps, m.clientURL.String())
	}
	return eps
}

// raftLeader returns the index of the member that is etcd's raft leader, or
// -1 when none of the running members knows one.
func (c *etcdCluster) raftLeader() int {
	for i, m := range c.members {
		if m.e != nil && m.e.Server.Leader() == m.e.Server.MemberID() {
			return i
		}
	}
	return -1
}

// TestStopMemberWithoutQuorum: the harness stops a member whose peers never
// started (so it never became ready) without hanging, as it must when a
// test fails while starting a cluster. Plain embed.Etcd.Close hangs here.
func TestStopMemberWithoutQuorum(t *testing.T) {
	c := newEtcdCluster(t, 3, nil)
	c.launch(0)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		c.stop(0)
	}()
	select {
	case <-stopped:
	case <-time.After(step):
		t.Fatalf("stopping a member that never had a quorum did not return within %v", step)
	}
}
