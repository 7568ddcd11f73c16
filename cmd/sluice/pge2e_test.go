package main

// The PostgreSQL sink end to end through the binary, under faults: a real
// Kafka topic of JSON records → the postgres sink exactly-once at
// parallelism 3 with a checkpoint every 500 ms, on a server of the test's
// own (scripts/postgres.sh in a run dir of its own) reached through a
// loopback TCP proxy. While the records are produced the test cuts every
// connection through the proxy again and again (the job fails over and
// its restart strategy recovers), kills the sluice process with SIGKILL
// twice (resumed with --from), and kills the server itself with SIGKILL
// once (restarted: crash recovery). An independent pgx reader then checks
// that the table holds exactly the input and that no prepared transaction
// is left.

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/internal/testutil/tcpproxy"
)

// pge2eServer is a PostgreSQL server of one test, run by
// scripts/postgres.sh in a run dir of its own.
type pge2eServer struct {
	script, run, url string
}

// pge2eStartServer starts a server and stops it (removing its run dir)
// at the end of the test.
func pge2eStartServer(t *testing.T) *pge2eServer {
	t.Helper()
	script, err := filepath.Abs("../../scripts/postgres.sh")
	if err != nil {
		t.Fatal(err)
	}
	run, err := os.MkdirTemp("", "sluice-pge2e.")
	if err != nil {
		t.Fatal(err)
	}
	s := &pge2eServer{script: script, run: run}
	t.Cleanup(func() {
		if out, err := s.cmd(context.Background(), "stop").CombinedOutput(); err != nil {
			t.Logf("stop the test's server: %v: %s", err, out)
		}
	})
	out := s.do(t, "start")
	for _, l := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(l, "SLUICE_POSTGRES_URL="); ok {
			s.url = v
		}
	}
	if s.url == "" {
		t.Fatalf("scripts/postgres.sh start printed no SLUICE_POSTGRES_URL: %s", out)
	}
	return s
}

func (s *pge2eServer) cmd(ctx context.Context, arg string) *exec.Cmd {
	c := exec.CommandContext(ctx, s.script, arg)
	c.Env = append(os.Environ(), "SLUICE_POSTGRES_RUN="+s.run)
	return c
}

// do runs scripts/postgres.sh arg (bounded by two minutes) and returns
// its output.
func (s *pge2eServer) do(t *testing.T, arg string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	out, err := s.cmd(ctx, arg).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("scripts/postgres.sh %s: %v: %s", arg, err, ee.Stderr)
		}
		t.Fatalf("scripts/postgres.sh %s: %v", arg, err)
	}
	return string(out)
}

// pge2eTopic creates a topic of the given partitions.
func pge2eTopic(t *testing.T, brokers string, partitions int32) string {
	t.Helper()
	name := fmt.Sprintf("pge2e-%d", time.Now().UnixNano())
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	return name
}

// pge2eValue is record i's JSON value; pge2eCheck checks the table's
// rows against it.
func pge2eValue(i int64) []byte {
	return fmt.Appendf(nil, `{"id":%d,"amount":%d,"name":"n-%d"}`, i, i*37%1000, i)
}

// pge2eProduce writes records 0…n-1 to topic, record i to partition
// i % partitions: the first nine tenths paced evenly over d, then, until
// hold is closed, a trickle of 2000 records/s (so that the job keeps
// writing, and a fault hits a connection in use) short of the last 200,
// and then the rest. It returns the first error.
func pge2eProduce(ctx context.Context, brokers, topic string, partitions int32, n int64, d time.Duration, hold <-chan struct{}) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	sleep := func(d time.Duration) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(d):
			return nil
		}
	}
	t0 := time.Now()
	recs := make([]*kgo.Record, 0, 2000)
	for i := int64(0); i < n; {
		held := false
		select {
		case <-hold:
		default:
			held = true
		}
		size, wait := int64(2000), time.Duration(0)
		switch {
		case i < n*9/10:
			size = min(size, n*9/10-i)
			wait = time.Duration(float64(d)*float64(i+size)/float64(n)) - time.Since(t0)
		case held && i < n-200:
			size, wait = min(200, n-200-i), 100*time.Millisecond
		case held:
			if err := sleep(50 * time.Millisecond); err != nil {
				return err
			}
			continue
		}
		recs = recs[:0]
		for end := min(n, i+size); i < end; i++ {
			recs = append(recs, &kgo.Record{Partition: int32(i % int64(partitions)), Key: strconv.AppendInt(nil, i, 10), Value: pge2eValue(i)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return fmt.Errorf("produce records up to %d: %w", i, err)
		}
		if wait > 0 {
			if err := sleep(wait); err != nil {
				return err
			}
		}
	}
	return nil
}

// pge2eEnds is scan.bounded.specific-offsets for n records spread over
// partitions round robin.
func pge2eEnds(n int64, partitions int32) string {
	var parts []string
	for p := range int64(partitions) {
		c := n / int64(partitions)
		if p < n%int64(partitions) {
			c++
		}
		parts = append(parts, fmt.Sprintf("partition:%d,offset:%d", p, c))
	}
	return strings.Join(parts, ";")
}

// pge2eCount counts table's rows over a connection of its own; ok is
// false while the server is down.
func pge2eCount(ctx context.Context, url, table string) (int64, bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, false
	}
	defer conn.Close(context.Background())
	var n int64
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		return 0, false
	}
	return n, true
}

const pge2ePipeline = `name: pge2e
parallelism: 3
checkpoint:
  interval: 500ms
  dir: ${OUT}/checkpoints
restart:
  strategy: exponential
  attempts: 200
  delay: 100ms
  max-delay: 1s
source:
  type: kafka
  options:
    brokers: ["${BROKERS}"]
    topics: ["${TOPIC}"]
    scan.bounded.mode: specific-offsets
    scan.bounded.specific-offsets: "${ENDS}"
sink:
  type: postgres
  options:
    url: ${PG_URL}
    table: ${TABLE}
    batch-size: 1000
    setup-timeout: 60s
`

// pge2eRestartRE matches sluice's log lines of a failover (global or of a
// region).
var pge2eRestartRE = regexp.MustCompile(`(job|task) failed; restarting`)

// TestPostgresEndToEndFaults: Kafka (8 partitions, 300k JSON records by
// default, SLUICE_PG_E2E_RECORDS to change) → postgres exactly-once at
// parallelism 3, checkpoints every 500 ms, while the records are produced
// (paced over about 25 s): at least 10 cuts of every connection to the
// server (each a job failover), 2 kill -9 of sluice resumed with --from,
// and 1 kill -9 of the server, restarted. The table (no key: a row
// written twice would show) then holds every record exactly once with its
// values, and no prepared transaction is left.
func TestPostgresEndToEndFaults(t *testing.T) {
	t.Parallel() // mostly waits on its processes; its topics, tables and dirs are its own
	if testing.Short() {
		t.Skip("starts a server of its own and runs for about a minute: skipped with -short")
	}
	pgURL(t) // the PostgreSQL binaries are there
	brokers := kafkaBrokers(t)
	n := int64(300_000)
	if v := os.Getenv("SLUICE_PG_E2E_RECORDS"); v != "" {
		var err error
		if n, err = strconv.ParseInt(v, 10, 64); err != nil || n < 1000 {
			t.Fatalf("SLUICE_PG_E2E_RECORDS=%q: want a number ≥ 1000", v)
		}
	}
	const partitions = 8
	produceFor := max(10*time.Second, time.Duration(n)*time.Second/12_000)

	srv := pge2eStartServer(t)
	su, err := url.Parse(srv.url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := tcpproxy.Start(t, su.Host)
	viaProxy := *su
	viaProxy.Host = proxy.Addr()

	const table = "pge2e_orders"
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, srv.url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE "+table+" (id bigint NOT NULL, amount bigint NOT NULL, name text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)

	topic := pge2eTopic(t, brokers, partitions)
	// The last tenth of the records trickles until the faults fired, and
	// the last 200 wait for them: the job cannot end before.
	produced, faultsDone := make(chan error, 1), make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		produced <- pge2eProduce(ctx, brokers, topic, partitions, n, produceFor, faultsDone)
	}()
	defer wg.Wait()
	defer cancel()

	out := t.TempDir()
	file := writePipeline(t, t.TempDir(), pge2ePipeline)
	env := []string{"OUT=" + out, "BROKERS=" + brokers, "TOPIC=" + topic, "ENDS=" + pge2eEnds(n, partitions),
		"PG_URL=" + viaProxy.String(), "TABLE=" + table}
	t0 := time.Now()
	p := start(t, env, "run", "--progress", "off", file)
	var logs []string

	// The faults, spread over the first 70% of the production (recovery
	// from each takes a while; the last records wait for them): 12 cuts,
	// 2 kill -9 of sluice, 1 of the server. Each waits for committed
	// progress since the one before, so that the job always moves on
	// (until it has committed all but the held records).
	plan := []string{"cut", "cut", "cut", "kill-sluice", "cut", "cut", "cut", "kill-postgres", "cut", "cut", "cut", "kill-sluice", "cut", "cut", "cut"}
	step := produceFor * 7 / 10 / time.Duration(len(plan))
	fired := map[string]int{}
	var last int64
	exited := false
	for i, f := range plan {
		for guard := 0; ; guard++ {
			select {
			case <-p.done:
				exited = true
			default:
			}
			if exited {
				break
			}
			if guard == 1200 { // a hang guard (2 minutes), not a timing assertion
				t.Fatalf("fault %d (%s): no progress past %d rows in 2 minutes\n%s", i, f, last, p.stderr())
			}
			c, ok := pge2eCount(ctx, srv.url, table)
			// Progress is needed until the job committed every record
			// but the held ones.
			moved := c > last || c >= n-200
			if ok && moved && time.Since(t0) >= time.Duration(i)*step+time.Second {
				last = c
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if exited {
			t.Errorf("sluice ended before fault %d (%s): the faults came too late\n%s", i, f, p.stderr())
			break
		}
		switch f {
		case "cut":
			// A cut fires when it closed a connection (between restarts
			// the job may have none for a moment).
			for try := 0; try < 100; try++ {
				if k := proxy.Cut(); k > 0 {
					fired[f]++
					t.Logf("%5.1fs: cut %d connections (%d rows committed)", time.Since(t0).Seconds(), k, last)
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
		case "kill-sluice":
			if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			p.wait(t)
			logs = append(logs, p.stderr())
			fired[f]++
			t.Logf("%5.1fs: kill -9 sluice (%d rows committed); resuming with --from", time.Since(t0).Seconds(), last)
			p = start(t, env, "run", "--progress", "off", "--from", filepath.Join(out, "checkpoints"), file)
		case "kill-postgres":
			srv.do(t, "kill9")
			fired[f]++
			t.Logf("%5.1fs: kill -9 postgres (%d rows committed); restarting it in 1 s", time.Since(t0).Seconds(), last)
			time.Sleep(time.Second)
			srv.do(t, "restart")
		}
	}
	close(faultsDone)
	if err := <-produced; err != nil {
		t.Fatalf("produce: %v", err)
	}
	select {
	case <-p.done:
	case <-time.After(3 * time.Minute): // a hang guard, not a timing assertion
		_ = p.cmd.Process.Kill()
		p.wait(t)
		t.Fatalf("the last run did not end within 3 minutes of the last record produced\n%s", p.stderr())
	}
	code := p.wait(t)
	logs = append(logs, p.stderr())
	elapsed := time.Since(t0)
	if code != 0 {
		t.Fatalf("the last run: exit %d\n%s", code, p.stderr())
	}
	all := strings.Join(logs, "\n")
	restarts := len(pge2eRestartRE.FindAllString(all, -1))
	t.Logf("%d records in %.1fs; faults fired: %d connection cuts, %d kill -9 of sluice, %d kill -9 of postgres; %d failovers logged",
		n, elapsed.Seconds(), fired["cut"], fired["kill-sluice"], fired["kill-postgres"], restarts)
	if fired["cut"] < 10 || fired["kill-sluice"] < 2 || fired["kill-postgres"] < 1 {
		t.Errorf("faults fired: %v; want 10 cuts, 2 kill -9 of sluice, 1 of postgres", fired)
	}
	if strings.Contains(all, "data is lost") {
		t.Errorf("sluice says data is lost:\n%s", all)
	}
	pge2eCheckTable(t, srv.url, table, n)
}

// pge2eCheckTable checks with a connection of its own that table holds
// the records 0…n-1 once each with their values and that no prepared
// transaction is left.
func pge2eCheckTable(t *testing.T, url, table string, n int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var rows, distinct, lo, hi, bad int64
	if err := conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT id), coalesce(min(id), -1), coalesce(max(id), -1),
		count(*) FILTER (WHERE amount <> id*37%1000 OR name <> 'n-' || id) FROM `+table).Scan(&rows, &distinct, &lo, &hi, &bad); err != nil {
		t.Fatal(err)
	}
	if rows != n || distinct != n || lo != 0 || hi != n-1 || bad != 0 {
		var dups []int64
		if r, err := conn.Query(ctx, "SELECT id FROM "+table+" GROUP BY id HAVING count(*) > 1 ORDER BY id LIMIT 10"); err == nil {
			dups, _ = pgx.CollectRows(r, pgx.RowTo[int64])
		}
		t.Errorf("table %s: %d rows, %d distinct ids from %d to %d, %d with wrong values; want ids 0…%d once each (ids more than once: %v)",
			table, rows, distinct, lo, hi, bad, n-1, dups)
	}
	r, err := conn.Query(ctx, "SELECT gid FROM pg_prepared_xacts")
	if err != nil {
		t.Fatal(err)
	}
	gids, err := pgx.CollectRows(r, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(gids) > 0 {
		t.Errorf("prepared transactions left: %q", gids)
	}
}
