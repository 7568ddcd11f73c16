package kafka

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/internal/cluster/control"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// runInit is a fakeInit that names its run, as the engine's InitContext
// does.
type runInit struct {
	fakeInit
	run string
}

func (r *runInit) RunID() string { return r.run }

// TestLeaseNonce pins whose writers share a lease: those of one job run
// (the same job id and run id, in any process and with any sink value);
// not another run of the same job id, another job, or, without a run id,
// another sink value.
func TestLeaseNonce(t *testing.T) {
	a, b := newLeaseSet(), newLeaseSet()
	run := func(job, id string) *runInit { return &runInit{fakeInit: fakeInit{job: job, op: "k"}, run: id} }
	if a.nonceOf(run("j1", "r1")) != b.nonceOf(run("j1", "r1")) {
		t.Error("two sink values of one run have different nonces")
	}
	for _, other := range []*runInit{run("j1", "r2"), run("j2", "r1")} {
		if a.nonceOf(run("j1", "r1")) == b.nonceOf(other) {
			t.Errorf("run %s/%s shares the nonce of run j1/r1", other.job, other.run)
		}
	}
	plain := &fakeInit{job: "j1", op: "k"}
	if a.nonceOf(plain) == b.nonceOf(plain) || a.nonceOf(plain) != a.nonce {
		t.Error("without a run id the nonce is not the sink value's own")
	}
	if a.nonceOf(run("j1", "")) != a.nonce {
		t.Error("an empty run id is not the sink value's nonce")
	}
}

// leaseJob is datagen(count) → Kafka exactly-once sink (parallelism 2,
// two failover regions) with its own sink value; opts are added to the
// environment's.
func leaseJob(t *testing.T, brokers []string, jobID, topic string, count int64, log *slog.Logger, opts ...stream.Option) *stream.Environment {
	t.Helper()
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(count), datagen.Splits(2), datagen.RatePerSecond(2000))
	sk, err := NewSink(brokers, indexSerializer(gen), DefaultTopic(topic), DeliveryGuarantee(ExactlyOnce),
		TransactionTimeout(time.Minute), SinkLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	env := stream.New(append([]stream.Option{stream.Parallelism(2), stream.CheckpointEvery(50 * time.Millisecond), stream.JobID(jobID),
		stream.Restart(restart.FixedDelay(3, 0)), stream.Logger(log)}, opts...)...)
	stream.SinkTo(stream.FromSource(env, gen, watermark.None[int64](), "gen"), sk, "kafka")
	return env
}

// TestLeaseSharedByOneRun runs one job with one region on the
// coordinator's process and the other on a worker linked over the control
// channel (gRPC on loopback): the worker's sink is another sink value (as
// in another process) on the same transactional id prefix. Its writer
// shares the lease with the coordinator's, because both are of one run;
// before, its nonce was its sink value's and it was refused with
// ErrPrefixInUse. Every record is committed once. (A second run of the
// same job id is still refused: TestSamePrefixSecondJobRefused.)
func TestLeaseSharedByOneRun(t *testing.T) {
	b := realBrokers(t)
	const count = 4000
	topic := createTopic(t, b, 2)
	id := newJobID(t)
	srv, err := control.NewServer(control.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer srv.Stop()
	wg.Go(func() { _ = srv.Serve(lis) })

	workerLog := newCaptureHandler()
	worker, err := leaseJob(t, b, "", topic, count, slog.New(workerLog)).Build("lease-run")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	conn, err := control.Dial(ctx, lis.Addr().String(), "w1")
	if err != nil {
		t.Fatal(err)
	}
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	wg.Go(func() { _ = worker.ServeTasks(wctx, conn) })
	if err := srv.WaitWorkers(ctx, 1); err != nil {
		t.Fatal(err)
	}

	res, err := leaseJob(t, b, id, topic, count, stream.DiscardLogger(), stream.Placement(srv)).Execute(ctx, "lease-run")
	if err != nil {
		t.Fatalf("job: %v", err)
	}
	if res.Restarts != 0 {
		t.Errorf("%d restarts; want none", res.Restarts)
	}
	wcancel()
	deployed := false
	workerLog.mu.Lock()
	for _, r := range *workerLog.recs {
		deployed = deployed || strings.Contains(r.Message, "subtasks deployed")
	}
	workerLog.mu.Unlock()
	if !deployed {
		t.Fatal("no subtask ran on the worker: the test does not exercise two sink values")
	}
	checkIndexes(t, readCommitted(t, b, topic, count, 3*time.Second), count)
}
