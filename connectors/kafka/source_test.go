package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

var quiet = slog.New(slog.DiscardHandler)

// fillTopic writes the indexes 0..count-1 to topic, index i to partition
// i % partitions, in committed transactions of batch records each, with an
// aborted transaction of junk after every committed one.
func fillTopic(t *testing.T, brokers []string, topic string, partitions int32, count, batch int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cl := newClient(t, brokers, kgo.TransactionalID(uniqueName("fill")), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < count; {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for range batch {
			if i >= count {
				break
			}
			r := &kgo.Record{Key: []byte("p" + strconv.Itoa(i%int(partitions))), Value: strconv.AppendInt(nil, int64(i), 10), Partition: int32(i % int(partitions))}
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
			i++
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for p := range partitions {
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("junk"), Partition: p}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSourceBoundedReadCommitted reads a topic with committed and aborted
// transactions up to its end: every committed record once, in partition
// order, no aborted record.
func TestSourceBoundedReadCommitted(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		const count = 3000
		topic := createTopic(t, b.brokers, 3)
		fillTopic(t, b.brokers, topic, 3, count, 250)
		src, err := NewSource(b.brokers, RecordDeserializer(), Topics(topic), Bounded(Latest()), SourceLogger(quiet))
		if err != nil {
			t.Fatal(err)
		}
		store := testsink.NewStore[Record]()
		env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(50*time.Millisecond), stream.Logger(stream.DiscardLogger()))
		s := stream.FromSource(env, src, watermark.None[Record](), "kafka")
		stream.SinkTo(s, testsink.NewTwoPhase(store), "collect")
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		if _, err := env.Execute(ctx, "kafka-source-bounded"); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for _, r := range store.Committed() {
			recs = append(recs, &kgo.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value})
		}
		checkIndexes(t, recs, count)
	})
}

type keyed struct {
	Key string
	V   int64
}

// TestKafkaToKafkaExactlyOnce runs Kafka → map → Kafka (exactly-once)
// with injected failures of every kind and checks with a read_committed
// consumer that the output equals the input, in order per input partition.
func TestKafkaToKafkaExactlyOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, seed := range []int64{7, 8} {
			t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
				runKafkaToKafka(t, b, seed)
			})
		}
	})
}

func runKafkaToKafka(t *testing.T, b backend, seed int64) {
	const parallelism = 3
	count := 30_000
	if testing.Short() {
		count = 9_000
	}
	in := createTopic(t, b.brokers, 3)
	out := createTopic(t, b.brokers, 3)
	fillTopic(t, b.brokers, in, 3, count, 1000)
	plan := faultinject.RandomPlan(seed, 5, faultinject.Kinds(), parallelism, int64(count/parallelism/2), 8)
	t.Logf("plan %v", plan)
	src, err := NewSource(b.brokers, RecordDeserializer(), Topics(in), Bounded(Latest()), SourceLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	prefix := uniqueName("k2k")
	sk, err := NewSink(b.brokers, SerializerFunc[keyed](func(v keyed, r *kgo.Record) error {
		r.Key, r.Value = []byte(v.Key), strconv.AppendInt(nil, v.V, 10)
		return nil
	}), DefaultTopic(out), DeliveryGuarantee(ExactlyOnce), TransactionalIDPrefix(prefix),
		TransactionTimeout(time.Minute), SinkLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	env := stream.New(stream.Parallelism(parallelism), stream.CheckpointEvery(100*time.Millisecond),
		stream.Restart(restart.FixedDelay(10, 0)), stream.Logger(stream.DiscardLogger()))
	s := stream.FromSource(env, faultinject.WrapSource(src, plan), watermark.None[Record](), "in")
	m := stream.Map(s, func(r Record) keyed {
		v, _ := strconv.ParseInt(string(r.Value), 10, 64)
		return keyed{Key: string(r.Key), V: v}
	}, stream.Name("parse"))
	stream.SinkTo(m, faultinject.WrapSink(sk, plan), "out")
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	res, err := env.Execute(ctx, "kafka-to-kafka")
	if err != nil {
		t.Fatalf("job: %v (fired %v)", err, plan.Fired())
	}
	t.Logf("%d faults fired %v, %d restarts, %d checkpoints", len(plan.Fired()), plan.Fired(), res.Restarts, res.Checkpoints.Completed)
	recs := readCommitted(t, b.brokers, out, count, 3*time.Second)
	checkIndexes(t, recs, int64(count))
	checkNoOpenTransactions(t, b.brokers, prefix)
}

func TestSourceErrors(t *testing.T) {
	t.Run("config", func(t *testing.T) {
		cases := []struct {
			name string
			opts []SourceOption
		}{
			{"no topics", nil},
			{"two subscriptions", []SourceOption{Topics("a"), Partitions(map[string][]int32{"b": {0}})}},
			{"committed without group", []SourceOption{Topics("a"), StartingOffsets(Committed(Earliest()))}},
		}
		for _, c := range cases {
			_, err := NewSource([]string{"127.0.0.1:1"}, StringDeserializer(), c.opts...)
			if !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("%s: got %v, want ErrInvalidConfig", c.name, err)
			}
		}
	})
	forEachBackend(t, func(t *testing.T, b backend) {
		t.Run("missing topic", func(t *testing.T) {
			src, err := NewSource(b.brokers, StringDeserializer(), Topics("no-such-topic-"+uniqueName("x")), Bounded(Latest()), SourceLogger(quiet))
			if err != nil {
				t.Fatal(err)
			}
			err = runToStore(t, src, 1)
			if !errors.Is(err, ErrTopicNotFound) {
				t.Fatalf("got %v, want ErrTopicNotFound", err)
			}
			t.Log(err)
		})
		t.Run("malformed record", func(t *testing.T) {
			topic := createTopic(t, b.brokers, 1)
			cl := newClient(t, b.brokers, kgo.DefaultProduceTopic(topic))
			for _, v := range []string{`{"n":1}`, `not json`, `{"n":3}`} {
				if err := cl.ProduceSync(t.Context(), kgo.StringRecord(v)).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
			type doc struct{ N int }
			src, err := NewSource(b.brokers, JSONDeserializer[doc](), Topics(topic), Bounded(Latest()), SourceLogger(quiet))
			if err != nil {
				t.Fatal(err)
			}
			err = runToStore(t, src, 1)
			if !errors.Is(err, ErrMalformedRecord) {
				t.Fatalf("got %v, want ErrMalformedRecord", err)
			}
			t.Log(err)
			skip, err := NewSource(b.brokers, JSONDeserializer[doc](), Topics(topic), Bounded(Latest()),
				OnMalformedRecord(SkipOnError), SourceLogger(quiet))
			if err != nil {
				t.Fatal(err)
			}
			if err := runToStore(t, skip, 1); err != nil {
				t.Fatalf("skip policy: %v", err)
			}
		})
	})
}

func runToStore[T any](t *testing.T, src *Source[T], par int) error {
	t.Helper()
	store := testsink.NewStore[T]()
	env := stream.New(stream.Parallelism(par), stream.CheckpointEvery(50*time.Millisecond), stream.Logger(stream.DiscardLogger()))
	s := stream.FromSource(env, src, watermark.None[T](), "kafka")
	stream.SinkTo(s, testsink.NewTwoPhase(store), "collect")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := env.Execute(ctx, "kafka-source")
	return err
}
