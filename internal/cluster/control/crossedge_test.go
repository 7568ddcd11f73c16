package control_test

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/internal/cluster/control"
	"github.com/sluice-io/sluice/internal/cluster/exchange"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/watermark"
)

// int64Codec encodes the test's records on the hash edge.
var int64Codec = exchange.CodecFuncs[int64]{
	AppendFunc: func(dst []byte, v int64) ([]byte, error) { return binary.AppendVarint(dst, v), nil },
	DecodeFunc: func(b []byte) (int64, error) {
		v, n := binary.Varint(b)
		if n <= 0 {
			return 0, errors.New("bad varint")
		}
		return v, nil
	},
}

// buildKeyedJob plans datagen → keyBy(v mod 7) → two-phase sink at
// parallelism 4: one failover region of two forward chains per subtask
// index, which a job with a Network spreads over the hosts.
func buildKeyedJob(t *testing.T, gen *datagen.Source[int64], snk *testsink.Store[int64], cfg engine.Config) *engine.Job {
	t.Helper()
	g := engine.NewGraph()
	src := engine.SourceNode(g, "gen", gen, watermark.None[int64]())
	out := engine.SinkNode(g, "sink", testsink.NewTwoPhase(snk))
	g.Connect(src, out, engine.Hash, true, engine.HashOf(func(v int64) int64 { return v % 7 }))
	if err := g.SetEdgeCodec(src, out, exchange.Codec[int64](int64Codec)); err != nil {
		t.Fatal(err)
	}
	cfg.Parallelism = parallelism
	cfg.Logger = engine.DiscardLogger()
	j, err := engine.NewJob("control-keyed", g, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func listenNetwork(t *testing.T) *engine.Network {
	t.Helper()
	n, err := engine.ListenNetwork("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	return n
}

// TestWorkerLostCrossEdge: a keyed job spread over the coordinator's
// process and a worker linked over gRPC through a loopback TCP proxy, each
// with its own record exchange: the hash edge's channels between them go
// over gRPC. Once checkpoints completed the proxy cuts the control link:
// the worker's subtasks fail with ErrHostLost, it cancels them (their
// channels break), and the job — one failover region — restarts from the
// latest checkpoint on the coordinator's process alone. The bounded input
// then finishes: every record committed exactly once.
func TestWorkerLostCrossEdge(t *testing.T) {
	const count = 60_000
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(count), datagen.Splits(splits), datagen.RatePerSecond(20_000))
	store := testsink.NewStore[int64]()
	srv, addr := startServer(t)
	px := newProxy(t, addr)
	coordNet, workerNet := listenNetwork(t), listenNetwork(t)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	conn, err := control.Dial(ctx, px.addr(), "w1", control.WithExchangeAddr(workerNet.Addr))
	if err != nil {
		t.Fatal(err)
	}
	workerJob := buildKeyedJob(t, gen, store, engine.Config{Network: workerNet})
	workerDone := make(chan error, 1)
	go func() { workerDone <- workerJob.ServeTasks(ctx, conn) }()
	if err := srv.WaitWorkers(ctx, 1); err != nil {
		t.Fatal(err)
	}

	job := buildKeyedJob(t, gen, store, engine.Config{CheckpointInterval: 50 * time.Millisecond, Restart: restart.FixedDelay(4, 0),
		Placement: srv, Network: coordNet})
	h := job.Start(ctx)
	waitCheckpoints(t, h, 3)
	if coordNet.RecordsReceived() == 0 && workerNet.RecordsReceived() == 0 {
		t.Error("no record crossed between the coordinator and the worker")
	}
	cutAndWaitWorker(ctx, t, px, workerDone)
	res, err := h.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.Restarts == 0 {
		t.Error("no restart after the worker was lost")
	}
	for _, f := range res.Failures {
		if !errors.Is(f, engine.ErrHostLost) && !errors.Is(f, engine.ErrEdgeBroken) {
			t.Errorf("restart caused by %v, not by the lost worker", f)
		}
	}
	got := store.Committed()
	seen := make([]int, count)
	for _, v := range got {
		seen[v]++
	}
	for v, n := range seen {
		if n != 1 {
			t.Fatalf("record %d committed %d times (%d records committed, want %d)", v, n, len(got), count)
		}
	}
	if staged := store.Staged(); len(staged) > 0 {
		t.Errorf("transactions left staged: %v", staged)
	}
	t.Logf("%d records exactly once; %d restarts; %d and %d records over the exchange (coordinator, worker)",
		len(got), res.Restarts, coordNet.RecordsReceived(), workerNet.RecordsReceived())
}
