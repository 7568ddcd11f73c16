package main

// Three `sluice node` processes in three network namespaces that the test
// creates, linked by veth pairs to a bridge in a fourth namespace, with
// etcd in a fifth; no namespace has a default route, so etcd and the nodes
// reach each other only over the bridge. Needs root (CAP_NET_ADMIN) and
// the ip command; skipped with a message otherwise.

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// netns is the namespaces and links of one test.
type netns struct {
	t      *testing.T
	prefix string
	subnet string // "10.213.N"
	names  []string
}

// ipCmd runs ip with args and fails the test on an error.
func (n *netns) ip(args ...string) {
	n.t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		n.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// newNetns creates the hub namespace with a bridge; it skips the test
// where network namespaces cannot be made.
func newNetns(t *testing.T) *netns {
	t.Helper()
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("network namespace test: no ip command (iproute2)")
	}
	pid := os.Getpid()
	n := &netns{t: t, prefix: fmt.Sprintf("sl%d", pid%1000000), subnet: fmt.Sprintf("10.213.%d", pid%250+1)}
	hub := n.prefix + "hub"
	if out, err := exec.Command("ip", "netns", "add", hub).CombinedOutput(); err != nil {
		t.Skipf("network namespace test: cannot create a network namespace (needs root with CAP_NET_ADMIN): %v: %s", err, strings.TrimSpace(string(out)))
	}
	n.names = append(n.names, hub)
	t.Cleanup(n.cleanup)
	n.ip("-n", hub, "link", "add", "br0", "type", "bridge")
	n.ip("-n", hub, "link", "set", "br0", "up")
	return n
}

// add creates namespace name with address <subnet>.host/24 on a veth
// pair to the hub's bridge, and loopback up. No default route.
func (n *netns) add(name string, host int) (ns, addr string) {
	n.t.Helper()
	ns = n.prefix + name
	n.ip("netns", "add", ns)
	n.names = append(n.names, ns)
	in, out := fmt.Sprintf("%s%di", n.prefix, host), fmt.Sprintf("%s%do", n.prefix, host)
	n.ip("link", "add", in, "type", "veth", "peer", "name", out)
	n.ip("link", "set", in, "netns", ns)
	n.ip("link", "set", out, "netns", n.names[0])
	n.ip("-n", n.names[0], "link", "set", out, "master", "br0")
	n.ip("-n", n.names[0], "link", "set", out, "up")
	addr = fmt.Sprintf("%s.%d", n.subnet, host)
	n.ip("-n", ns, "addr", "add", addr+"/24", "dev", in)
	n.ip("-n", ns, "link", "set", in, "up")
	n.ip("-n", ns, "link", "set", "lo", "up")
	return ns, addr
}

// link sets the namespace's side of host's veth pair up or down (a
// network partition of that namespace).
func (n *netns) link(ns string, host int, up bool) {
	n.t.Helper()
	state := "down"
	if up {
		state = "up"
	}
	n.ip("-n", ns, "link", "set", fmt.Sprintf("%s%di", n.prefix, host), state)
}

func (n *netns) cleanup() {
	for i := len(n.names) - 1; i >= 0; i-- {
		_ = exec.Command("ip", "netns", "del", n.names[i]).Run()
	}
}

// startIn starts args in namespace ns as start does (stderr kept).
func startIn(t *testing.T, ns string, env []string, name string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, name}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, lines: make(chan string, 1024), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer close(p.lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.all.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			<-p.done
			_ = p.cmd.Wait()
		}
	})
	return p
}

// TestNodeNetworkNamespaces runs a bounded datagen → file job on three
// nodes, each in its own network namespace, against an etcd in another;
// all linked only through a bridge, no default route. The leader's link is
// cut (a partition, not a crash): another node leads after the lease and
// finishes the job from the published checkpoint, while the partitioned
// leader, which still runs, loses its session and stops its job; its link
// restored, it rejoins, finds the job finished and exits 0. The committed
// files hold every record once: the partitioned leader wrote on into the
// shared directory until it noticed, and none of that is committed.
func TestNodeNetworkNamespaces(t *testing.T) {
	if testing.Short() {
		t.Skip("builds etcd and creates network namespaces; skipped with -short")
	}
	n := newNetns(t)
	etcdNS, etcdIP := n.add("etcd", 1)
	nodeNS := map[string]string{}
	nodeHost := map[string]int{}
	for i, id := range []string{"n1", "n2", "n3"} {
		ns, _ := n.add(id, 11+i)
		nodeNS[id], nodeHost[id] = ns, 11+i
	}
	// No namespace has a default route.
	for _, ns := range append([]string{etcdNS}, nodeNS["n1"]) {
		out, err := exec.Command("ip", "-n", ns, "route", "show", "default").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "" {
			t.Fatalf("namespace %s has a default route (%q, %v)", ns, out, err)
		}
	}

	dir := t.TempDir()
	bin := filepath.Join(dir, "etcd")
	if out, err := exec.Command("go", "build", "-o", bin, "go.etcd.io/etcd/server/v3").CombinedOutput(); err != nil {
		t.Fatalf("building etcd from the module: %v\n%s", err, out)
	}
	client, peer := "http://"+etcdIP+":2379", "http://"+etcdIP+":2380"
	etcd := startIn(t, etcdNS, nil, bin, "--name", "e0", "--data-dir", filepath.Join(dir, "e0"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "e0="+peer)
	defer func() {
		_ = etcd.cmd.Process.Kill()
		etcd.wait(t)
	}()
	const count = 40000 // 10s at the pipeline's 4000 records/s: the cut comes well before the end
	out := filepath.Join(dir, "out")
	file := writePipeline(t, t.TempDir(), nodeFilePipeline)
	env := []string{"CK=" + filepath.Join(dir, "ck"), "OUT=" + out, fmt.Sprint("COUNT=", count)}
	procs := map[string]*proc{}
	for _, id := range []string{"n1", "n2", "n3"} {
		procs[id] = startIn(t, nodeNS[id], env, binary, "node", "--cluster-etcd", etcdIP+":2379", "--node-id", id, "--lease-ttl", "3s", file)
	}
	leader := ""
	for i := 0; leader == ""; i++ {
		for id, p := range procs {
			if strings.Contains(p.stderr(), `msg="elected leader"`) {
				leader = id
			}
		}
		if i == 600 {
			t.Fatalf("no leader within 60s:\n%s", nodeLogs(procs))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// etcd (up: a node was elected) is not reachable from the test's
	// own namespace, only over the bridge. The test's namespace may have a
	// default route to a gateway that answers any TCP connection itself
	// (an egress proxy of the sandbox), so an answer counts only if it is
	// etcd's own health report.
	noProxy := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}}
	if resp, err := noProxy.Get(client + "/health"); err == nil {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		if strings.Contains(string(body), `"health"`) {
			t.Fatalf("etcd at %s is reachable from the test's namespace (%s); want it reachable only inside", client, body)
		}
		t.Logf("a connection to %s from the test's namespace was answered by something other than etcd (status %s, server %q): not etcd", client, resp.Status, resp.Header.Get("Server"))
	}
	for i := 0; len(readOutput(t, out, "id")) < count/8; i++ {
		if i == 1200 {
			t.Fatalf("less than %d records committed within 2 minutes:\n%s", count/8, nodeLogs(procs))
		}
		time.Sleep(100 * time.Millisecond)
	}
	n.link(nodeNS[leader], nodeHost[leader], false)
	t.Logf("cut the link of leader %s", leader)
	lp := procs[leader]
	for i := 0; !strings.Contains(lp.stderr(), "lost leadership"); i++ {
		if i == 600 {
			t.Fatalf("the partitioned leader did not notice within 60s:\n%s", lp.stderr())
		}
		time.Sleep(100 * time.Millisecond)
	}
	next := ""
	for i := 0; next == ""; i++ {
		for id, p := range procs {
			if id != leader && strings.Contains(p.stderr(), `msg="elected leader"`) {
				next = id
			}
		}
		if i == 600 {
			t.Fatalf("no new leader within 60s of the partition:\n%s", nodeLogs(procs))
		}
		time.Sleep(100 * time.Millisecond)
	}
	n.link(nodeNS[leader], nodeHost[leader], true)
	t.Logf("%s leads; restored the link of %s", next, leader)
	for id, p := range procs {
		if code := nodeWaitExit(t, id, p); code != 0 {
			t.Fatalf("node %s: exit %d:\n%s", id, code, nodeLogs(procs))
		}
	}
	if !strings.Contains(procs[next].stderr(), "restoring from the published checkpoint") {
		t.Errorf("the new leader %s did not restore from the published checkpoint:\n%s", next, procs[next].stderr())
	}
	nodeCheckFiles(t, out, count)
}

func nodeLogs(procs map[string]*proc) string {
	var b strings.Builder
	for id, p := range procs {
		fmt.Fprintf(&b, "--- node %s ---\n%s", id, p.stderr())
	}
	return b.String()
}
