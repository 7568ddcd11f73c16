package main

// sluice node with a key_by edge between nodes: three nodes with
// --node-addr run a Kafka → key_by → map → Kafka exactly-once job whose
// forward chains the leader spreads over itself and the two workers; the
// key_by's records cross nodes over the record exchange. The helpers are
// those of node_test.go, node_soak_test.go and node_workers_test.go
// (nodeCluster, soakReader, alive, linked, hostsSubtasks), used as they
// are.

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testutil/freeport"
)

// keyByNodesPipeline keys the records by their input partition (id % 4),
// so that each input partition's records reach one sink subtask, in
// order, whichever node reads them.
const keyByNodesPipeline = `name: node-keyby
parallelism: 3
delivery: exactly-once
checkpoint:
  interval: 300ms
  dir: ${CK}
restart:
  strategy: fixed-delay
  attempts: 1000
  delay: 200ms
source:
  type: kafka
  options:
    brokers: ${BROKERS}
    topics: ${IN}
    scan.bounded.mode: specific-offsets
    scan.bounded.specific-offsets: "${STOP}"
transforms:
  - key_by: id % 4
  - name: mark
    map: '{"id": id, "mapped": true}'
sink:
  type: kafka
  options:
    brokers: ${BROKERS}
    topic: ${OUT}
`

var fromOtherNodesRE = regexp.MustCompile(`records_from_other_nodes=(\d+)`)

// TestNodeKeyByKafka: three nodes, a 1-member etcd, the real broker, a
// job with a key_by edge at parallelism 3. Input is produced in rounds;
// between them the test kills with SIGKILL a worker that runs subtasks
// (restarted with its id; the job, one failover region because of the
// edge, restarts from the latest checkpoint on the nodes left) twice. The
// input is bounded, so every node exits 0. An independent read_committed
// reader finds every record once, each input partition's records in order
// within every output partition; subtasks ran on the workers; the nodes
// received records from other nodes over the exchange; no transaction of
// the job is left open. Everything runs with mutual TLS from files (--tls-*:
// one CA, a certificate for 127.0.0.1 signed by it): the control channel,
// the record exchange (each node logs that it listens with TLS) and etcd
// (an https client URL that requires a client certificate).
func TestNodeKeyByKafka(t *testing.T) {
	brokers := kafkaBrokers(t)
	if testing.Short() {
		t.Skip("builds etcd and runs three nodes against Kafka; skipped with -short")
	}
	const total = 24_000
	const kills = 2
	tlsFlags, etcdEndpoint, etcdTLS := nodeTLSEtcd(t)
	in, out := soakTopic(t, brokers), soakTopic(t, brokers)
	var stop []string
	for p := range soakPartitions {
		stop = append(stop, fmt.Sprintf("partition:%d,offset:%d", p, total/soakPartitions))
	}
	file := writePipeline(t, t.TempDir(), keyByNodesPipeline)
	ids := []string{"n1", "n2", "n3"}
	c := &nodeCluster{t: t, file: file, etcd: etcdEndpoint, etcdTLS: etcdTLS, procs: map[string]*proc{}, seen: map[*proc]int{}, ttl: "3s",
		extra: append([]string{"--expect-nodes", "3"}, tlsFlags...), addrs: map[string]string{},
		env: []string{"CK=" + filepath.Join(t.TempDir(), "ck"), "BROKERS=" + brokers, "IN=" + in, "OUT=" + out, "STOP=" + strings.Join(stop, ";")}}
	for _, id := range ids {
		c.addrs[id] = fmt.Sprintf("127.0.0.1:%d", freeport.Pick(t))
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.DefaultProduceTopic(in),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	r := newSoakReader(t, brokers, out, total)
	for _, id := range ids {
		c.start(id)
	}
	const job = "node-keyby"
	leader := c.awaitLeader(job, "")
	// awaitWorker waits (bounded: 30s) until every live worker is linked
	// to the leader and one of them runs subtasks, and returns that one
	// ("" if none does by then).
	awaitWorker := func() string {
		for range 300 {
			all, host := true, ""
			for _, id := range ids {
				if p := c.procs[id]; id != leader && p != nil && alive(p) {
					if !linked(p, leader) {
						all = false
					} else if host == "" && hostsSubtasks(p) {
						host = id
					}
				}
			}
			if all && host != "" {
				return host
			}
			time.Sleep(100 * time.Millisecond)
		}
		return ""
	}
	rounds := kills + 1
	produced, hits := 0, 0
	for k := range rounds {
		hi := total * (k + 1) / rounds
		soakProduce(t, prod, produced, hi)
		produced = hi
		// Let the job commit part of the round before the kill.
		r.await(produced-(hi-total*k/rounds)/2, c)
		if id := c.etcdLeader(job); id != "" {
			leader = id
		}
		if k == kills {
			break
		}
		victim := awaitWorker()
		if victim == "" {
			for _, id := range ids {
				if id != leader && alive(c.procs[id]) {
					victim = id
					break
				}
			}
			t.Logf("round %d: no worker runs subtasks now; killing %s anyway", k, victim)
		} else {
			hits++
		}
		p := c.procs[victim]
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		p.wait(t)
		c.start(victim)
		t.Logf("round %d: kill -9 of worker %s (%d records read)", k, victim, r.n)
	}
	for id, p := range c.procs {
		if code := nodeWaitExit(t, id, p); code != 0 {
			t.Fatalf("node %s: exit %d:\n%s", id, code, tail(c.logs(), 40000))
		}
	}
	missing, dup := r.finish(total, c)
	// Subtasks ran on the workers, the kills hit them, and records
	// crossed nodes over the exchange.
	placedOnWorker, deployed, received := 0, 0, int64(0)
	exchanges := 0
	for _, p := range c.all {
		s := p.stderr()
		for line := range strings.SplitSeq(s, "\n") {
			if strings.Contains(line, `msg="subtasks placed"`) && strings.Contains(line, " on n") {
				placedOnWorker++
			}
		}
		deployed += strings.Count(s, "task host: subtasks deployed")
		for line := range strings.SplitSeq(s, "\n") {
			if strings.Contains(line, `msg="record exchange listening"`) {
				exchanges++
				if !strings.Contains(line, "tls=true") {
					t.Errorf("a node's record exchange listens without TLS: %s", line)
				}
			}
		}
		var most int64 // the node's count only grows: its largest is its total
		for _, m := range fromOtherNodesRE.FindAllStringSubmatch(s, -1) {
			n, _ := strconv.ParseInt(m[1], 10, 64)
			most = max(most, n)
		}
		received += most
	}
	if placedOnWorker == 0 || deployed == 0 {
		t.Errorf("no subtasks ran on a worker (%d placements naming a node, %d deployments on workers)", placedOnWorker, deployed)
	}
	if exchanges < len(ids) {
		t.Errorf("%d nodes started a record exchange, want every node (%d)", exchanges, len(ids))
	}
	if received == 0 {
		t.Errorf("no node received records from another node over the exchange (records_from_other_nodes): the key_by edge never crossed nodes")
	}
	if hits < 1 {
		t.Errorf("none of the %d worker kills hit a worker that ran subtasks", kills)
	}
	if strings.Contains(c.logs(), "ErrPrefixInUse") || strings.Contains(c.logs(), "prefix in use") {
		t.Errorf("a sink was refused the transactional id prefix's lease")
	}
	ours, _ := jobTxns(t, c, prod)
	if t.Failed() {
		t.Log(tail(c.logs(), 40000))
	}
	t.Logf("KEYBY NODES: %d records, %d of %d worker kills hit a worker running subtasks, %d placements naming a worker, %d deployments on workers, %d records received from other nodes (exiting nodes' counts), %d node processes; output %d read, %d missing, %d duplicated, %d out of order; %d transactional ids of the job",
		total, hits, kills, placedOnWorker, deployed, received, len(c.all), r.n, missing, dup, r.disorder, ours)
}

// nodeTLSEtcd makes a CA and a certificate for 127.0.0.1 (server and
// client use) signed by it, starts a 1-member etcd built from the module
// whose client URL is https and requires a client certificate of that CA,
// and returns the nodes' --tls-* flags, etcd's endpoint and an HTTP client
// of it with the node's certificate.
func nodeTLSEtcd(t *testing.T) (flags []string, endpoint string, hc *http.Client) {
	t.Helper()
	dir := t.TempDir()
	ca := newTestCert(t, dir, "ca", nil)
	n := newTestCert(t, dir, "node", ca)
	bin := filepath.Join(dir, "etcd")
	if out, err := exec.Command("go", "build", "-o", bin, "go.etcd.io/etcd/server/v3").CombinedOutput(); err != nil {
		t.Fatalf("building etcd from the module: %v\n%s", err, out)
	}
	endpoint = fmt.Sprintf("127.0.0.1:%d", freeport.Pick(t))
	peer := fmt.Sprintf("http://127.0.0.1:%d", freeport.Pick(t))
	logf, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "--name", "e0", "--data-dir", filepath.Join(dir, "e0"),
		"--listen-client-urls", "https://"+endpoint, "--advertise-client-urls", "https://"+endpoint,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "e0="+peer,
		"--cert-file", n.crt, "--key-file", n.pem, "--trusted-ca-file", ca.crt, "--client-cert-auth")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	pair, err := tls.LoadX509KeyPair(n.crt, n.pem)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	hc = &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	for range 300 { // a hang guard: 30 s
		if resp, err := hc.Get("https://" + endpoint + "/health"); err == nil {
			ok := resp.StatusCode == http.StatusOK
			resp.Body.Close()
			if ok {
				return []string{"--tls-cert", n.crt, "--tls-key", n.pem, "--tls-ca", ca.crt}, endpoint, hc
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "etcd.log"))
	t.Fatalf("etcd with TLS not healthy within 30s:\n%s", b)
	return nil, "", nil
}
