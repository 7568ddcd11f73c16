package kafka

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
)

// countingRestarts is a restart strategy that allows three restarts and
// counts how often the runtime asked it.
type countingRestarts struct{ n *atomic.Int32 }

func (c countingRestarts) Next(attempt int) (time.Duration, bool) {
	c.n.Add(1)
	return 0, attempt <= 3
}
func (countingRestarts) String() string { return "counting" }

// TestSinkMissingTopicFailsAtStart writes to a topic that does not exist,
// without CreateTopic: the job fails at the writers' start with a
// *TopicNotFoundError naming the topic and the brokers and saying how to
// allow creation; it matches ErrTopicNotFound and restart.ErrUnrecoverable,
// and the job was not restarted (its restart strategy, which allows three
// restarts, was never asked). Before, the producer retried the unknown
// topic, the flush failed and the job restarted three times.
func TestSinkMissingTopicFailsAtStart(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		for _, g := range []Guarantee{AtLeastOnce, ExactlyOnce} {
			t.Run(g.String(), func(t *testing.T) {
				topic := uniqueName("missing")
				var restarts atomic.Int32
				env := genJob(t, b.brokers, newJobID(t), topic, 100, 1e6, countingRestarts{&restarts}, DeliveryGuarantee(g))
				ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
				defer cancel()
				_, err := env.Execute(ctx, "missing-topic")
				var tnf *TopicNotFoundError
				if !errors.As(err, &tnf) || !errors.Is(err, ErrTopicNotFound) || !errors.Is(err, restart.ErrUnrecoverable) {
					t.Fatalf("got %v, want a *TopicNotFoundError matching ErrTopicNotFound and restart.ErrUnrecoverable", err)
				}
				for _, want := range []string{`"` + topic + `"`, b.brokers[0], "CreateTopic", "topic-create: true"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error does not name %q: %v", want, err)
					}
				}
				if n := restarts.Load(); n != 0 {
					t.Errorf("the restart strategy was asked %d times, want 0 (no restart)", n)
				}
			})
		}
	})
}

// TestSinkCreateTopic lets three exactly-once writers (parallelism 2, two
// jobs at once on one topic) create a missing topic: all of them start
// (the losers of the race get TOPIC_ALREADY_EXISTS), the topic has the
// partitions and configs asked for, and each job's records are there
// exactly once.
func TestSinkCreateTopic(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		topic := uniqueName("created")
		const count = 2000
		opt := CreateTopic(3, 1, map[string]string{"retention.ms": "7200000"})
		envs := []*stream.Environment{
			genJob(t, b.brokers, newJobID(t), topic, count, 1e6, restart.None(), opt),
			genJob(t, b.brokers, newJobID(t), topic, count, 1e6, restart.None(), opt),
		}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		done := make(chan error, len(envs))
		for _, e := range envs {
			go func() { _, err := e.Execute(ctx, "create-topic"); done <- err }()
		}
		for range envs {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		adm := kadm.NewClient(newClient(t, b.brokers))
		td, err := adm.ListTopics(ctx, topic)
		if err != nil || td[topic].Err != nil {
			t.Fatalf("list topic: %v %v", err, td[topic].Err)
		}
		if n := len(td[topic].Partitions); n != 3 {
			t.Errorf("topic has %d partitions, want 3", n)
		}
		rcs, err := adm.DescribeTopicConfigs(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		rc, err := rcs.On(topic, nil)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, c := range rc.Configs {
			if c.Key == "retention.ms" && c.Value != nil {
				got = *c.Value
			}
		}
		if got != "7200000" {
			t.Errorf("retention.ms is %q, want 7200000", got)
		}
		recs := readCommitted(t, b.brokers, topic, 2*count, 2*time.Second)
		seen := map[string]int{}
		for _, r := range recs {
			seen[string(r.Value)]++
		}
		for v, n := range seen {
			if n != 2 {
				t.Fatalf("value %s read %d times, want 2 (once per job)", v, n)
			}
		}
		if len(seen) != count || len(recs) != 2*count {
			t.Fatalf("read %d records, %d distinct values; want %d and %d", len(recs), len(seen), 2*count, count)
		}
	})
}

// TestSinkCompressionAndAcks writes at least once with lz4 and acks=1 and
// reads the batches back with an independent consumer: the batches are
// lz4-compressed (or, where lz4 would not shrink one, uncompressed).
func TestSinkCompressionAndAcks(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		topic := createTopic(t, b.brokers, 2)
		const count = 500
		env := genJob(t, b.brokers, newJobID(t), topic, count, 1e6, restart.None(), DeliveryGuarantee(AtLeastOnce),
			ProducerCompression(LZ4Compression), ProducerAcks(LeaderAck), RecordPartitioner(RoundRobinPartitioner))
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if _, err := env.Execute(ctx, "lz4"); err != nil {
			t.Fatal(err)
		}
		recs := readCommitted(t, b.brokers, topic, count, 2*time.Second)
		if len(recs) < count {
			t.Fatalf("read %d records, want at least %d", len(recs), count)
		}
		// franz-go sends a batch uncompressed when compressing does not
		// shrink it (a batch of one small record, as round-robin makes at
		// the end): every batch is lz4 or uncompressed, and some are lz4.
		lz4 := 0
		for _, r := range recs {
			switch c := r.Attrs.CompressionType(); c {
			case 3:
				lz4++
			case 0:
			default:
				t.Fatalf("record at %d@%d has compression type %d, want 3 (lz4) or 0", r.Partition, r.Offset, c)
			}
		}
		if lz4 == 0 {
			t.Fatal("no record in an lz4 batch")
		}
	})
}

// TestSinkProducerOptionErrors checks the configuration errors of the
// producer options.
func TestSinkProducerOptionErrors(t *testing.T) {
	ser := BytesSerializer()
	cases := []struct {
		name string
		opts []SinkOption
		want string
	}{
		{"acks 1 exactly once", []SinkOption{DeliveryGuarantee(ExactlyOnce), ProducerAcks(LeaderAck)}, "ExactlyOnce needs AllAcks"},
		{"acks 0 exactly once", []SinkOption{DeliveryGuarantee(ExactlyOnce), ProducerAcks(NoAck)}, "ExactlyOnce needs AllAcks"},
		{"bad acks", []SinkOption{ProducerAcks(Acks(7))}, "ProducerAcks"},
		{"bad compression", []SinkOption{ProducerCompression("brotli")}, "ProducerCompression"},
		{"bad partitioner", []SinkOption{RecordPartitioner("fixed")}, "RecordPartitioner"},
		{"create without topic", []SinkOption{CreateTopic(1, 1, nil)}, "CreateTopic needs DefaultTopic"},
		{"zero partitions", []SinkOption{DefaultTopic("t"), CreateTopic(0, 1, nil)}, "partitions is 0"},
		{"zero replication", []SinkOption{DefaultTopic("t"), CreateTopic(1, 0, nil)}, "replication factor is 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewSink([]string{"127.0.0.1:1"}, ser, tc.opts...)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want ErrInvalidConfig naming %q", err, tc.want)
			}
		})
	}
	for _, ok := range [][]SinkOption{
		{DeliveryGuarantee(ExactlyOnce), ProducerAcks(AllAcks)},
		{DeliveryGuarantee(None), ProducerAcks(NoAck), ProducerCompression(ZstdCompression)},
		{DefaultTopic("t"), CreateTopic(-1, -1, nil), RecordPartitioner(HashKeyPartitioner)},
	} {
		if _, err := NewSink([]string{"127.0.0.1:1"}, ser, ok...); err != nil {
			t.Errorf("valid options refused: %v", err)
		}
	}
}
