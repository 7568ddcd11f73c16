package main

// Node operations through the binary: the HTTP endpoint of every node
// (standbys included), the node TLS flags, and rescaling a cluster
// through a savepoint.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/promparse"
	"github.com/sluice-io/sluice/internal/testutil/freeport"
	"github.com/twmb/franz-go/pkg/kgo"
)

// nodeStatus is what GET /status of a node says.
type nodeStatus struct {
	Node          string          `json:"node"`
	Role          string          `json:"role"`
	Leader        string          `json:"leader"`
	Term          int64           `json:"term"`
	ElectionsWon  int64           `json:"elections_won"`
	LeaderChanges int64           `json:"leader_changes"`
	Job           json.RawMessage `json:"job"`
}

func getStatus(t *testing.T, base string) nodeStatus {
	t.Helper()
	var st nodeStatus
	if err := json.Unmarshal([]byte(getURL(t, base+"/status", "")), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// awaitNodeStatus polls base/status until ok holds (bounded: 60s).
func awaitNodeStatus(t *testing.T, base, what string, ok func(nodeStatus) bool) nodeStatus {
	t.Helper()
	var st nodeStatus
	for range 600 {
		if st = getStatus(t, base); ok(st) {
			return st
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s: %s never held; last status %+v", base, what, st)
	return st
}

func metricValue(t *testing.T, body, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	fams, err := promparse.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, body)
	}
	f := fams[name]
	if f == nil {
		return 0, false
	}
	return f.Get(labels)
}

// TestNodeEndpointEveryNode: every node serves /healthz, /readyz,
// /metrics and /status (--http), the standby too: the standby says so and
// names the leader; the leader serves its node metrics and its job's. When
// the leader is killed, the standby's endpoint reports it leads, with the
// election and the leader change counted.
func TestNodeEndpointEveryNode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds etcd and runs two nodes; skipped with -short")
	}
	etcd := nodeStartEtcd(t, 1)
	file := writePipeline(t, t.TempDir(), nodeFilePipeline)
	c := &nodeCluster{t: t, file: file, etcd: etcd.endpoints(), procs: map[string]*proc{}, seen: map[*proc]int{},
		extra: []string{"--http", "127.0.0.1:0"},
		env:   []string{"CK=" + filepath.Join(t.TempDir(), "ck"), "OUT=" + filepath.Join(t.TempDir(), "out"), "COUNT=400000"}}
	urls := map[string]string{}
	for _, id := range []string{"n1", "n2"} {
		c.start(id)
		urls[id] = c.procs[id].waitLine(t, httpRE)
	}
	leader := c.awaitLeader("node-file", "")
	standby := map[string]string{"n1": "n2", "n2": "n1"}[leader]

	st := awaitNodeStatus(t, urls[standby], "the standby names the leader", func(s nodeStatus) bool { return s.Role == "standby" && s.Leader == leader })
	if st.Node != standby || st.Job != nil {
		t.Errorf("standby status %+v", st)
	}
	if body := getURL(t, urls[standby]+"/readyz", ""); !strings.Contains(body, `"ready": true`) {
		t.Errorf("standby readyz: %s", body)
	}
	if body := getURL(t, urls[standby]+"/healthz", ""); !strings.Contains(body, `"standby"`) {
		t.Errorf("standby healthz: %s", body)
	}
	m := getURL(t, urls[standby]+"/metrics", "")
	if v, ok := metricValue(t, m, "sluice_node_is_leader", map[string]string{"node": standby}); !ok || v != 0 {
		t.Errorf("standby is_leader %v %v:\n%s", v, ok, m)
	}
	if strings.Contains(m, "sluice_job_") {
		t.Errorf("the standby serves job metrics:\n%s", m)
	}
	// The leader: its node metrics and its job's (once the job runs).
	var lm string
	for i := 0; ; i++ {
		lm = getURL(t, urls[leader]+"/metrics", "")
		if strings.Contains(lm, `job_name="node-file"`) {
			break
		}
		if i == 600 {
			t.Fatalf("the leader's /metrics never served its job's metrics:\n%s", lm)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if v, ok := metricValue(t, lm, "sluice_node_is_leader", map[string]string{"node": leader}); !ok || v != 1 {
		t.Errorf("leader is_leader %v %v", v, ok)
	}
	if v, ok := metricValue(t, lm, "sluice_node_elections_won_total", map[string]string{"node": leader}); !ok || v != 1 {
		t.Errorf("leader elections won %v %v", v, ok)
	}
	if ls := getStatus(t, urls[leader]); ls.Role != "leader" || ls.Leader != leader || ls.Term == 0 || len(ls.Job) == 0 {
		t.Errorf("leader status %+v, want leader with a term and its job's status", ls)
	}

	killed := c.procs[leader]
	if err := killed.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed.wait(t)
	delete(c.procs, leader)
	if next := c.awaitLeader("node-file", leader); next != standby {
		t.Fatalf("%s leads after the kill, want %s", next, standby)
	}
	st = awaitNodeStatus(t, urls[standby], "the former standby leads", func(s nodeStatus) bool { return s.Role == "leader" })
	if st.ElectionsWon != 1 || st.LeaderChanges < 1 || st.Leader != standby {
		t.Errorf("new leader status %+v, want one election won and a leader change", st)
	}
	p := c.procs[standby]
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := nodeWaitExit(t, standby, p); code != 0 {
		t.Errorf("node %s: exit %d after SIGTERM:\n%s", standby, code, p.stderr())
	}
}

// testCert writes a CA (or, with a parent, a node certificate for
// 127.0.0.1 signed by it) and returns its files.
type testCert struct {
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
	crt, pem string // certificate file, key file
}

func newTestCert(t *testing.T, dir, name string, parent *testCert) *testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	signer, signKey := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.KeyUsage = true, true, x509.KeyUsageCertSign
	} else {
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		signer, signKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	tc := &testCert{cert: cert, key: key, crt: filepath.Join(dir, name+".crt"), pem: filepath.Join(dir, name+".key")}
	if err := os.WriteFile(tc.crt, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tc.pem, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return tc
}

// TestNodeTLSFlagErrors: bad node TLS files stop the node at start with
// exit 2 and a message naming the file and the fault, before it contacts
// etcd; so do --savepoint-dir without a token.
func TestNodeTLSFlagErrors(t *testing.T) {
	dir := t.TempDir()
	ca, other := newTestCert(t, dir, "ca", nil), newTestCert(t, dir, "other-ca", nil)
	good, foreign := newTestCert(t, dir, "n1", ca), newTestCert(t, dir, "intruder", other)
	p := writePipeline(t, dir, "name: u\ncheckpoint:\n  dir: "+filepath.Join(dir, "ck")+"\nsource:\n  type: datagen\nsink:\n  type: print\n")
	base := []string{"node", "--cluster-etcd", "127.0.0.1:1", "--node-id", "n1"}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--tls-cert", good.crt, "--tls-ca", ca.crt}, "needs a certificate, a key and a CA file"},
		{[]string{"--tls-cert", foreign.crt, "--tls-key", foreign.pem, "--tls-ca", ca.crt}, "does not verify against the CA file"},
		{[]string{"--tls-cert", good.crt, "--tls-key", foreign.pem, "--tls-ca", ca.crt}, "n1.crt"},
		{[]string{"--tls-cert", good.crt, "--tls-key", good.pem, "--tls-ca", filepath.Join(dir, "missing.pem")}, "missing.pem"},
		{[]string{"--etcd-cert", good.crt, "--etcd-ca", ca.crt}, "--etcd-cert/--etcd-key/--etcd-ca"},
		{[]string{"--savepoint-dir", filepath.Join(dir, "sp"), "--http", "127.0.0.1:0"}, "needs --http (or http.listen) and a token"},
	}
	for _, tt := range tests {
		args := append(append(append([]string{}, base...), tt.args...), p)
		r := run(t, nil, args...)
		if r.code != 2 || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("sluice %v: exit %d, stderr %q; want exit 2 naming %q", tt.args, r.code, r.stderr, tt.want)
		}
	}
}

const rescalePipeline = `name: ${NAME}
parallelism: ${PAR}
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

// postSavepoint asks the node at base for a savepoint and returns its
// path.
func postSavepoint(t *testing.T, base, token string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/savepoints", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var sp struct {
		Path string `json:"path"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &sp) != nil || sp.Path == "" {
		t.Fatalf("POST %s/savepoints: %d %s", base, resp.StatusCode, b)
	}
	return sp.Path
}

// TestNodeRescaleThroughSavepoint rescales a Kafka → Kafka exactly-once
// job through savepoints: 3 nodes at parallelism 2; a savepoint taken on
// the leader (POST /savepoints), the nodes stopped; 2 nodes at parallelism
// 1 started with --from on a new cluster prefix; again a savepoint and a
// stop; 3 nodes at parallelism 2 from it. Input is produced between the
// phases; the savepoint of each phase is taken once the output holds
// every record produced so far, and the nodes are stopped before more
// input comes. An independent read_committed reader finds every record
// exactly once.
func TestNodeRescaleThroughSavepoint(t *testing.T) {
	brokers := kafkaBrokers(t)
	if testing.Short() {
		t.Skip("builds etcd and runs eight node processes; skipped with -short")
	}
	etcd := nodeStartEtcd(t, 1)
	in, out := kafkaTopic(t, brokers, nil), kafkaTopic(t, brokers, nil)
	dir := t.TempDir()
	file := writePipeline(t, dir, rescalePipeline)
	spDir := filepath.Join(dir, "savepoints")
	const token = "rescale-secret"
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.ConsumeTopics(out),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	o := &nodeOutput{t: t, cl: cl, topic: out}
	const step = 3000
	from := ""
	phases := []struct {
		name  string
		nodes []string
		par   int
	}{{"rescale-a", []string{"n1", "n2", "n3"}, 2}, {"rescale-b", []string{"n1", "n2"}, 1}, {"rescale-c", []string{"n1", "n2", "n3"}, 2}}
	for k, ph := range phases {
		produceIDs(t, brokers, in, k*step, (k+1)*step, nil)
		extra := []string{"--http", "127.0.0.1:0", "--http-token-env", "NODE_TOKEN", "--savepoint-dir", spDir}
		if from != "" {
			extra = append(extra, "--from", from)
		}
		extra = append(extra, "--expect-nodes", fmt.Sprint(len(ph.nodes)))
		c := &nodeCluster{t: t, file: file, etcd: etcd.endpoints(), procs: map[string]*proc{}, seen: map[*proc]int{}, extra: extra,
			addrs: map[string]string{},
			env: []string{"NAME=" + ph.name, fmt.Sprint("PAR=", ph.par), "CK=" + filepath.Join(dir, "ck-"+ph.name), "BROKERS=" + brokers,
				"IN=" + in, "OUT=" + out, "NODE_TOKEN=" + token}}
		for _, id := range ph.nodes {
			c.addrs[id] = fmt.Sprintf("127.0.0.1:%d", freeport.Pick(t)) // subtasks on the workers too
		}
		urls := map[string]string{}
		for _, id := range ph.nodes {
			c.start(id)
			urls[id] = c.procs[id].waitLine(t, httpRE)
		}
		leader := c.awaitLeader(ph.name, "")
		for i := 0; from != "" && !strings.Contains(c.procs[leader].stderr(), "starting from --from"); i++ {
			if i == 600 {
				t.Fatalf("phase %s: the leader did not start from the savepoint %s within 60s:\n%s", ph.name, from, c.procs[leader].stderr())
			}
			time.Sleep(100 * time.Millisecond)
		}
		o.await((k+1)*step, c)
		from = postSavepoint(t, urls[leader], token)
		t.Logf("phase %s: %d nodes, parallelism %d, leader %s, savepoint %s", ph.name, len(ph.nodes), ph.par, leader, from)
		for id, p := range c.procs {
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if code := nodeWaitExit(t, id, p); code != 0 {
				t.Fatalf("phase %s: node %s: exit %d after SIGTERM:\n%s", ph.name, id, code, p.stderr())
			}
		}
	}
	const total = 3 * step
	recs := readTopic(t, brokers, out, -1)
	if len(recs) < total {
		recs = readTopic(t, brokers, out, total)
	}
	checkIDsOnce(t, recs, total)
}
