package main

// sluice node through the binary, against real etcd processes built from
// the module's go.etcd.io/etcd/server/v3:
//   - three node processes of one Kafka → Kafka exactly-once pipeline
//     against a 3-member etcd and the real broker of scripts/kafka.sh
//     (skipped without SLUICE_KAFKA_BROKERS): the leader is killed with
//     SIGKILL twice, an etcd member once, and the leader is stopped with
//     SIGSTOP past its lease, then continued; an independent read_committed
//     reader finds every input record exactly once;
//   - a bounded datagen → file job on three nodes whose leader is killed:
//     the new leader finishes it, every node exits 0, every record once;
//   - the same job while two of three etcd members are down (no quorum)
//     for a few seconds, shorter than the lease: checkpoints wait, the
//     leader keeps its term, and the job finishes exactly once.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testutil/freeport"
)

const nodePipeline = `name: node-e2e
parallelism: 2
delivery: exactly-once
checkpoint:
  interval: 200ms
  dir: ${CK}
restart:
  strategy: fixed-delay
  attempts: 20
  delay: 200ms
source:
  type: kafka
  options:
    brokers: ${BROKERS}
    topics: ${IN}
sink:
  type: kafka
  options:
    brokers: ${BROKERS}
    topic: ${OUT}
`

// nodeEtcd is a cluster of etcd processes built from the module, on
// loopback.
type nodeEtcd struct {
	t     *testing.T
	dir   string
	bin   string
	args  [][]string
	cmds  []*exec.Cmd
	eps   []string // client URLs, http://127.0.0.1:port
	names []string
}

// nodeStartEtcd builds etcd from the module, starts an n-member cluster
// on loopback and returns it once every member reports healthy.
func nodeStartEtcd(t *testing.T, n int) *nodeEtcd {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "etcd")
	if out, err := exec.Command("go", "build", "-o", bin, "go.etcd.io/etcd/server/v3").CombinedOutput(); err != nil {
		t.Fatalf("building etcd from the module: %v\n%s", err, out)
	}
	e := &nodeEtcd{t: t}
	var peers, initial []string
	for i := range n {
		e.names = append(e.names, fmt.Sprintf("e%d", i))
		e.eps = append(e.eps, fmt.Sprintf("http://127.0.0.1:%d", freeport.Pick(t)))
		peers = append(peers, fmt.Sprintf("http://127.0.0.1:%d", freeport.Pick(t)))
		initial = append(initial, e.names[i]+"="+peers[i])
	}
	e.dir, e.bin, e.cmds = dir, bin, make([]*exec.Cmd, n)
	for i := range n {
		e.args = append(e.args, []string{"--name", e.names[i], "--data-dir", filepath.Join(dir, e.names[i]),
			"--listen-client-urls", e.eps[i], "--advertise-client-urls", e.eps[i],
			"--listen-peer-urls", peers[i], "--initial-advertise-peer-urls", peers[i],
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new"})
		e.start(i)
	}
	t.Cleanup(func() {
		for i := range e.cmds {
			e.kill9(i)
		}
	})
	for i := range n {
		e.awaitHealthy(i)
	}
	return e
}

// start starts member i (again, on its data dir).
func (e *nodeEtcd) start(i int) {
	e.t.Helper()
	logf, err := os.OpenFile(filepath.Join(e.dir, e.names[i]+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		e.t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(e.bin, e.args[i]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.cmds[i] = cmd
}

// awaitHealthy waits (bounded: 30s) until member i reports healthy, which
// needs a quorum.
func (e *nodeEtcd) awaitHealthy(i int) {
	e.t.Helper()
	hc := &http.Client{Timeout: time.Second}
	for range 300 {
		if resp, err := hc.Get(e.eps[i] + "/health"); err == nil {
			ok := resp.StatusCode == http.StatusOK
			resp.Body.Close()
			if ok {
				return
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	b, _ := os.ReadFile(filepath.Join(e.dir, e.names[i]+".log"))
	e.t.Fatalf("etcd member %s not healthy within 30s:\n%s", e.names[i], b)
}

// endpoints is the --cluster-etcd value.
func (e *nodeEtcd) endpoints() string {
	hosts := make([]string, len(e.eps))
	for i, ep := range e.eps {
		hosts[i] = strings.TrimPrefix(ep, "http://")
	}
	return strings.Join(hosts, ",")
}

// kill9 kills member i with SIGKILL and reaps it.
func (e *nodeEtcd) kill9(i int) {
	if c := e.cmds[i]; c != nil && c.ProcessState == nil {
		_ = c.Process.Kill()
		_ = c.Wait()
	}
	e.cmds[i] = nil
}

// nodeCluster is the node processes of a test, by node id.
type nodeCluster struct {
	t    *testing.T
	env  []string
	file string
	etcd string
	// etcdTLS is the test's client of an etcd whose client URLs are https
	// (nil: http).
	etcdTLS *http.Client
	ttl     string   // --lease-ttl; default 2s
	extra   []string // more flags of every node
	// addrs are the nodes' --node-addr (placement across nodes); a node
	// without one runs its job alone when it leads.
	addrs map[string]string
	procs map[string]*proc
	all   []*proc       // every node process started, killed ones too
	seen  map[*proc]int // "elected leader" lines already accounted for
}

func (c *nodeCluster) start(id string) {
	c.t.Helper()
	ttl := c.ttl
	if ttl == "" {
		ttl = "2s"
	}
	args := append([]string{"node", "--cluster-etcd", c.etcd, "--node-id", id, "--lease-ttl", ttl}, c.extra...)
	if a := c.addrs[id]; a != "" {
		args = append(args, "--node-addr", a)
	}
	c.procs[id] = start(c.t, c.env, append(args, c.file)...)
	c.all = append(c.all, c.procs[id])
}

// electedCount is how many times p logged that it won an election.
func electedCount(p *proc) int { return strings.Count(p.stderr(), `msg="elected leader"`) }

// etcdLeader returns the node id etcd holds as the leader: the value of
// the election key with the lowest create revision (etcd's JSON gateway,
// on the first member that answers), or "" when there is none.
func (c *nodeCluster) etcdLeader(job string) string {
	prefix := "/sluice/" + job + "/election/"
	end := prefix[:len(prefix)-1] + "0"
	body := fmt.Sprintf(`{"key":%q,"range_end":%q,"sort_order":"ASCEND","sort_target":"CREATE","limit":1}`,
		base64.StdEncoding.EncodeToString([]byte(prefix)), base64.StdEncoding.EncodeToString([]byte(end)))
	hc, scheme := &http.Client{Timeout: time.Second}, "http://"
	if c.etcdTLS != nil {
		hc, scheme = c.etcdTLS, "https://"
	}
	for ep := range strings.SplitSeq(c.etcd, ",") {
		resp, err := hc.Post(scheme+ep+"/v3/kv/range", "application/json", strings.NewReader(body))
		if err != nil {
			continue
		}
		var r struct {
			Kvs []struct {
				Value []byte `json:"value"`
			} `json:"kvs"`
		}
		err = json.NewDecoder(resp.Body).Decode(&r)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			continue
		}
		if len(r.Kvs) == 0 {
			return ""
		}
		return string(r.Kvs[0].Value)
	}
	return ""
}

// awaitLeader returns the node that etcd holds as the leader once it is
// not `not` and that node logged a won election not seen before (bounded:
// 60s). Asking etcd, not the logs alone, keeps a term that came and went
// unnoticed from being taken for the current one.
func (c *nodeCluster) awaitLeader(job, not string) string {
	c.t.Helper()
	for range 600 {
		alive := 0
		for _, p := range c.procs {
			select {
			case <-p.done:
			default:
				alive++
			}
		}
		if alive == 0 {
			c.t.Fatalf("every node exited without a new leader:\n%s", c.logs())
		}
		if id := c.etcdLeader(job); id != "" && id != not {
			if p := c.procs[id]; p != nil {
				if n := electedCount(p); n > c.seen[p] {
					c.seen[p] = n
					return id
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.t.Fatalf("no new leader within 60s:\n%s", c.logs())
	return ""
}

func (c *nodeCluster) logs() string {
	var b strings.Builder
	for id, p := range c.procs {
		fmt.Fprintf(&b, "--- node %s ---\n%s", id, p.stderr())
	}
	return b.String()
}

// nodeOutput is a read_committed consumer of the output topic that counts
// what it has read.
type nodeOutput struct {
	t     *testing.T
	cl    *kgo.Client
	topic string
	n     int
}

// await reads until at least n records were read (bounded: 3 minutes).
func (o *nodeOutput) await(n int, c *nodeCluster) {
	o.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for o.n < n && time.Now().Before(deadline) {
		o.n += len(pollTopic(o.t, o.cl, o.topic, 1))
	}
	if o.n < n {
		o.t.Fatalf("output holds %d records, want at least %d:\n%s", o.n, n, c.logs())
	}
}

// TestNodeKafkaFailover runs three `sluice node` processes of a Kafka →
// Kafka exactly-once pipeline. Input is produced in steps; between them the
// leader is killed with SIGKILL (twice; the killed nodes are started again
// with the same ids) and then stopped with SIGSTOP past its 2s lease until
// another node leads and commits, and continued: it must log that it lost
// leadership. After the first failover one of the three etcd members is
// killed with SIGKILL. At the end an independent read_committed reader
// finds every input record exactly once.
func TestNodeKafkaFailover(t *testing.T) {
	brokers := kafkaBrokers(t)
	if testing.Short() {
		t.Skip("builds etcd and runs three nodes; skipped with -short")
	}
	etcd := nodeStartEtcd(t, 3)
	in, out := kafkaTopic(t, brokers, nil), kafkaTopic(t, brokers, nil)
	file := writePipeline(t, t.TempDir(), nodePipeline)
	c := &nodeCluster{t: t, file: file, etcd: etcd.endpoints(), procs: map[string]*proc{}, seen: map[*proc]int{},
		env: []string{"CK=" + filepath.Join(t.TempDir(), "ck"), "BROKERS=" + brokers, "IN=" + in, "OUT=" + out}}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.ConsumeTopics(out),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	o := &nodeOutput{t: t, cl: cl, topic: out}

	const step = 4000
	produceIDs(t, brokers, in, 0, step, nil)
	for _, id := range []string{"n1", "n2", "n3"} {
		c.start(id)
	}
	leader := c.awaitLeader("node-e2e", "")
	o.await(step/2, c)
	// Two kill -9 of the leader, each while input is flowing; the killed
	// node comes back with its id (it waits out its old session).
	for k := 1; k <= 2; k++ {
		produceIDs(t, brokers, in, k*step, (k+1)*step, nil)
		killed := c.procs[leader]
		if err := killed.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		killed.wait(t)
		t.Logf("kill -9 of leader %s (%d records read so far)", leader, o.n)
		c.start(leader)
		leader = c.awaitLeader("node-e2e", leader)
		o.await(k*step+step/2, c)
		if k == 1 {
			// One etcd member of three killed: the others keep quorum
			// and the nodes' clients move to them.
			etcd.kill9(0)
			t.Log("kill -9 of etcd member e0")
		}
	}
	// SIGSTOP of the leader past its lease: another node leads and
	// commits; the stopped one, continued, is fenced and stops its job.
	produceIDs(t, brokers, in, 3*step, 4*step, nil)
	stopped := c.procs[leader]
	if err := stopped.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGSTOP of leader %s (%d records read so far)", leader, o.n)
	next := c.awaitLeader("node-e2e", leader)
	if next == leader {
		t.Fatalf("the stopped leader %s was elected again", leader)
	}
	produceIDs(t, brokers, in, 4*step, 5*step, nil)
	o.await(4*step, c)
	if err := stopped.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	for i := 0; !strings.Contains(stopped.stderr(), "lost leadership"); i++ {
		if i == 300 {
			t.Fatalf("the continued leader %s did not notice it lost leadership within 30s:\n%s", leader, stopped.stderr())
		}
		time.Sleep(100 * time.Millisecond)
	}
	const total = 5 * step
	o.await(total, c)
	for id, p := range c.procs {
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := p.wait(t); code != 0 {
			t.Errorf("node %s: exit %d after SIGTERM:\n%s", id, code, p.stderr())
		}
	}
	// Every leader after the first restored from the published pointer.
	restored := 0
	for _, p := range c.all {
		restored += strings.Count(p.stderr(), "restoring from the published checkpoint")
	}
	if restored < 3 {
		t.Errorf("%d terms restored from the published checkpoint, want at least 3 (one per failover)", restored)
	}
	recs := readTopic(t, brokers, out, -1)
	if len(recs) < total {
		recs = readTopic(t, brokers, out, total)
	}
	checkIDsOnce(t, recs, total)
	if t.Failed() {
		t.Log(c.logs())
	}
}

const nodeFilePipeline = `name: node-file
parallelism: 2
checkpoint:
  interval: 200ms
  dir: ${CK}
restart:
  strategy: fixed-delay
  attempts: 20
  delay: 200ms
source:
  type: datagen
  options:
    count: ${COUNT}
    splits: 4
    rate: 4000
sink:
  type: file
  options:
    path: ${OUT}
`

// nodeWaitExit waits (bounded: 3 minutes) for p to exit and returns its
// exit code.
func nodeWaitExit(t *testing.T, id string, p *proc) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("node %s did not exit within 3 minutes:\n%s", id, p.stderr())
	}
	return p.wait(t)
}

// TestNodeBoundedJobFinishes runs a bounded datagen → file job on three
// nodes and kills the leader with SIGKILL once output is committed: a
// standby takes over from the published checkpoint and finishes the job,
// marks it finished, and both remaining nodes exit 0 (the one that never
// led does not run it again). The committed files hold every record once.
// The leader serves its job's /metrics (--http).
func TestNodeBoundedJobFinishes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds etcd and runs three nodes; skipped with -short")
	}
	etcd := nodeStartEtcd(t, 1)
	const count = 12000
	out := filepath.Join(t.TempDir(), "out")
	file := writePipeline(t, t.TempDir(), nodeFilePipeline)
	c := &nodeCluster{t: t, file: file, etcd: etcd.endpoints(), procs: map[string]*proc{}, seen: map[*proc]int{},
		extra: []string{"--http", "127.0.0.1:0"},
		env:   []string{"CK=" + filepath.Join(t.TempDir(), "ck"), "OUT=" + out, fmt.Sprint("COUNT=", count)}}
	for _, id := range []string{"n1", "n2", "n3"} {
		c.start(id)
	}
	leader := c.awaitLeader("node-file", "")
	// The leader serves its job's metrics while it leads.
	// (Every node serves its endpoint from its start; the leader adds its
	// job's metrics once the job is built.)
	metricsURL := c.procs[leader].waitLine(t, httpRE)
	for i := 0; ; i++ {
		m := getURL(t, metricsURL+"/metrics", "")
		if strings.Contains(m, "node-file") {
			break
		}
		if i == 600 {
			t.Fatalf("the leader's /metrics does not name the job within 60s:\n%.2000s", m)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := 0; len(readOutput(t, out, "id")) < count/4; i++ {
		if i == 1200 {
			t.Fatalf("less than %d records committed within 2 minutes:\n%s", count/4, c.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	killed := c.procs[leader]
	if err := killed.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed.wait(t)
	delete(c.procs, leader)
	for id, p := range c.procs {
		if code := nodeWaitExit(t, id, p); code != 0 {
			t.Fatalf("node %s: exit %d:\n%s", id, code, c.logs())
		}
	}
	finished := 0
	for _, p := range c.procs {
		if strings.Contains(p.stderr(), `msg="job finished"`) {
			finished++
		}
	}
	if finished != 1 {
		t.Errorf("%d nodes finished the job, want 1:\n%s", finished, c.logs())
	}
	nodeCheckFiles(t, out, count)
}

// nodeCheckFiles asserts that the committed files under out hold
// {"id": i} for every i in [0, count) exactly once.
func nodeCheckFiles(t *testing.T, out string, count int) {
	t.Helper()
	got := readOutput(t, out, "id")
	missing, dup := 0, 0
	for i := range int64(count) {
		switch got[i] {
		case 0:
			missing++
		case 1:
		default:
			dup++
		}
	}
	if missing > 0 || dup > 0 || len(got) != count {
		t.Fatalf("output: %d of %d ids missing, %d duplicated, %d distinct", missing, count, dup, len(got))
	}
}

// TestNodeEtcdQuorumLost runs the bounded datagen → file job on two nodes
// (10s leases) against a 3-member etcd and kills two members with SIGKILL
// once output is committed: without quorum the leader's checkpoint waits
// for its pointer (it logs so), the members are started again, the pointer
// is published, the same leader finishes the job, and the output holds
// every record once.
func TestNodeEtcdQuorumLost(t *testing.T) {
	if testing.Short() {
		t.Skip("builds etcd and runs two nodes; skipped with -short")
	}
	etcd := nodeStartEtcd(t, 3)
	const count = 16000
	out := filepath.Join(t.TempDir(), "out")
	file := writePipeline(t, t.TempDir(), nodeFilePipeline)
	c := &nodeCluster{t: t, file: file, etcd: etcd.endpoints(), procs: map[string]*proc{}, seen: map[*proc]int{}, ttl: "10s",
		env: []string{"CK=" + filepath.Join(t.TempDir(), "ck"), "OUT=" + out, fmt.Sprint("COUNT=", count)}}
	for _, id := range []string{"n1", "n2"} {
		c.start(id)
	}
	leader := c.awaitLeader("node-file", "")
	for i := 0; len(readOutput(t, out, "id")) < count/8; i++ {
		if i == 1200 {
			t.Fatalf("less than %d records committed within 2 minutes:\n%s", count/8, c.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	etcd.kill9(1)
	etcd.kill9(2)
	lp := c.procs[leader]
	for i := 0; !strings.Contains(lp.stderr(), "coordination store unavailable"); i++ {
		if i == 300 {
			t.Fatalf("the leader did not report etcd unavailable within 30s:\n%s", c.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	etcd.start(1)
	etcd.start(2)
	for id, p := range c.procs {
		if code := nodeWaitExit(t, id, p); code != 0 {
			t.Fatalf("node %s: exit %d:\n%s", id, code, c.logs())
		}
	}
	if !strings.Contains(lp.stderr(), "coordination store reachable again") {
		t.Errorf("the leader did not report etcd reachable again:\n%s", lp.stderr())
	}
	if n := electedCount(lp); n != 1 || !strings.Contains(lp.stderr(), `msg="job finished"`) {
		t.Errorf("leader %s was elected %d times; want it to keep its term and finish the job:\n%s", leader, n, c.logs())
	}
	nodeCheckFiles(t, out, count)
}

// TestNodeUsageErrors: node refuses bad command lines and a pipeline
// without checkpoint.dir with exit code 2 and a message naming the fault,
// before it contacts etcd.
func TestNodeUsageErrors(t *testing.T) {
	dir := t.TempDir()
	withDir := writePipeline(t, dir, "name: u\ncheckpoint:\n  dir: "+filepath.Join(dir, "ck")+"\nsource:\n  type: datagen\nsink:\n  type: print\n")
	noDir := writePipeline(t, t.TempDir(), "name: u\nsource:\n  type: datagen\nsink:\n  type: print\n")
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"node", withDir}, "--cluster-etcd is required"},
		{[]string{"node", "--cluster-etcd", "127.0.0.1:1", noDir}, "checkpoint.dir is required"},
		{[]string{"node", "--cluster-etcd", "127.0.0.1:1", "--node-id", "a/b", withDir}, "--node-id"},
		{[]string{"node", "--cluster-etcd", "127.0.0.1:1", "--node-id", "n1", "--lease-ttl", "0s", withDir}, "--lease-ttl"},
		{[]string{"node", "--cluster-etcd", "127.0.0.1:1", "--node-id", "n1", "--node-listen", ":7070", withDir}, "--node-listen needs --node-addr"},
		{[]string{"node", "--cluster-etcd", "127.0.0.1:1", "--node-id", "n1", "--link-wait", "-1s", withDir}, "--link-wait"},
		{[]string{"node", "--cluster-etcd", "127.0.0.1:1", "--node-id", "n1", "--lost-node-wait", "-1s", withDir}, "--lost-node-wait"},
		{[]string{"node", "--cluster-etcd", "127.0.0.1:1", "--node-id", "n1", "--expect-nodes", "0", withDir}, "--expect-nodes"},
	}
	for _, tt := range tests {
		r := run(t, nil, tt.args...)
		if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("sluice %v: exit %d, stderr %q; want exit 2 naming %q", tt.args, r.code, r.stderr, tt.want)
		}
	}
}
