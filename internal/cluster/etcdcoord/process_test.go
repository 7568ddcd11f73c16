package etcdcoord_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/cluster/coord"
	"github.com/sluice-io/sluice/internal/cluster/etcdcoord"
)

// etcdProcess is an etcd server run as a separate process, built from the
// module's go.etcd.io/etcd/server/v3 (a tool dependency in go.mod).
type etcdProcess struct {
	t    *testing.T
	bin  string
	args []string
	log  string
	cmd  *exec.Cmd
}

func buildEtcd(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "etcd")
	cmd := exec.Command("go", "build", "-o", bin, "go.etcd.io/etcd/server/v3")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building etcd from the module: %v\n%s", err, out)
	}
	return bin
}

func (p *etcdProcess) start() {
	p.t.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatalf("etcd log: %v", err)
	}
	defer f.Close()
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("starting %s: %v", p.bin, err)
	}
	p.cmd = cmd
}

// kill9 kills the process with SIGKILL and reaps it.
func (p *etcdProcess) kill9() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
	p.cmd = nil
}

// TestSeparateEtcdProcess runs a node against an etcd process, kills etcd
// with SIGKILL and starts it again: writes fail with ErrUnavailable while it
// is down and succeed, in the same term, once it is back.
func TestSeparateEtcdProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the etcd binary; skipped with -short")
	}
	bin := buildEtcd(t)
	dir := t.TempDir()
	peer, client := freeURL(t), freeURL(t)
	p := &etcdProcess{t: t, bin: bin, log: filepath.Join(dir, "etcd.log"), args: []string{
		"--name", "p0", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client.String(), "--advertise-client-urls", client.String(),
		"--listen-peer-urls", peer.String(), "--initial-advertise-peer-urls", peer.String(),
		"--initial-cluster", "p0=" + peer.String(),
		"--heartbeat-interval", "50", "--election-timeout", "500", "--log-level", "warn",
	}}
	p.start()
	t.Cleanup(p.kill9)
	eps := []string{client.String()}

	var n *etcdcoord.Coordinator
	retry(t, "connecting to the etcd process", func(ctx context.Context) (err error) {
		n, err = etcdcoord.New(ctx, eps, etcdcoord.WithLeaseTTL(30*time.Second),
			etcdcoord.WithRequestTimeout(time.Second), etcdcoord.WithDialTimeout(time.Second))
		return err
	})
	t.Cleanup(func() { _ = n.Close() })
	if err := n.Join(stepCtx(t), coord.Member{ID: "n0", Addr: "127.0.0.1:7000"}); err != nil {
		t.Fatalf("Join: %v", err)
	}
	l, err := n.Campaign(stepCtx(t))
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	publish(t, l, 1)

	p.kill9()
	err = coord.PublishCheckpoint(stepCtx(t), l, coord.CheckpointPointer{ID: 2, Location: "x"})
	if !errors.Is(err, coord.ErrUnavailable) {
		t.Fatalf("write while etcd is down = %v, want ErrUnavailable", err)
	}
	t.Logf("write while etcd is down: %v", err)
	if _, err := n.Members(stepCtx(t)); !errors.Is(err, coord.ErrUnavailable) {
		t.Fatalf("Members while etcd is down = %v, want ErrUnavailable", err)
	}

	p.start()
	attempts := retry(t, "publishing checkpoint 2 after etcd restarted", func(ctx context.Context) error {
		return coord.PublishCheckpoint(ctx, l, coord.CheckpointPointer{ID: 2, Location: "file:///cp/2"})
	})
	t.Logf("checkpoint 2 published on attempt %d after the restart", attempts)
	wantPointer(t, n, 2, l.Term())
	ms, err := n.Members(stepCtx(t))
	if err != nil || len(ms) != 1 || ms[0].ID != "n0" {
		t.Fatalf("Members after the restart = %v, %v; want [n0] (the lease survives a short outage)", ms, err)
	}
}
