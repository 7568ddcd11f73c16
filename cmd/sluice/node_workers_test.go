package main

// sluice node with subtasks on the other nodes (issue 19, milestone 3):
// three nodes with --node-addr run a Kafka → map → Kafka exactly-once job
// whose regions the leader places on itself and on the two workers; the
// test kills workers that run subtasks with SIGKILL and the leader twice,
// and an independent read_committed reader checks the output.

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testutil/freeport"
)

const workersPipeline = `name: node-workers
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
  - name: mark
    map: '{"id": id, "mapped": true}'
sink:
  type: kafka
  options:
    brokers: ${BROKERS}
    topic: ${OUT}
`

// hostsSubtasks reports whether p's current link to a leader has deployed
// subtasks on it (a worker logs "linked to the leader" on each link and
// "task host: subtasks deployed" for each deployment).
func hostsSubtasks(p *proc) bool {
	s := p.stderr()
	i := strings.LastIndex(s, "linked to the leader; serving its subtasks")
	return i >= 0 && strings.Contains(s[i:], "task host: subtasks deployed")
}

// linked reports whether p is linked to leader (its latest link is to
// that leader and its work for it did not end since).
func linked(p *proc, leader string) bool {
	s := p.stderr()
	i := strings.LastIndex(s, "linked to the leader; serving its subtasks")
	if i < 0 {
		return false
	}
	line, after, _ := strings.Cut(s[i:], "\n")
	return strings.Contains(line, " leader="+leader+" ") && !strings.Contains(after, "not working for the leader")
}

func alive(p *proc) bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// awaitWorkerHost waits (bounded: polls × 100ms plus the polls' own time)
// until every live node of ids but the leader is linked to the leader and
// one of them runs subtasks on its current link, and returns that one ("" if
// none does by then) and the leader. With a job name it asks etcd for the
// leader at every poll (a failover the test did not cause is possible at
// load). It tries the nodes from ids[from mod len(ids)] on, so that a caller
// can rotate over them.
func (c *nodeCluster) awaitWorkerHost(job string, ids []string, leader string, from, polls int) (host, lead string) {
	for range polls {
		if job != "" {
			if id := c.etcdLeader(job); id != "" {
				leader = id
			}
		}
		all := true
		host = ""
		for j := range ids {
			id := ids[(from+j)%len(ids)]
			p := c.procs[id]
			if id == leader || p == nil || !alive(p) {
				continue
			}
			if !linked(p, leader) {
				all = false
			} else if host == "" && hostsSubtasks(p) {
				host = id
			}
		}
		if all && host != "" {
			return host, leader
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", leader
}

// TestNodeWorkersKafka: three nodes, a 1-member etcd, the real broker. The
// first leader waits for the two others to link (--expect-nodes 3) and
// places the job's three regions on itself and both workers. Input is
// produced in rounds; between them the test kills with SIGKILL a worker
// that runs subtasks (restarted with its id; with --lost-node-wait its
// regions wait for a node to link — the restarted one — and restart there
// from the latest checkpoint, which the leader logs) four times and the leader
// twice (the first worker killed must serve its subtasks' metrics on its
// /metrics). The input is bounded, so the job finishes and every node exits 0;
// an independent read_committed reader then finds every record once, each
// input partition's records in order within every output partition, and
// no transaction of the job left open.
func TestNodeWorkersKafka(t *testing.T) {
	brokers := kafkaBrokers(t)
	if testing.Short() {
		t.Skip("builds etcd and runs three nodes against Kafka; skipped with -short")
	}
	const total = 48_000
	plan := []string{"worker", "worker", "leader", "worker", "worker", "leader"}
	etcd := nodeStartEtcd(t, 1)
	in, out := soakTopic(t, brokers), soakTopic(t, brokers)
	var stop []string
	for p := range soakPartitions {
		stop = append(stop, fmt.Sprintf("partition:%d,offset:%d", p, total/soakPartitions))
	}
	file := writePipeline(t, t.TempDir(), workersPipeline)
	ids := []string{"n1", "n2", "n3"}
	c := &nodeCluster{t: t, file: file, etcd: etcd.endpoints(), procs: map[string]*proc{}, seen: map[*proc]int{}, ttl: "3s",
		extra: []string{"--expect-nodes", "3", "--http", "127.0.0.1:0", "--lost-node-wait", "60s"}, addrs: map[string]string{},
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
	const job = "node-workers"
	leader := c.awaitLeader(job, "")
	rounds := len(plan) + 1
	produced, hits := 0, 0
	for k := range rounds {
		hi := total * (k + 1) / rounds
		soakProduce(t, prod, produced, hi)
		produced = hi
		// Let the job commit part of the round before the disruption.
		r.await(produced-(hi-total*k/rounds)/2, c)
		if id := c.etcdLeader(job); id != "" {
			leader = id
		}
		if k == len(plan) {
			break
		}
		switch plan[k] {
		case "worker":
			victim, _ := c.awaitWorkerHost("", ids, leader, 0, 300)
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
				if hits == 1 {
					// The worker's /metrics counts the subtasks it runs.
					m := httpRE.FindStringSubmatch(c.procs[victim].stderr())
					if m == nil {
						t.Fatalf("worker %s logged no http endpoint", victim)
					}
					if body := getURL(t, m[1]+"/metrics", ""); !strings.Contains(body, "sluice_operator_numRecordsIn") {
						t.Errorf("worker %s's /metrics has no operator metrics of its subtasks:\n%.3000s", victim, body)
					}
				}
			}
			p := c.procs[victim]
			if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			p.wait(t)
			c.start(victim)
			t.Logf("round %d: kill -9 of worker %s (%d records read)", k, victim, r.n)
		case "leader":
			p := c.procs[leader]
			t0 := time.Now()
			if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			p.wait(t)
			c.start(leader)
			next := c.awaitLeader(job, leader)
			t.Logf("round %d: kill -9 of leader %s; %s leads after %v (%d records read)", k, leader, next, time.Since(t0).Round(time.Millisecond), r.n)
			leader = next
		}
	}
	for id, p := range c.procs {
		if code := nodeWaitExit(t, id, p); code != 0 {
			t.Fatalf("node %s: exit %d:\n%s", id, code, tail(c.logs(), 40000))
		}
	}
	missing, dup := r.finish(total, c)
	// Subtasks ran on the workers, and the kills hit them.
	placedOnWorker, deployed := 0, 0
	for _, p := range c.all {
		s := p.stderr()
		for line := range strings.SplitSeq(s, "\n") {
			if strings.Contains(line, `msg="subtasks placed"`) && strings.Contains(line, " on n") {
				placedOnWorker++
			}
		}
		deployed += strings.Count(s, "task host: subtasks deployed")
	}
	if placedOnWorker == 0 || deployed == 0 {
		t.Errorf("no subtasks ran on a worker (%d placements naming a node, %d deployments on workers)", placedOnWorker, deployed)
	}
	if hits < 3 {
		t.Errorf("only %d of 4 worker kills hit a worker that ran subtasks", hits)
	}
	// --lost-node-wait: a killed worker's regions waited for a node to
	// link and restarted once one did (the worker restarted at once).
	waited, relinked := 0, 0
	for _, p := range c.all {
		waited += strings.Count(p.stderr(), "region waits for a task host")
		relinked += strings.Count(p.stderr(), "a task host linked; restarting the region")
	}
	if waited == 0 || relinked == 0 {
		t.Errorf("with --lost-node-wait, %d regions waited for a node and %d restarted on one that linked; want some of each", waited, relinked)
	}
	if n := strings.Count(c.logs(), "ErrPrefixInUse"); n > 0 || strings.Contains(c.logs(), "prefix in use") {
		t.Errorf("a sink was refused the transactional id prefix's lease (%d)", n)
	}
	ours, _ := jobTxns(t, c, prod)
	t.Logf("WORKERS: %d records, %d of 4 worker kills hit a worker running subtasks, %d placements naming a worker, %d deployments on workers, %d regions waited for a node and %d restarted on one that linked, %d node processes; output %d read, %d missing, %d duplicated, %d out of order; %d transactional ids of the job",
		total, hits, placedOnWorker, deployed, waited, relinked, len(c.all), r.n, missing, dup, r.disorder, ours)
}
