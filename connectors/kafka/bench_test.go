package kafka

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// BenchmarkKafkaToKafka compares Kafka → Kafka through sluice (exactly-once,
// at-least-once, none) with a hand-written franz-go consume →
// transactional-produce loop that commits as often as sluice checkpoints.
// One op is one 100-byte record; records/s is reported. It needs a real
// broker (SLUICE_KAFKA_BROKERS). Run it with a fixed record count, so that
// every variant copies the same input and start-up costs weigh the same:
//
//	go test -run XXX -bench KafkaToKafka -benchtime 300000x -count 10 ./connectors/kafka
func BenchmarkKafkaToKafka(b *testing.B) {
	v := os.Getenv(brokersEnv)
	if v == "" {
		b.Skipf("%s is not set", brokersEnv)
	}
	brokers := strings.Split(v, ",")
	const interval = 200 * time.Millisecond
	cases := []struct {
		name string
		run  func(b *testing.B, in, out string, n int)
	}{
		{"franz-go-loop-eos", func(b *testing.B, in, out string, n int) { handLoop(b, brokers, in, out, n, interval) }},
		{"sluice-eos", func(b *testing.B, in, out string, n int) { sluiceJob(b, brokers, in, out, ExactlyOnce, interval) }},
		{"sluice-at-least-once", func(b *testing.B, in, out string, n int) { sluiceJob(b, brokers, in, out, AtLeastOnce, interval) }},
		{"sluice-none", func(b *testing.B, in, out string, n int) { sluiceJob(b, brokers, in, out, None, interval) }},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			in, out := benchTopic(b, brokers), benchTopic(b, brokers)
			benchFill(b, brokers, in, b.N)
			b.ResetTimer()
			start := time.Now()
			c.run(b, in, out, b.N)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "records/s")
		})
	}
}

func benchClient(b *testing.B, brokers []string, opts ...kgo.Opt) *kgo.Client {
	b.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(cl.Close)
	return cl
}

func benchTopic(b *testing.B, brokers []string) string {
	b.Helper()
	name := uniqueName("bench")
	resp, err := kadm.NewClient(benchClient(b, brokers)).CreateTopic(b.Context(), 3, 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		b.Fatal(err)
	}
	// Wait (bounded) until the partitions are served: a producer that
	// gets NOT_LEADER_OR_FOLLOWER from a new topic waits for franz-go's
	// next metadata refresh (MetadataMinAge, 5s), which would land in the
	// timed part of a run.
	adm := kadm.NewClient(benchClient(b, brokers))
	for i := 0; !topicReady(b.Context(), adm, name, 3); i++ {
		if i == 100 {
			b.Fatalf("topic %s is not served after 5s", name)
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Cleanup(func() { // keep the broker's disk and log cleaner out of later runs
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
		if err != nil {
			return
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = kadm.NewClient(cl).DeleteTopics(ctx, name)
	})
	return name
}

// topicReady reports whether every partition's leader answers for it: a
// broker lists a new topic's leader in its metadata a moment before it
// serves the partition (NOT_LEADER_OR_FOLLOWER until then).
func topicReady(ctx context.Context, adm *kadm.Client, topic string, partitions int) bool {
	lo, err := adm.ListEndOffsets(ctx, topic)
	if err != nil || len(lo[topic]) != partitions {
		return false
	}
	ready := true
	lo.Each(func(o kadm.ListedOffset) { ready = ready && o.Err == nil })
	return ready
}

func benchFill(b *testing.B, brokers []string, topic string, n int) {
	b.Helper()
	cl := benchClient(b, brokers, kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond))
	val := bytes.Repeat([]byte("x"), 100)
	for range n {
		cl.Produce(b.Context(), &kgo.Record{Value: val}, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Error(err)
			}
		})
	}
	if err := cl.Flush(b.Context()); err != nil {
		b.Fatal(err)
	}
}

func sluiceJob(b *testing.B, brokers []string, in, out string, g Guarantee, interval time.Duration) {
	src, err := NewSource(brokers, BytesDeserializer(), Topics(in), Bounded(Latest()), SourceLogger(quiet))
	if err != nil {
		b.Fatal(err)
	}
	opts := []SinkOption{DefaultTopic(out), DeliveryGuarantee(g), SinkLogger(quiet)}
	if g == ExactlyOnce {
		opts = append(opts, TransactionalIDPrefix(uniqueName("bench")), TransactionTimeout(time.Minute))
	}
	sk, err := NewSink(brokers, BytesSerializer(), opts...)
	if err != nil {
		b.Fatal(err)
	}
	env := stream.New(stream.Parallelism(1), stream.CheckpointEvery(interval), stream.Logger(stream.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, src, watermark.None[[]byte](), "in"), sk, "out")
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Minute)
	defer cancel()
	if _, err := env.Execute(ctx, "bench"); err != nil {
		b.Fatal(err)
	}
}

// handLoop is the baseline: read_committed consumer, transactional
// producer, one transaction per interval, until n records are copied.
func handLoop(b *testing.B, brokers []string, in, out string, n int, interval time.Duration) {
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Minute)
	defer cancel()
	cons := benchClient(b, brokers, kgo.ConsumeTopics(in), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(500*time.Millisecond))
	// The producer batches as the sink's producers do (ProducerLinger 0,
	// 100k buffered records; franz-go's defaults are 10ms and 50k).
	prod := benchClient(b, brokers, kgo.TransactionalID(uniqueName("hand")), kgo.DefaultProduceTopic(out),
		kgo.TransactionTimeout(time.Minute), kgo.ProducerLinger(0), kgo.MaxBufferedRecords(100_000))
	var failed error
	done := 0
	for done < n && ctx.Err() == nil {
		if err := prod.BeginTransaction(); err != nil {
			b.Fatal(err)
		}
		end := time.Now().Add(interval)
		for done < n && time.Now().Before(end) && ctx.Err() == nil {
			fs := cons.PollRecords(ctx, 2000)
			fs.EachRecord(func(r *kgo.Record) {
				prod.Produce(ctx, &kgo.Record{Value: r.Value}, func(_ *kgo.Record, err error) {
					if err != nil && failed == nil {
						failed = err
					}
				})
				done++
			})
		}
		if err := prod.Flush(ctx); err != nil {
			b.Fatal(err)
		}
		if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
			b.Fatal(err)
		}
	}
	if failed != nil {
		b.Fatal(failed)
	}
}
