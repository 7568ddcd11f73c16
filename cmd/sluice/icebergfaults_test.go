package main

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/iceberg"
	s3conn "github.com/sluice-io/sluice/connectors/s3"
	"github.com/twmb/franz-go/pkg/kgo"
)

// icebergProxy forwards loopback TCP connections to target, for the
// Iceberg faults test: it counts the bytes clients send, can hold the
// server's answers (a request reaches the server, its answer never
// reaches the client), cut every open connection, and refuse new ones
// for a while.
type icebergProxy struct {
	ln      net.Listener
	target  string
	sent    atomic.Int64 // bytes from clients to the server
	held    atomic.Bool  // answers are not forwarded while set
	refuse  atomic.Int64 // unix nanoseconds until which new connections are closed at once
	mu      sync.Mutex
	conns   map[net.Conn]struct{}
	closed  bool
	wg      sync.WaitGroup
	cuts    atomic.Int64 // connections closed by cut
	refused atomic.Int64 // connections refused
}

func icebergStartProxy(t *testing.T, target string) *icebergProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &icebergProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *icebergProxy) addr() string { return p.ln.Addr().String() }

func (p *icebergProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		if time.Now().UnixNano() < p.refuse.Load() {
			p.refused.Add(1)
			c.Close()
			continue
		}
		s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns[c], p.conns[s] = struct{}{}, struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go p.pipe(s, c, true)
		go p.pipe(c, s, false)
	}
}

// pipe copies src to dst (up: client to server); it closes both when
// either side ends. Answers wait while held is set (at most a minute: a
// hang guard; the test releases them within a second).
func (p *icebergProxy) pipe(dst, src net.Conn, up bool) {
	defer p.wg.Done()
	defer func() {
		p.mu.Lock()
		delete(p.conns, src)
		delete(p.conns, dst)
		p.mu.Unlock()
		src.Close()
		dst.Close()
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if up {
				p.sent.Add(int64(n))
			} else {
				for deadline := time.Now().Add(time.Minute); p.held.Load() && time.Now().Before(deadline); {
					time.Sleep(2 * time.Millisecond)
				}
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // io.EOF or closed
			return
		}
	}
}

// cut closes every open connection and refuses new ones for d.
func (p *icebergProxy) cut(d time.Duration) int {
	p.refuse.Store(time.Now().Add(d).UnixNano())
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.conns) / 2
	for c := range p.conns {
		c.Close()
	}
	p.cuts.Add(int64(n))
	return n
}

func (p *icebergProxy) close() {
	p.held.Store(false)
	p.mu.Lock()
	p.closed = true
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.ln.Close()
	p.wg.Wait()
}

// TestIcebergKafkaFaults is issue 18's acceptance test of the Iceberg
// sink, through the binary, with faults inside the process's connections:
// the SQL catalog is PostgreSQL ($SLUICE_POSTGRES_URL) and, when
// $SLUICE_S3_ENDPOINT is set, the warehouse is on S3 (versitygw), each
// reached through a loopback proxy. Orders from a real Kafka topic (8
// partitions) go through examples/pipelines/kafka-to-iceberg.yaml at
// parallelism 3, checkpoints every second, compaction every 3
// checkpoints, every checkpoint kept (for the audit):
//
//   - run 1 is killed with SIGKILL in the middle of a snapshot commit:
//     after a checkpoint completed, as soon as the global committer talks
//     to the catalog, the proxy holds the catalog's answers (the commit may
//     have reached PostgreSQL, the process does not learn it) and the
//     process is killed;
//   - run 2 (--from) gets icebergFaults faults, one after each of the
//     checkpoints that follow, each time waiting until a later checkpoint
//     completed (the job recovered by restarts inside the process): the
//     catalog connections cut during the global committer's commit of a
//     checkpoint whose data files are written (with new connections
//     refused for a second), the catalog's answers held during a commit
//     and then the connections cut (the outcome of the commit unknown to
//     the process), the S3 connections cut and refused for 1.5 s when the
//     committer writes the snapshot's manifests, and when the writers
//     upload the next checkpoint's data files; then it is killed with
//     SIGKILL in the middle of a commit again;
//   - run 3 (--from) runs until the table holds every order and is
//     stopped with SIGTERM.
//
// PyIceberg then reads the table (directly, not through the proxies):
// every order exactly once, one append snapshot per checkpoint that
// carried data (the data files of every completed checkpoint's
// committables, icebergAudit), compactions that add no records, no data
// file referenced twice or missing from storage; the data files in
// storage that no snapshot added (orphans of failed attempts) are
// counted. SLUICE_ICEBERG_RECORDS sets the count (default 60000).
func TestIcebergKafkaFaults(t *testing.T) {
	t.Parallel() // mostly waits on its processes; its topics, tables and dirs are its own
	py := icebergPython(t)
	pg := os.Getenv("SLUICE_POSTGRES_URL")
	if pg == "" {
		t.Skip("SLUICE_POSTGRES_URL is not set: start PostgreSQL with scripts/postgres.sh (scripts/test.sh does)")
	}
	brokers := kafkaBrokers(t)
	count := icebergRecords(t, 60_000)
	began := time.Now()
	pgURL, err := url.Parse(pg)
	if err != nil {
		t.Fatal(err)
	}
	pgProxy := icebergStartProxy(t, pgURL.Host)
	proxied := *pgURL
	proxied.Host = pgProxy.addr()

	work := t.TempDir()
	ex, err := os.ReadFile(pipelines + "kafka-to-iceberg.yaml")
	if err != nil {
		t.Fatal(err)
	}
	warehouse := filepath.Join(work, "warehouse")
	var s3Proxy *icebergProxy
	var props map[string]string // for the readers: straight to the server
	var s3env []string
	if ep := os.Getenv("SLUICE_S3_ENDPOINT"); ep != "" {
		ak, sk := os.Getenv("SLUICE_S3_ACCESS_KEY"), os.Getenv("SLUICE_S3_SECRET_KEY")
		s3c, err := s3conn.New(s3conn.Endpoint(ep), s3conn.Credentials(ak, sk))
		if err != nil {
			t.Fatal(err)
		}
		bucket := fmt.Sprintf("iceberg-faults-%d", time.Now().UnixNano())
		if err := s3c.CreateBucket(t.Context(), bucket); err != nil {
			t.Fatal(err)
		}
		warehouse = "s3://" + bucket + "/warehouse"
		epURL, err := url.Parse(ep)
		if err != nil {
			t.Fatal(err)
		}
		s3Proxy = icebergStartProxy(t, epURL.Host)
		ex = fmt.Appendf(ex, "    properties.s3.endpoint: http://%s\n    properties.s3.region: us-east-1\n"+
			"    properties.s3.access-key-id: ${S3_ACCESS_KEY}\n    properties.s3.secret-access-key: ${S3_SECRET_KEY}\n", s3Proxy.addr())
		props = map[string]string{"s3.endpoint": ep, "s3.region": "us-east-1", "s3.access-key-id": ak, "s3.secret-access-key": sk}
		s3env = []string{"S3_ACCESS_KEY=" + ak, "S3_SECRET_KEY=" + sk}
	} else {
		t.Log("SLUICE_S3_ENDPOINT is not set: the warehouse is a local directory and the S3 faults are left out")
	}
	ex = append(ex, "    compaction: 3\n"...) // a replace snapshot every 3 checkpoints, among the faults
	file := filepath.Join(work, "kafka-to-iceberg-faults.yaml")
	if err := os.WriteFile(file, ex, 0o600); err != nil {
		t.Fatal(err)
	}

	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	topic := icebergTopic(t, cl)
	ckpt := filepath.Join(work, "checkpoints")
	ident := fmt.Sprintf("faults%d.orders", time.Now().UnixNano()) // the database is shared
	env := []string{"KAFKA_BROKERS=" + brokers, "TOPIC=" + topic, "KAFKA_BOUNDED=unbounded",
		"ICEBERG_CATALOG=" + proxied.String(), "ICEBERG_WAREHOUSE=" + warehouse, "ICEBERG_TABLE=" + ident,
		"CHECKPOINTS=" + ckpt, "CHECKPOINT_INTERVAL=1s", "CHECKPOINT_RETAIN=10000",
		"RESTART_ATTEMPTS=100", "RESTART_DELAY=250ms", "ICEBERG_FILE_SIZE=1048576"}
	env = append(env, s3env...)
	rnd := rand.New(rand.NewPCG(18, 2))
	latest := func() string { b, _ := os.ReadFile(filepath.Join(ckpt, "_latest")); return string(b) }
	// nextCheckpoint waits until a checkpoint completes after the call.
	nextCheckpoint := func(p *proc, what string) {
		before := latest()
		waitFor(t, p, what, 3*time.Minute, func() bool { return latest() != before })
	}
	// afterCheckpoint waits until, after a checkpoint completed, px sees
	// the process's first bytes, then jitter more; it polls every
	// millisecond (waitFor's 100 ms would miss short commits).
	afterCheckpoint := func(p *proc, px *icebergProxy, what string, delay, jitter time.Duration) {
		before, mark := latest(), int64(-1)
		var ready time.Time
		deadline := time.Now().Add(3 * time.Minute) // a hang guard
		for {
			if l := latest(); l != before {
				before, mark, ready = l, -1, time.Now().Add(delay)
			}
			if mark < 0 && !ready.IsZero() && time.Now().After(ready) {
				mark = px.sent.Load()
			}
			if mark >= 0 && px.sent.Load() > mark {
				break
			}
			select {
			case <-p.done:
				t.Fatalf("%s: sluice ended first\n%s", what, p.stderr())
			case <-time.After(time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 3 minutes\n%s", what, p.stderr())
			}
		}
		if jitter > 0 {
			time.Sleep(time.Duration(rnd.Int64N(int64(jitter))))
		}
	}
	// killInCommit kills p with SIGKILL while a snapshot commit's catalog
	// answers are held: after a checkpoint completed, at the global
	// committer's first catalog bytes (plus 0–20 ms).
	killInCommit := func(p *proc, run int) {
		afterCheckpoint(p, pgProxy, fmt.Sprintf("run %d: a commit after a checkpoint", run), 0, 20*time.Millisecond)
		pgProxy.held.Store(true)
		time.Sleep(300 * time.Millisecond)
		if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		p.wait(t)
		pgProxy.held.Store(false)
		pgProxy.cut(0)
		t.Logf("run %d killed with SIGKILL in a commit after checkpoint %s", run, strings.TrimSpace(latest()))
	}

	// The faults of run 2, in this order (the S3 ones only with S3).
	type fault struct {
		name string
		s3   bool
		do   func(p *proc) string
	}
	catalogCut := fault{"catalog connections cut in a commit", false, func(p *proc) string {
		// 0–150 ms after the commit's first catalog bytes: in the table
		// load, the manifest writes or the catalog's compare-and-swap
		afterCheckpoint(p, pgProxy, "a commit", 0, 150*time.Millisecond)
		return fmt.Sprintf("%d catalog connections cut, new ones refused for 1s", pgProxy.cut(time.Second))
	}}
	catalogHold := fault{"catalog answers held in a commit, then cut", false, func(p *proc) string {
		afterCheckpoint(p, pgProxy, "a commit", 0, 100*time.Millisecond)
		pgProxy.held.Store(true)
		time.Sleep(300 * time.Millisecond)
		n := pgProxy.cut(500 * time.Millisecond)
		pgProxy.held.Store(false)
		return fmt.Sprintf("answers held 300ms, %d catalog connections cut, new ones refused for 0.5s", n)
	}}
	s3Commit := fault{"S3 cut when the committer writes manifests", true, func(p *proc) string {
		afterCheckpoint(p, s3Proxy, "S3 requests after a checkpoint", 0, 0)
		return fmt.Sprintf("%d S3 connections cut, new ones refused for 1.5s", s3Proxy.cut(1500*time.Millisecond))
	}}
	s3Write := fault{"S3 cut when the writers upload data files", true, func(p *proc) string {
		// the next checkpoint's uploads start about a second after the
		// last one completed
		afterCheckpoint(p, s3Proxy, "S3 requests before the next checkpoint", 700*time.Millisecond+time.Duration(rnd.Int64N(int64(250*time.Millisecond))), 0)
		return fmt.Sprintf("%d S3 connections cut, new ones refused for 1.5s", s3Proxy.cut(1500*time.Millisecond))
	}}
	plan := []fault{catalogCut, s3Write, catalogHold, s3Commit, catalogCut, s3Write, catalogHold, catalogCut, s3Commit, catalogHold, catalogCut, catalogHold}
	if s3Proxy == nil {
		plan = slices.DeleteFunc(plan, func(f fault) bool { return f.s3 })
	}

	wait := icebergProduce(t, cl, topic, count, 90*time.Second)
	p := start(t, env, "run", "--progress", "off", file)
	killInCommit(p, 1)

	p = start(t, env, "run", "--progress", "off", "--from", ckpt, file)
	injected := map[string]int{}
	for i, f := range plan {
		what := f.do(p)
		injected[f.name]++
		t.Logf("run 2, fault %d (%s, after checkpoint %s): %s", i+1, f.name, strings.TrimSpace(latest()), what)
		nextCheckpoint(p, fmt.Sprintf("run 2: a checkpoint after fault %d (%s)", i+1, f.name))
	}
	killInCommit(p, 2)
	restarts := regexp.MustCompile(`[^\n]*restarting from the latest completed checkpoint[^\n]*`).FindAllString(p.stderr(), -1)
	committer := 0
	for _, r := range restarts {
		if strings.Contains(r, "global committer") {
			committer++
		}
	}
	t.Logf("run 2: %d faults injected; the job restarted %d times inside the process, %d of them after a failure of the global committer (e.g. %s)",
		len(plan), len(restarts), committer, firstMatch(p.stderr(), `[^\n]*restarting from[^\n]*global committer[^\n]*`))

	cat := iceberg.SQLCatalog("default", pg, "", props)
	p = start(t, env, "run", "--progress", "off", "--from", ckpt, file)
	waitFor(t, p, fmt.Sprintf("the table holds %d records", count), 10*time.Minute, func() bool {
		return icebergTotal(t, cat, ident) >= count
	})
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("the last run, stopped with SIGTERM, exited %d\n%s", code, p.stderr())
	}
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	t.Logf("last run: %s; catalog proxy: %d connections cut, %d refused", firstMatch(p.stderr(), `job .*(FINISHED|STOPPED|stopped).*`),
		pgProxy.cuts.Load(), pgProxy.refused.Load())
	if s3Proxy != nil {
		t.Logf("S3 proxy: %d connections cut, %d refused", s3Proxy.cuts.Load(), s3Proxy.refused.Load())
	}
	// The faults must have made the global committer fail between the
	// data files' write and the snapshot commit, not only been absorbed
	// by retries: else this test proves nothing about those failures.
	if committer == 0 {
		t.Errorf("no fault of run 2 made the global committer fail (%d restarts)", len(restarts))
	}
	var kv []string
	for k, v := range props {
		kv = append(kv, k+"="+v)
	}
	sa := *pgURL
	sa.Scheme = "postgresql+psycopg2"
	tbl := icebergReadURI(t, py, sa.String(), warehouse, ident, kv...)
	icebergCheck(t, tbl, count)
	a := icebergAudit(t, tbl, ckpt, env, props)
	t.Logf("summary: %d records, %d failures injected (%d faults in run 2: %v; 2 SIGKILLs in commits), %d restarts inside run 2 (%d of the global committer); "+
		"%d append snapshots for %d checkpoints that carried data (of %d completed), %d compactions; %d data files referenced, %d orphans; %s wall time",
		count, len(plan)+2, len(plan), injected, len(restarts), committer, a.appends, a.dataCheckpoints, a.checkpoints, a.replaces,
		a.referenced, a.orphans, time.Since(began).Round(time.Second))
}
