package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/internal/engine"
	"github.com/sluice-io/sluice/stream"
	"github.com/twmb/franz-go/pkg/kfake"
)

// TestKafkaRoundTrip runs the registered kafka sink and source against an
// in-process Kafka (kfake): datagen → kafka (exactly-once), then kafka
// (bounded) → print; every record comes back once.
func TestKafkaRoundTrip(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	log := engine.DiscardLogger()

	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(50*time.Millisecond), stream.Logger(log))
	gen, _ := Default().Source("datagen")
	in, err := gen.Build(BuildContext{Env: env, Name: "gen", Logger: log,
		Options: NewOptions(map[string]any{"count": int64(500), "splits": int64(2), "rate": float64(0)})})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := Default().Sink("kafka")
	if err := out.Build(BuildContext{Env: env, Name: "to-kafka", Logger: log, Delivery: ExactlyOnce,
		Options: NewOptions(map[string]any{"brokers": brokers, "topic": "out", "transactional-id-prefix": ""})}, in); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Execute(ctx, "write"); err != nil {
		t.Fatal(err)
	}

	env = stream.New(stream.Parallelism(2), stream.Logger(log))
	src, _ := Default().Source("kafka")
	recs, err := src.Build(BuildContext{Env: env, Name: "from-kafka", Logger: log,
		Options: NewOptions(map[string]any{"brokers": brokers, "topics": []string{"out"}, "start": "earliest", "group": "", "bounded": true})})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	pr, _ := Default().Sink("print")
	if err := pr.Build(BuildContext{Env: env, Name: "print", Logger: log, Stdout: &buf, Options: NewOptions(map[string]any{})}, recs); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Execute(ctx, "read"); err != nil {
		t.Fatal(err)
	}
	seen := map[float64]int{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var r map[string]any // lines are "<subtask>> {json}" at parallelism 2
		if err := json.Unmarshal([]byte(line[strings.Index(line, "{"):]), &r); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		seen[r["id"].(float64)]++
	}
	for id := range 500 {
		if seen[float64(id)] != 1 {
			t.Fatalf("record %d read %d times, want once (%d distinct records read)", id, seen[float64(id)], len(seen))
		}
	}
}
