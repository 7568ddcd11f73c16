package engine_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// int64Codec is the edge codec of the tests' int64 records.
func int64Codec() stream.EdgeOption[int64] {
	return stream.EdgeCodecFuncs(
		func(dst []byte, v int64) ([]byte, error) { return binary.AppendVarint(dst, v), nil },
		func(b []byte) (int64, error) {
			v, n := binary.Varint(b)
			if n <= 0 || n != len(b) {
				return 0, errors.New("bad varint")
			}
			return v, nil
		})
}

// newTestNetwork starts a record exchange on loopback for one test.
func newTestNetwork(t *testing.T) *engine.Network {
	t.Helper()
	n, err := engine.ListenNetwork("127.0.0.1:0", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Errorf("close network: %v", err)
		}
	})
	return n
}

// crossEdgeJob is datagen → map → keyBy → map → two-phase sink at
// parallelism 4, with faults of plan, placed on the coordinator's process
// and a loopback task host with a record exchange: the keyBy edge crosses
// hosts (its two forward chains of each subtask alternate between them).
func crossEdgeJob(t *testing.T, name string, count int64, plan *faultinject.Plan, restarts int, n *engine.Network, codec bool) (*engine.Job, *engine.Loopback, *datagen.Source[int64], *testsink.Store[int64]) {
	t.Helper()
	const parallelism = 4
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(count), datagen.Splits(8),
		datagen.RatePerSecond(float64(count)))
	store := testsink.NewStore[int64]()
	env := stream.New(stream.Parallelism(parallelism), stream.CheckpointEvery(50*time.Millisecond),
		stream.Restart(restart.FixedDelay(restarts, 0)), stream.Logger(engine.DiscardLogger()), stream.Network(n))
	s := stream.FromSource(env, faultinject.WrapSource(gen, plan), watermark.None[int64](), "gen")
	m := stream.Map(s, func(v int64) int64 { return v }, stream.Name("before"))
	var opts []stream.EdgeOption[int64]
	if codec {
		opts = append(opts, int64Codec())
	}
	k := stream.KeyBy(m, func(v int64) int64 { return v % 13 }, opts...)
	after := stream.Map(k, func(v int64) int64 { return v }, stream.Name("after"))
	stream.SinkTo(after, faultinject.WrapSink(testsink.NewTwoPhase(store), plan), "sink")
	j, err := env.Build(name)
	if err != nil {
		t.Fatal(err)
	}
	lb := engine.NewLoopback("loopback", engine.DiscardLogger())
	t.Cleanup(func() {
		if err := lb.Close(); err != nil {
			t.Errorf("loopback host: %v", err)
		}
	})
	engine.SetPlacement(j, engine.Hosts{engine.Local, lb}, faultinject.ErrInjected)
	return j, lb, gen, store
}

// TestCrossHostEdgeExactlyOnce: a job with a hash edge spreads over two
// task hosts (the coordinator's process and a loopback host) with a record
// exchange; records of the hash edge go over gRPC between them. Seeded
// faults of every kind fail the job (one failover region: every failure
// restarts it globally, from the latest checkpoint, with channels of a new
// epoch); the committed output must equal the input, once each.
func TestCrossHostEdgeExactlyOnce(t *testing.T) {
	seeds := []int64{11, 12, 13}
	count := int64(40_000)
	if testing.Short() {
		seeds, count = seeds[:1], 20_000
	}
	fired := 0
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			const faults = 4
			plan := faultinject.RandomPlan(seed, faults, faultinject.Kinds(), 4, count/4/2, 15)
			n := newTestNetwork(t)
			j, lb, gen, store := crossEdgeJob(t, fmt.Sprintf("crossedge-%d", seed), count, plan, faults+2, n, true)
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
			defer cancel()
			res, err := j.Run(ctx)
			if err != nil {
				t.Fatalf("seed %d: %v (fired %v)", seed, err, plan.Fired())
			}
			for _, f := range res.Failures {
				if !errors.Is(f, faultinject.ErrInjected) {
					t.Errorf("restart caused by %v, not by an injected fault", f)
				}
			}
			checkSequence(t, gen, count, store.Committed(), false)
			if staged := store.Staged(); len(staged) > 0 {
				t.Errorf("transactions left staged: %v", staged)
			}
			if lb.Deployed() == 0 {
				t.Error("no subtask was deployed on the loopback host")
			}
			// Half the keyBy's channels cross hosts, so at least a
			// quarter of the records went over the exchange (more with
			// replays).
			if got := n.RecordsReceived(); got < count/4 {
				t.Errorf("%d records went through the exchange, want at least %d", got, count/4)
			}
			fired += len(plan.Fired())
			t.Logf("seed %d: fired %v, %d restarts, %d checkpoints, %d records over the exchange", seed, plan.Fired(), res.Restarts, res.Checkpoints.Completed, n.RecordsReceived())
		})
	}
	if !testing.Short() && fired < 4 {
		t.Errorf("only %d injected failures fired, want at least 4", fired)
	}
}

// TestCrossHostEdgeHostLost: the loopback host's link is cut once
// checkpoints completed, as a node that died: its subtasks fail with
// ErrHostLost, the channels to and from it break, the job restarts from the
// latest checkpoint on the host that remains, and the output equals the
// input.
func TestCrossHostEdgeHostLost(t *testing.T) {
	const count = 40_000
	n := newTestNetwork(t)
	plan := faultinject.RandomPlan(1, 0, faultinject.Kinds(), 4, 1, 1)
	j, lb, gen, store := crossEdgeJob(t, "crossedge-lost", count, plan, 3, n, true)
	var cut sync.Once
	h := j.Start(t.Context())
	go func() {
		for range 600 { // bounded: 60s
			if h.Status().Checkpoints.Completed >= 2 {
				cut.Do(lb.Cut)
				return
			}
			select {
			case <-h.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	res, err := h.Wait()
	if err != nil {
		t.Fatal(err)
	}
	checkSequence(t, gen, count, store.Committed(), false)
	if res.Restarts == 0 {
		t.Skip("the job finished before the cut; nothing was tested")
	}
	lost := false
	for _, f := range res.Failures {
		lost = lost || errors.Is(f, engine.ErrHostLost) || errors.Is(f, engine.ErrEdgeBroken)
	}
	if !lost {
		t.Errorf("failures %v: none is a lost host or a broken edge", res.Failures)
	}
}

// TestCrossHostEdgeNeedsCodec: a hash edge without a codec that the
// placement puts across hosts fails the job at once (no restart), naming
// the edge.
func TestCrossHostEdgeNeedsCodec(t *testing.T) {
	n := newTestNetwork(t)
	plan := faultinject.RandomPlan(1, 0, faultinject.Kinds(), 4, 1, 1)
	j, _, _, _ := crossEdgeJob(t, "crossedge-nocodec", 1000, plan, 3, n, false)
	res, err := j.Run(t.Context())
	if err == nil {
		t.Fatal("the job ran without a codec on an edge between hosts")
	}
	if !errors.Is(err, engine.ErrInvalidJob) || !errors.Is(err, restart.ErrUnrecoverable) {
		t.Errorf("error %v: want ErrInvalidJob and ErrUnrecoverable", err)
	}
	if msg := err.Error(); !strings.Contains(msg, "edge before -> after") || !strings.Contains(msg, "codec") {
		t.Errorf("error %q does not name the edge and the missing codec", msg)
	}
	if res.Restarts != 0 {
		t.Errorf("%d restarts, want 0", res.Restarts)
	}
}

// TestHashOfStable: a key goes to the same subtask whatever the process:
// the hash depends on the key only.
func TestHashOfStable(t *testing.T) {
	for _, k := range []any{"customer-1", int64(42), 7, uint32(9), 1.5, true, [2]int{1, 2}} {
		a, b := engine.HashKey(k), engine.HashKey(k)
		if a != b {
			t.Errorf("hash of %v: %d, then %d", k, a, b)
		}
	}
	// Fixed values: a change would send keys elsewhere than nodes of an
	// older build do.
	for _, c := range []struct {
		k    any
		want uint64
	}{{"customer-1", 3220080625779094683}, {int64(42), 12058926934050108962}} {
		if got := engine.HashKey(c.k); got != c.want {
			t.Errorf("hash of %#v: %d, want %d", c.k, got, c.want)
		}
	}
	h := engine.HashOf(func(s string) string { return s })
	if h("a") == h("b") {
		t.Error(`"a" and "b" hash alike`)
	}
	// Keys that compare equal are one key: they must go to one subtask.
	negZero := math.Copysign(0, -1)
	if engine.HashKey(0.0) != engine.HashKey(negZero) || engine.HashKey(float32(0)) != engine.HashKey(float32(negZero)) {
		t.Error("+0 and -0 hash differently")
	}
	// A named type hashes as its kind does, not through fmt.
	type customer string
	type count int32
	if engine.HashKey(customer("customer-1")) != engine.HashKey("customer-1") || engine.HashKey(count(-7)) != engine.HashKey(int32(-7)) {
		t.Error("a named string or integer hashes unlike its kind")
	}
}

// TestForwardChains: the keyed job at parallelism 4 is one failover region
// but eight forward chains (gen → before, after → sink, per subtask): the
// units a job with a Network spreads over its hosts.
func TestForwardChains(t *testing.T) {
	plan := faultinject.RandomPlan(1, 0, faultinject.Kinds(), 4, 1, 1)
	j, _, _, _ := crossEdgeJob(t, "crossedge-units", 10, plan, 0, newTestNetwork(t), true)
	if regions, chains := engine.Units(j); regions != 1 || chains != 8 {
		t.Errorf("%d regions and %d chains, want 1 and 8", regions, chains)
	}
}
