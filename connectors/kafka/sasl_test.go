package kafka

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// TestSASL runs an exactly-once sink and a source with SASL/PLAIN and
// SCRAM against a kfake cluster that requires SASL, and checks that bad
// credentials fail with an error naming the failure.
func TestSASL(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.Ports(0), kfake.EnableSASL(), kfake.AllowAutoTopicCreation(),
		kfake.Superuser("PLAIN", "admin", "secret"), kfake.Superuser("SCRAM-SHA-256", "admin", "secret"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	run := func(auth SinkOption, srcAuth SourceOption) error {
		topic := "sasl-" + uniqueName("t")
		gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(100))
		sk, err := NewSink(brokers, indexSerializer(gen), DefaultTopic(topic), DeliveryGuarantee(ExactlyOnce),
			TransactionalIDPrefix(uniqueName("sasl")), SetupTimeout(5*time.Second), SinkLogger(quiet), auth,
			SinkClientOpts(kgoAllowAutoTopicCreation()))
		if err != nil {
			t.Fatal(err)
		}
		env := stream.New(stream.Parallelism(1), stream.CheckpointEvery(50*time.Millisecond), stream.Logger(stream.DiscardLogger()))
		stream.SinkTo(stream.FromSource(env, gen, watermark.None[int64](), "gen"), sk, "kafka")
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		if _, err := env.Execute(ctx, "sasl"); err != nil {
			return err
		}
		src, err := NewSource(brokers, StringDeserializer(), Topics(topic), Bounded(Latest()), SourceLogger(quiet), srcAuth)
		if err != nil {
			t.Fatal(err)
		}
		return runToStore(t, src, 1)
	}
	if err := run(SinkClientOpts(SASLPlain("admin", "secret")), SourceClientOpts(SASLPlain("admin", "secret"))); err != nil {
		t.Fatalf("SASL/PLAIN: %v", err)
	}
	if err := run(SinkClientOpts(SASLScram("admin", "secret", false)), SourceClientOpts(SASLScram("admin", "secret", false))); err != nil {
		t.Fatalf("SASL/SCRAM-SHA-256: %v", err)
	}
	err = run(SinkClientOpts(SASLPlain("admin", "wrong")), SourceClientOpts(SASLPlain("admin", "wrong")))
	// kfake drops the connection (EOF); Apache Kafka answers
	// SASL_AUTHENTICATION_FAILED. Either way the error names the broker.
	if err == nil || !strings.Contains(err.Error(), brokers[0]) {
		t.Fatalf("bad password: got %v, want an error naming broker %s", err, brokers[0])
	}
	t.Log(err)
}

func kgoAllowAutoTopicCreation() kgo.Opt { return kgo.AllowAutoTopicCreation() }
