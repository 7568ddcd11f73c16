package etcdcoord_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

// TestSeparateEtcdProcesses runs nodes against a cluster of three etcd
// processes and kills them with SIGKILL: the raft leader's death leaves the
// leader node's term intact; with two of three dead, writes fail with
// ErrUnavailable; once they are restarted the same term writes again.
func TestSeparateEtcdProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the etcd binary; skipped with -short")
	}
	bin := buildEtcd(t)
	dir := t.TempDir()
	var peers, clients []url.URL
	var initial []string
	for i := range 3 {
		peers, clients = append(peers, freeURL(t)), append(clients, freeURL(t))
		initial = append(initial, fmt.Sprintf("p%d=%s", i, peers[i].String()))
	}
	var procs []*etcdProcess
	var eps []string
	for i := range 3 {
		name := fmt.Sprintf("p%d", i)
		p := &etcdProcess{t: t, bin: bin, log: filepath.Join(dir, name+".log"), args: []string{
			"--name", name, "--data-dir", filepath.Join(dir, name),
			"--listen-client-urls", clients[i].String(), "--advertise-client-urls", clients[i].String(),
			"--listen-peer-urls", peers[i].String(), "--initial-advertise-peer-urls", peers[i].String(),
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-token", "sluice-etcdcoord-process-test",
			"--heartbeat-interval", "50", "--election-timeout", "500", "--log-level", "warn",
		}}
		p.start()
		t.Cleanup(p.kill9)
		procs = append(procs, p)
		eps = append(eps, clients[i].String())
	}

	var n *etcdcoord.Coordinator
	retry(t, "connecting to the etcd processes", func(ctx context.Context) (err error) {
		n, err = etcdcoord.New(ctx, eps, etcdcoord.WithLeaseTTL(30*time.Second),
			etcdcoord.WithRequestTimeout(time.Second), etcdcoord.WithDialTimeout(time.Second))
		return err
	})
	t.Cleanup(func() { _ = n.Close() })
	if err := n.Join(stepCtx(t), coord.Member{ID: "n0", Addr: "127.0.0.1:7000"}); err != nil {
		t.Fatalf("Join: %v", err)
	}
	l, err := campaign(stepCtx(t), n)
	if err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	publish(t, l, 1)

	// kill -9 etcd's raft leader: the others elect a new one and the
	// node's leadership, in the same term, goes on writing.
	admin := adminClient(t, eps)
	k := -1
	retry(t, "finding etcd's raft leader", func(ctx context.Context) error {
		for i, ep := range eps {
			st, err := admin.Status(ctx, ep)
			if err == nil && st.Leader == st.Header.MemberId {
				k = i
				return nil
			}
		}
		return errors.New("no member reports itself raft leader")
	})
	t.Logf("kill -9 etcd p%d (raft leader)", k)
	procs[k].kill9()
	publish(t, l, 2)
	wantPointer(t, n, 2, l.Term())

	// kill -9 a second one: no quorum.
	k2 := (k + 1) % 3
	t.Logf("kill -9 etcd p%d: 1 of 3 left, no quorum", k2)
	procs[k2].kill9()
	err = coord.PublishCheckpoint(stepCtx(t), l, coord.CheckpointPointer{ID: 3, Location: "x"})
	if !errors.Is(err, coord.ErrUnavailable) {
		t.Fatalf("write without quorum = %v, want ErrUnavailable", err)
	}
	t.Logf("write without quorum: %v", err)
	if _, err := n.Members(stepCtx(t)); !errors.Is(err, coord.ErrUnavailable) {
		t.Fatalf("Members without quorum = %v, want ErrUnavailable", err)
	}

	procs[k].start()
	procs[k2].start()
	attempts := retry(t, "publishing checkpoint 3 after etcd restarted", func(ctx context.Context) error {
		return coord.PublishCheckpoint(ctx, l, coord.CheckpointPointer{ID: 3, Location: "file:///cp/3"})
	})
	t.Logf("checkpoint 3 published on attempt %d after the restart", attempts)
	wantPointer(t, n, 3, l.Term())
	ms, err := n.Members(stepCtx(t))
	if err != nil || len(ms) != 1 || ms[0].ID != "n0" {
		t.Fatalf("Members after the restart = %v, %v; want [n0] (the lease survives a short outage)", ms, err)
	}
}
