package registry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceFaulty writes n values {"id": i} to topic over its partitions,
// every i%100 == 13 cut short (malformed).
func produceFaulty(t *testing.T, brokers []string, topic string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range n {
		v := fmt.Sprintf(`{"id": %d}`, i)
		if i%100 == 13 {
			v = fmt.Sprintf(`{"id": %d`, i)
		}
		recs[i] = &kgo.Record{Value: []byte(v), Partition: int32(i % 2)}
	}
	if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestKafkaSourceDeadLetters: the kafka source with on-malformed:
// dead-letter emits a dead letter (topic-partition, offset, the value's
// bytes) in place of each value it cannot decode; routed to a second sink
// with failures injected into both sinks and restarts, main output + dead
// letters = input, each once.
func TestKafkaSourceDeadLetters(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "in"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 4000
	produceFaulty(t, c.ListenAddrs(), "in", n)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	log := engine.DiscardLogger()
	plan := faultinject.RandomPlan(7, 4, []faultinject.Kind{faultinject.WriterAfterRecords}, 2, n/2/2, 1)
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(20*time.Millisecond), stream.Logger(log),
		stream.Restart(restart.FixedDelay(10, 0)))
	src, _ := Default().Source("kafka")
	opts := NewOptions(map[string]any{"brokers": c.ListenAddrs(), "topics": []string{"in"}, "start": "earliest", "group": "",
		"bounded": true, "on-malformed": "dead-letter"})
	if !src.DeadLetters(opts) {
		t.Fatal("DeadLetters is false for on-malformed: dead-letter")
	}
	recs, err := src.Build(BuildContext{Env: env, Name: "from-kafka", Logger: log, Options: opts, DecodeValues: true})
	if err != nil {
		t.Fatal(err)
	}
	good := stream.Filter(recs, func(r Record) bool { _, dead := DeadLetterOf(r); return !dead }, stream.Name("good"))
	bad := stream.FlatMap(recs, func(r Record, emit func(Record)) {
		if d, ok := DeadLetterOf(r); ok {
			emit(d.Record())
		}
	}, stream.Name("bad"))
	mainStore, deadStore := testsink.NewStore[Record](), testsink.NewStore[Record]()
	stream.SinkTo(good, faultinject.WrapSink(testsink.NewTwoPhase(mainStore), plan), "main")
	stream.SinkTo(bad, testsink.NewTwoPhase(deadStore), "dead")
	res, err := env.Execute(ctx, "kafka-dead-letters")
	if err != nil {
		t.Fatalf("%v (fired %v)", err, plan.Fired())
	}
	seen := make([]int, n)
	for _, r := range mainStore.Committed() {
		seen[r.Value().(map[string]any)["id"].(int64)]++
	}
	for _, dr := range deadStore.Committed() {
		d, _ := dr.Object()
		raw, _ := d["raw"].(string)
		var id int
		if _, err := fmt.Sscanf(raw, `{"id": %d`, &id); err != nil || id%100 != 13 {
			t.Fatalf("dead letter %v", d)
		}
		if !strings.HasPrefix(d["split"].(string), "in-") || d["operator"] != "from-kafka" || !strings.Contains(d["error"].(string), "malformed") {
			t.Errorf("dead letter %v", d)
		}
		if _, ok := d["offset"].(int64); !ok {
			t.Errorf("dead letter %v has no offset", d)
		}
		seen[id]++
	}
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("record %d: %d times, want once", id, k)
		}
	}
	if len(plan.Fired()) == 0 || res.Restarts == 0 {
		t.Errorf("no injected failure fired (%v), %d restarts", plan.Fired(), res.Restarts)
	}
	t.Logf("fired %v, %d restarts", plan.Fired(), res.Restarts)
}

// TestKafkaSourceMalformedFailsWithoutRestart: under on-malformed: fail
// (the default) a value that is not JSON fails the job at once, although
// the strategy allows restarts, naming topic, partition and offset.
func TestKafkaSourceMalformedFailsWithoutRestart(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "in"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	produceFaulty(t, c.ListenAddrs(), "in", 50)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	log := engine.DiscardLogger()
	env := stream.New(stream.Logger(log), stream.Restart(restart.FixedDelay(3, 0)))
	src, _ := Default().Source("kafka")
	recs, err := src.Build(BuildContext{Env: env, Name: "from-kafka", Logger: log, Options: NewOptions(map[string]any{
		"brokers": c.ListenAddrs(), "topics": []string{"in"}, "start": "earliest", "group": "", "bounded": true, "on-malformed": "fail"})})
	if err != nil {
		t.Fatal(err)
	}
	stream.SinkTo(recs, testsink.NewTwoPhase(testsink.NewStore[Record]()), "main")
	res, err := env.Execute(ctx, "kafka-fail")
	if err == nil || !errors.Is(err, restart.ErrUnrecoverable) || !strings.Contains(err.Error(), `topic "in" partition 1 offset 6`) {
		t.Fatalf("got %v, want an unrecoverable error naming topic, partition and offset", err)
	}
	if res.Restarts != 0 {
		t.Errorf("%d restarts, want 0", res.Restarts)
	}
}
