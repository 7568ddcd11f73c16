package kafka_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-io/sluice/connectors/kafka"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// Example copies a topic to another one exactly once, then reads the copy
// back. It runs against kfake, franz-go's in-process cluster; pass real
// broker addresses the same way.
func Example() {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "in", "out"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	cl, _ := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("in"))
	for _, v := range []string{"a", "b", "c"} {
		cl.ProduceSync(ctx, kgo.StringRecord(v))
	}
	cl.Close()

	quiet := slog.New(slog.DiscardHandler)
	src, err := kafka.NewSource(brokers, kafka.StringDeserializer(),
		kafka.Topics("in"), kafka.Bounded(kafka.Latest()), kafka.SourceLogger(quiet))
	if err != nil {
		fmt.Println(err)
		return
	}
	sk, err := kafka.NewSink(brokers, kafka.StringSerializer(), kafka.DefaultTopic("out"),
		kafka.DeliveryGuarantee(kafka.ExactlyOnce), kafka.TransactionalIDPrefix("example-copy"),
		kafka.SinkLogger(quiet))
	if err != nil {
		fmt.Println(err)
		return
	}
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(100*time.Millisecond),
		stream.Logger(stream.DiscardLogger()))
	upper := stream.Map(stream.FromSource(env, src, watermark.None[string](), "in"),
		func(s string) string { return s + s })
	stream.SinkTo(upper, sk, "out")
	if _, err := env.Execute(ctx, "copy"); err != nil {
		fmt.Println(err)
		return
	}

	// Read the copy with the source too.
	back, _ := kafka.NewSource(brokers, kafka.StringDeserializer(),
		kafka.Topics("out"), kafka.Bounded(kafka.Latest()), kafka.SourceLogger(quiet))
	store := testsink.NewStore[string]()
	env2 := stream.New(stream.Parallelism(1), stream.Logger(stream.DiscardLogger()))
	stream.SinkTo(stream.FromSource(env2, back, watermark.None[string](), "out"), testsink.NewTwoPhase(store), "collect")
	if _, err := env2.Execute(ctx, "read"); err != nil {
		fmt.Println(err)
		return
	}
	got := store.Committed()
	slices.Sort(got)
	fmt.Println(got)

	// No transaction is left open.
	acl, _ := kgo.NewClient(kgo.SeedBrokers(brokers...))
	defer acl.Close()
	open, _ := kadm.NewClient(acl).ListTransactions(ctx, nil, []string{"Ongoing"})
	fmt.Println("open transactions:", len(open))
	// Output:
	// [aa bb cc]
	// open transactions: 0
}
