package kafka

import (
	"context"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// ownBroker is a broker of this test alone, started by scripts/kafka.sh in
// a run dir of its own, so that the test may kill and restart it without
// failing the tests of other packages that share the suite's broker (go
// test runs packages in parallel).
type ownBroker struct {
	script, run string
	brokers     []string
}

// startOwnBroker starts one; it is stopped when t ends. The real tier must
// be enabled (SLUICE_KAFKA_BROKERS set), since it needs Java and the jars.
func startOwnBroker(t *testing.T) *ownBroker {
	t.Helper()
	realBrokers(t)
	script, err := filepath.Abs(filepath.Join("..", "..", "scripts", "kafka.sh"))
	if err != nil {
		t.Fatal(err)
	}
	run, err := os.MkdirTemp("", "sluice-kafka-own.")
	if err != nil {
		t.Fatal(err)
	}
	b := &ownBroker{script: script, run: run}
	out, err := b.cmd(t.Context(), "start").Output()
	t.Cleanup(func() {
		if out, err := b.cmd(context.Background(), "stop").CombinedOutput(); err != nil {
			t.Logf("stop the test's own broker: %v: %s", err, out)
		}
	})
	if err != nil {
		t.Fatalf("start a broker of the test's own: %v: %s", err, out)
	}
	for l := range strings.Lines(string(out)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "SLUICE_KAFKA_BROKERS="); ok {
			b.brokers = strings.Split(v, ",")
		}
	}
	if len(b.brokers) == 0 {
		t.Fatalf("scripts/kafka.sh start printed no SLUICE_KAFKA_BROKERS: %s", out)
	}
	return b
}

// cmd runs scripts/kafka.sh arg on this broker's run dir.
func (b *ownBroker) cmd(ctx context.Context, arg string) *exec.Cmd {
	c := exec.CommandContext(ctx, b.script, arg)
	c.Env = append(os.Environ(), "SLUICE_KAFKA_RUN="+b.run)
	return c
}

// TestAcceptanceKafkaToKafka is the end-to-end check on the real
// broker: Kafka → map → Kafka exactly-once, 3 input partitions, parallelism
// 3, 200k records, checkpoints every 200 ms, at least 5 injected task
// failures and one broker kill -9 and restart. A read_committed consumer of
// the output must see exactly the input, in order per input partition, and
// no transaction of the sink may remain open.
func TestAcceptanceKafkaToKafka(t *testing.T) {
	if testing.Short() {
		t.Skip("long: skipped with -short")
	}
	own := startOwnBroker(t)
	brokers := own.brokers
	const count, parallelism = 200_000, 3
	in, out := createTopic(t, brokers, 3), createTopic(t, brokers, 3)
	fillTopic(t, brokers, in, 3, count, 5000)
	plan := faultinject.NewPlan(
		faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: 0, Records: 20_000},
		faultinject.Fault{Kind: faultinject.WriterAfterRecords, Subtask: 1, Records: 15_000},
		faultinject.Fault{Kind: faultinject.DuringSnapshot, Subtask: 2, Checkpoint: 6},
		faultinject.Fault{Kind: faultinject.BeforeCommit, Subtask: 0, Checkpoint: 10},
		faultinject.Fault{Kind: faultinject.DuringCommit, Subtask: 1, Checkpoint: 14},
		faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: 2, Records: 30_000},
		faultinject.Fault{Kind: faultinject.WriterAfterRecords, Subtask: 2, Records: 10_000},
		faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: 1, Records: 12_000},
	)
	src, err := NewSource(brokers, RecordDeserializer(), Topics(in), Bounded(Latest()), SourceLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	prefix := uniqueName("accept")
	sk, err := NewSink(brokers, SerializerFunc[keyed](func(v keyed, r *kgo.Record) error {
		r.Key, r.Value = []byte(v.Key), strconv.AppendInt(nil, v.V, 10)
		return nil
	}), DefaultTopic(out), DeliveryGuarantee(ExactlyOnce), TransactionalIDPrefix(prefix),
		TransactionTimeout(time.Minute), SinkLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	env := stream.New(stream.Parallelism(parallelism), stream.CheckpointEvery(200*time.Millisecond),
		stream.Restart(restart.Exponential(100*time.Millisecond, 2*time.Second, 60)), stream.Logger(stream.DiscardLogger()))
	s := stream.FromSource(env, faultinject.WrapSource(src, plan), watermark.None[Record](), "in")
	var n atomic.Int64
	m := stream.Map(s, func(r Record) keyed {
		// Slow the job to several seconds so that the broker dies mid-run.
		if n.Add(1)%50 == 0 {
			time.Sleep(time.Millisecond)
		}
		v, _ := strconv.ParseInt(string(r.Value), 10, 64)
		return keyed{Key: string(r.Key), V: v}
	}, stream.Name("parse"))
	stream.SinkTo(m, faultinject.WrapSink(sk, plan), "out")

	// Kill -9 the broker once a fifth of the output is committed, restart it
	// a second later.
	var wg sync.WaitGroup
	killed := make(chan error, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	wg.Add(1)
	go func() {
		defer wg.Done()
		killed <- killBrokerMidway(ctx, own, out, count/5)
	}()
	// A concurrent read_committed consumer must never stall for longer
	// than the transaction timeout.
	watchCtx, stopWatch := context.WithCancel(ctx)
	maxGap := make(chan time.Duration, 1)
	go func() { maxGap <- watchProgress(watchCtx, brokers, out, count) }()
	res, err := env.Execute(ctx, "acceptance")
	wg.Wait()
	stopWatch()
	gap := <-maxGap
	t.Logf("longest stall of a concurrent read_committed consumer: %v (transaction timeout %v)", gap, time.Minute)
	if gap >= time.Minute {
		t.Errorf("a read_committed consumer stalled for %v, longer than the transaction timeout", gap)
	}
	if kerr := <-killed; kerr != nil {
		t.Fatalf("broker kill/restart: %v", kerr)
	}
	if err != nil {
		t.Fatalf("job: %v (fired %v)", err, plan.Fired())
	}
	t.Logf("%d faults fired %v; %d restarts; %d checkpoints", len(plan.Fired()), plan.Fired(), res.Restarts, res.Checkpoints.Completed)
	for i, f := range res.Failures {
		t.Logf("failure %d: %v", i, f)
	}
	if len(plan.Fired()) < 5 || res.Restarts < 5 {
		t.Errorf("%d injected failures fired and %d restarts, want at least 5 each", len(plan.Fired()), res.Restarts)
	}
	recs := readCommitted(t, brokers, out, count, 5*time.Second)
	checkIndexes(t, recs, count)
	checkNoOpenTransactions(t, brokers, prefix)
}

func killBrokerMidway(ctx context.Context, own *ownBroker, topic string, after int64) error {
	brokers := own.brokers
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	adm := kadm.NewClient(cl)
	for i := 0; i < 1200 && ctx.Err() == nil; i++ {
		lo, err := adm.ListCommittedOffsets(ctx, topic)
		var total int64
		if err == nil {
			lo.Each(func(o kadm.ListedOffset) { total += o.Offset })
		}
		if total >= after {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cl.Close()
	log.Printf("acceptance: kill -9 the broker")
	if out, err := own.cmd(ctx, "kill9").CombinedOutput(); err != nil {
		return &exec.ExitError{Stderr: out}
	}
	time.Sleep(time.Second)
	if out, err := own.cmd(context.Background(), "restart").CombinedOutput(); err != nil {
		return &scriptError{out: string(out), err: err}
	}
	log.Printf("acceptance: broker restarted")
	return nil
}

type scriptError struct {
	out string
	err error
}

func (e *scriptError) Error() string { return e.err.Error() + ": " + e.out }

// watchProgress consumes topic read_committed until it has count records
// or ctx is done, and returns the longest time without a new record.
func watchProgress(ctx context.Context, brokers []string, topic string, count int) time.Duration {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return 0
	}
	defer cl.Close()
	var longest time.Duration
	last := time.Now()
	for n := 0; n < count && ctx.Err() == nil; {
		fs := cl.PollFetches(ctx)
		now := time.Now()
		if k := fs.NumRecords(); k > 0 {
			n += k
			if now.Sub(last) > 3*time.Second {
				log.Printf("acceptance: consumer stalled %v", now.Sub(last))
			}
			longest = max(longest, now.Sub(last))
			last = now
		}
	}
	return longest
}
