package control_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/internal/cluster/control"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/watermark"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// proxy forwards loopback TCP connections to target until Cut, which
// closes every connection it carries (as a dead node or a cut link).
type proxy struct {
	lis    net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	cut    bool
	wg     sync.WaitGroup
}

func newProxy(t *testing.T, target string) *proxy {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{lis: lis, target: target}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.accept()
	}()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.lis.Addr().String() }

func (p *proxy) accept() {
	for {
		in, err := p.lis.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = in.Close()
			_ = out.Close()
			continue
		}
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

func (p *proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
}

// Cut closes every connection and refuses new ones.
func (p *proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		_ = c.Close()
	}
}

func (p *proxy) close() {
	_ = p.lis.Close()
	p.Cut()
	p.wg.Wait()
}

const (
	parallelism = 4
	splits      = 4
)

// buildJob plans the test job: an unbounded datagen (split i pushed to
// subtask i) → a two-phase test sink, parallelism 4, four regions. The
// coordinator and the worker each build it, from the same source and sink.
func buildJob(t *testing.T, gen *datagen.Source[int64], snk *testsink.Store[int64], cfg engine.Config) *engine.Job {
	t.Helper()
	g := engine.NewGraph()
	src := engine.SourceNode(g, "gen", gen, watermark.None[int64]())
	out := engine.SinkNode(g, "sink", testsink.NewTwoPhase(snk))
	g.Connect(src, out, engine.Forward, false, nil)
	if cfg.Parallelism == 0 {
		cfg.Parallelism = parallelism
	}
	cfg.Logger = engine.DiscardLogger()
	j, err := engine.NewJob("control-test", g, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestWorkerLost: a coordinator with a control server and one worker
// linked through a loopback TCP proxy; the job's four regions are placed
// on the coordinator's process and the worker (two each). Once checkpoints
// completed, the proxy cuts the link: the worker's subtasks fail with
// ErrHostLost, their regions restart on the coordinator's process from the
// latest checkpoint, and after more checkpoints the job is stopped. Every
// split's committed records are its sequence from the start, each once, in
// order; the worker's ServeTasks returned and cancelled its subtasks.
func TestWorkerLost(t *testing.T) {
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Splits(splits), datagen.PushAssignment(), datagen.RatePerSecond(20_000))
	store := testsink.NewStore[int64]()
	srv, addr := startServer(t)
	px := newProxy(t, addr)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	conn, err := control.Dial(ctx, px.addr(), "w1")
	if err != nil {
		t.Fatal(err)
	}
	workerJob := buildJob(t, gen, store, engine.Config{})
	workerDone := make(chan error, 1)
	go func() { workerDone <- workerJob.ServeTasks(ctx, conn) }()
	if err := srv.WaitWorkers(ctx, 1); err != nil {
		t.Fatal(err)
	}

	job := buildJob(t, gen, store, engine.Config{CheckpointInterval: 50 * time.Millisecond, Restart: restart.FixedDelay(4, 0), Placement: srv})
	h := job.Start(ctx)
	waitCheckpoints(t, h, 3)
	cutAndWaitWorker(ctx, t, px, workerDone)
	// The worker's two regions restart on the coordinator's process.
	waitRestarts(t, h, 2)
	waitCheckpoints(t, h, h.Status().Checkpoints.Completed+3)
	res, err := h.Stop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range res.Failures {
		if !errors.Is(f, engine.ErrHostLost) {
			t.Errorf("restart caused by %v, not by the lost worker", f)
		}
	}
	if res.Restarts != 2 {
		t.Errorf("%d restarts, want 2 (the worker's regions): %v", res.Restarts, res.Failures)
	}
	checkPrefixes(t, store.Committed())
	if staged := store.Staged(); len(staged) > 0 {
		t.Errorf("transactions left staged: %v", staged)
	}
}

// checkPrefixes asserts that each split's committed records are its
// indexes from the start (split s holds s, s+4, s+8, …), each once, in
// order, and that every split made progress.
func checkPrefixes(t *testing.T, got []int64) {
	t.Helper()
	next := make([]int64, splits)
	for s := range next {
		next[s] = int64(s)
	}
	for _, v := range got {
		s := v % splits
		if v != next[s] {
			t.Fatalf("split %d: got %d, want %d (a record missing, duplicated or out of order)", s, v, next[s])
		}
		next[s] += splits
	}
	for s, n := range next {
		if n == int64(s) {
			t.Errorf("split %d: nothing committed", s)
		}
	}
	t.Logf("%d records committed exactly once", len(got))
}

// cutAndWaitWorker cuts the worker's link and waits until its ServeTasks
// returned, which it must do with an error.
func cutAndWaitWorker(ctx context.Context, t *testing.T, px *proxy, workerDone <-chan error) {
	t.Helper()
	px.Cut()
	select {
	case err := <-workerDone:
		if err == nil {
			t.Error("ServeTasks returned nil after its link was cut")
		}
	case <-ctx.Done():
		t.Fatal("ServeTasks did not return after its link was cut")
	}
}

// waitCheckpoints waits, bounded (30 s), until the job completed n
// checkpoints.
func waitCheckpoints(t *testing.T, h *engine.Handle, n int) {
	t.Helper()
	waitFor(t, func() bool { return h.Status().Checkpoints.Completed >= n }, "checkpoints completed")
}

func waitRestarts(t *testing.T, h *engine.Handle, n int) {
	t.Helper()
	waitFor(t, func() bool { return h.Status().Restarts >= n }, "restarts")
}

// waitFor polls cond every 5ms, at most 6000 times.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for i := 0; !cond(); i++ {
		if i > 6000 {
			t.Fatalf("%s: still waiting after 30s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startServer runs a control server on loopback until the test ends.
func startServer(t *testing.T) (*control.Server, string) {
	t.Helper()
	srv, err := control.NewServer(control.WithLogger(engine.DiscardLogger()))
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lis) }()
	t.Cleanup(func() {
		srv.Stop()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return srv, lis.Addr().String()
}

// TestWorkerRefusesOtherJob: a worker whose job has another plan (another
// parallelism) refuses the coordinator's hello; the coordinator's job
// fails with an error that says to run the same pipeline everywhere.
func TestWorkerRefusesOtherJob(t *testing.T) {
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Splits(splits), datagen.Count(100))
	store := testsink.NewStore[int64]()
	srv, addr := startServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	conn, err := control.Dial(ctx, addr, "w1")
	if err != nil {
		t.Fatal(err)
	}
	other := buildJob(t, gen, store, engine.Config{Parallelism: 2})
	workerDone := make(chan error, 1)
	go func() { workerDone <- other.ServeTasks(ctx, conn) }()
	if err := srv.WaitWorkers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	_, err = buildJob(t, gen, store, engine.Config{Placement: srv}).Run(ctx)
	if !errors.Is(err, engine.ErrInvalidJob) || !strings.Contains(err.Error(), "run the same pipeline everywhere") {
		t.Fatalf("job error %v, want the worker's refusal (ErrInvalidJob)", err)
	}
	if err := <-workerDone; !errors.Is(err, engine.ErrInvalidJob) {
		t.Errorf("ServeTasks returned %v, want its refusal", err)
	}
}

// TestWorkerRelinks: a second link with the id of a linked worker replaces
// the first: the first link's host is lost (its ServeTasks returns), the
// server lists the worker once, and Hosts puts engine.Local first.
func TestWorkerRelinks(t *testing.T) {
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Splits(splits), datagen.Count(100))
	store := testsink.NewStore[int64]()
	srv, addr := startServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	serve := func() <-chan error {
		conn, err := control.Dial(ctx, addr, "w1")
		if err != nil {
			t.Fatal(err)
		}
		job := buildJob(t, gen, store, engine.Config{})
		done := make(chan error, 1)
		go func() { done <- job.ServeTasks(ctx, conn) }()
		return done
	}
	first := serve()
	if err := srv.WaitWorkers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	old := srv.Hosts()[1].(*engine.Remote)
	second := serve()
	select {
	case <-old.Lost():
	case <-ctx.Done():
		t.Fatal("the first link was not lost when the worker linked again")
	}
	select {
	case err := <-first:
		if err == nil {
			t.Error("the first link's ServeTasks returned nil; want the broken link's error")
		}
	case <-ctx.Done():
		t.Fatal("the first link's ServeTasks did not return")
	}
	if err := srv.WaitWorkers(ctx, 1); err != nil {
		t.Fatal(err)
	}
	hosts := srv.Hosts()
	if len(hosts) != 2 || hosts[0] != engine.Local || hosts[1].ID() != "w1" || hosts[1] == engine.TaskHost(old) {
		t.Errorf("hosts %v: want local, then the new link of w1", hosts)
	}
	cancel()
	if err := <-second; err != nil {
		t.Errorf("ServeTasks of the second link after its ctx ended: %v", err)
	}
}
