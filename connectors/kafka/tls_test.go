package kafka

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/internal/testutil/testcerts"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// TestTLS runs an exactly-once sink and a bounded source over TLS against
// a kfake cluster listening with a self-signed certificate, then checks
// that clients trusting another CA fail with an error naming the broker and
// the certificate problem.
func TestTLS(t *testing.T) {
	ca := testcerts.NewCA(t, "sluice-test-ca")
	cert, pool := ca.Issue(t, "sluice-test-broker", x509.ExtKeyUsageServerAuth).TLS, ca.Pool()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0), kfake.AllowAutoTopicCreation(),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	good := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}

	t.Run("trusted", func(t *testing.T) {
		const count = 300
		topic := "tls-" + uniqueName("t")
		sinkOpts := []SinkOption{SinkClientOpts(TLS(good), kgoAllowAutoTopicCreation()), SetupTimeout(30 * time.Second)}
		produceIndexes(t, brokers, topic, count, sinkOpts...)
		src, err := NewSource(brokers, RecordDeserializer(), Topics(topic), Bounded(Latest()), SourceLogger(quiet),
			SourceClientOpts(TLS(good)))
		if err != nil {
			t.Fatal(err)
		}
		recs := readSource(t, src, 2)
		checkIndexes(t, recs, count)
	})

	t.Run("wrong CA", func(t *testing.T) {
		otherPool := testcerts.NewCA(t, "some-other-ca").Pool()
		bad := &tls.Config{RootCAs: otherPool, MinVersion: tls.VersionTLS12}
		topic := "tls-" + uniqueName("t")
		err := produceIndexesErr(t, brokers, topic, 10, SinkClientOpts(TLS(bad), kgoAllowAutoTopicCreation()),
			SetupTimeout(30*time.Second))
		checkTLSError(t, "sink", err, brokers[0])
		src, err := NewSource(brokers, StringDeserializer(), Topics(topic), Bounded(Latest()), SourceLogger(quiet),
			SourceClientOpts(TLS(bad)))
		if err != nil {
			t.Fatal(err)
		}
		checkTLSError(t, "source", runToStore(t, src, 1), brokers[0])
	})
}

func checkTLSError(t *testing.T, what string, err error, broker string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s with a wrong CA: no error", what)
	}
	msg := err.Error()
	if !strings.Contains(msg, broker) || !strings.Contains(msg, "certificate") {
		t.Fatalf("%s with a wrong CA: got %q, want an error naming broker %s and the certificate problem", what, msg, broker)
	}
	t.Logf("%s: %v", what, err)
}

// produceIndexesErr writes 0..count-1 to topic with an exactly-once sink
// (two splits, parallelism 2) and returns the job's error.
func produceIndexesErr(t *testing.T, brokers []string, topic string, count int64, opts ...SinkOption) error {
	t.Helper()
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(count), datagen.Splits(2))
	sk, err := NewSink(brokers, indexSerializer(gen), append([]SinkOption{DefaultTopic(topic), DeliveryGuarantee(ExactlyOnce),
		TransactionalIDPrefix(uniqueName("tls")), TransactionTimeout(2 * time.Minute), SinkLogger(quiet)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(50*time.Millisecond), stream.Logger(stream.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, gen, watermark.None[int64](), "gen"), sk, "kafka")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err = env.Execute(ctx, "produce-indexes")
	return err
}

func produceIndexes(t *testing.T, brokers []string, topic string, count int64, opts ...SinkOption) {
	t.Helper()
	if err := produceIndexesErr(t, brokers, topic, count, opts...); err != nil {
		t.Fatalf("sink job: %v", err)
	}
}

// readSource runs src (bounded) to its end and returns what it read.
func readSource(t *testing.T, src *Source[Record], par int) []*kgo.Record {
	t.Helper()
	store := testsink.NewStore[Record]()
	env := stream.New(stream.Parallelism(par), stream.CheckpointEvery(50*time.Millisecond), stream.Logger(stream.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env, src, watermark.None[Record](), "kafka"), testsink.NewTwoPhase(store), "collect")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := env.Execute(ctx, "read-source"); err != nil {
		t.Fatalf("source job: %v", err)
	}
	var recs []*kgo.Record
	for _, r := range store.Committed() {
		recs = append(recs, &kgo.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value})
	}
	return recs
}
