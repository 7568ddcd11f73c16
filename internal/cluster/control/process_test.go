package control_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/file"
	"github.com/sluice-io/sluice/internal/cluster/control"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// The keyed job of the process test: datagen of procCount numbers → to
// text → keyBy(number mod 11) → a file sink of lines in procOut, at
// parallelism 3. Every process builds it the same way.
const (
	procCount       = 30_000
	procParallelism = 3
	workerEnv       = "SLUICE_CONTROL_TEST_WORKER" // "<control addr> <node id> <out dir>"
)

func keyedFileJob(t testing.TB, out string, opts ...stream.Option) *engine.Job {
	t.Helper()
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(procCount), datagen.Splits(6), datagen.RatePerSecond(2000))
	snk, err := file.NewRowSink(out, file.LinesFormat(), file.WithBuckets(file.BasePathBuckets[string]()),
		file.PartPrefix("part"), file.PartSuffix(".txt"))
	if err != nil {
		t.Fatal(err)
	}
	env := stream.New(append([]stream.Option{stream.Parallelism(procParallelism), stream.Logger(engine.DiscardLogger())}, opts...)...)
	nums := stream.FromSource(env, gen, watermark.None[int64](), "gen")
	text := stream.Map(nums, func(v int64) string { return strconv.FormatInt(v, 10) }, stream.Name("text"))
	keyed := stream.KeyBy(text, func(s string) string { n, _ := strconv.ParseInt(s, 10, 64); return strconv.FormatInt(n%11, 10) },
		stream.EdgeCodecFuncs(func(dst []byte, s string) ([]byte, error) { return append(dst, s...), nil },
			func(b []byte) (string, error) { return string(b), nil }))
	stream.SinkTo(keyed, snk, "files")
	j, err := env.Build("keyed-files")
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// TestHelperWorkerProcess is the worker process of
// TestWorkerProcessKilledCrossEdge (the test binary run again); it skips
// otherwise. It serves the coordinator's subtasks until killed.
func TestHelperWorkerProcess(t *testing.T) {
	spec := os.Getenv(workerEnv)
	if spec == "" {
		t.Skip("a helper process of TestWorkerProcessKilledCrossEdge")
	}
	f := strings.Fields(spec)
	n, err := engine.ListenNetwork("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = n.Close() }()
	j := keyedFileJob(t, f[2], stream.Network(n))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	conn, err := control.Dial(ctx, f[0], f[1], control.WithExchangeAddr(n.Addr), control.WithLogger(engine.DiscardLogger()))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("worker serving")
	_ = j.ServeTasks(ctx, conn)
}

// TestWorkerProcessKilledCrossEdge: a coordinator (this process) and two
// worker processes (the test binary run again), each with a record
// exchange; the keyed job spreads its three forward chains pairs over the
// three processes, so its hash edge crosses processes over gRPC. Once
// checkpoints completed, a worker process running subtasks is killed with
// SIGKILL: the coordinator loses it, the job (one failover region)
// restarts from its latest checkpoint on the two processes left and
// finishes. An independent reader of the committed part files finds every
// number exactly once.
func TestWorkerProcessKilledCrossEdge(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	out := t.TempDir()
	srv, addr := startServer(t)
	coordNet := listenNetwork(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var procs []*exec.Cmd
	for i := range 2 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperWorkerProcess$", "-test.v")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s w%d %s", workerEnv, addr, i+1, out))
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { // drain
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
			}
		}()
		procs = append(procs, cmd)
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	if err := srv.WaitWorkers(ctx, 2); err != nil {
		t.Fatal(err)
	}
	j := keyedFileJob(t, out, stream.CheckpointEvery(100*time.Millisecond), stream.Restart(restart.FixedDelay(3, 0)),
		stream.Placement(srv), stream.Network(coordNet))
	h := j.Start(ctx)
	waitCheckpoints(t, h, 3)
	// Kill the worker of the first remote chain (w1: chains alternate
	// local, w1, w2).
	victim := srv.Hosts()[1].(*engine.Remote)
	if victim.Deployed() == 0 {
		t.Fatalf("no subtask deployed on %s", victim.ID())
	}
	if err := procs[0].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	res, err := h.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.Restarts == 0 {
		t.Error("no restart after a worker process was killed")
	}
	// Independent reader: the committed part files (not hidden, not in
	// progress) hold every number once.
	seen := make([]int, procCount)
	files, err := filepath.Glob(filepath.Join(out, "part-*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Fields(string(b)) {
			v, err := strconv.Atoi(l)
			if err != nil || v < 0 || v >= procCount {
				t.Fatalf("%s: bad line %q", name, l)
			}
			seen[v]++
			lines++
		}
	}
	for v, n := range seen {
		if n != 1 {
			t.Fatalf("number %d committed %d times (%d lines in %d files, want %d)", v, n, lines, len(files), procCount)
		}
	}
	t.Logf("%d numbers exactly once in %d part files; %d restarts (%v); %d records received over the exchange by the coordinator",
		lines, len(files), res.Restarts, res.Failures, coordNet.RecordsReceived())
}
