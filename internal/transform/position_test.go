package transform

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/internal/registry"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// positionSteps are a rename (a step that builds a new record) and a
// filter that fails on every record without "amount" (dead letters).
func positionSteps(t *testing.T) []*Compiled {
	t.Helper()
	var steps []*Compiled
	for _, s := range []Step{
		{Kind: Rename, Name: "ren", Where: "p.yaml:3", Renames: [][2]string{{"n", "num"}}, OnError: registry.PolicyDeadLetter},
		{Kind: Filter, Name: "big", Where: "p.yaml:5", Expr: "amount >= 0", OnError: registry.PolicyDeadLetter},
	} {
		c, err := Compile(s)
		if err != nil {
			t.Fatal(err)
		}
		steps = append(steps, c)
	}
	if !NeedsPositions(steps) {
		t.Fatal("NeedsPositions is false for dead-letter steps")
	}
	return steps
}

// positionValue is input record i: every i%100 == 57 lacks "amount".
func positionValue(i int) string {
	if i%100 == 57 {
		return fmt.Sprintf(`{"id": %d, "n": 1}`, i)
	}
	return fmt.Sprintf(`{"id": %d, "n": 1, "amount": %d}`, i, i%1000)
}

// runPositions builds src (with Positions) → steps with policies → main
// and dead-letter two-phase sinks, the main one with failures injected,
// and returns what each committed.
func runPositions(t *testing.T, srcType string, opts map[string]any, n int) (main, dead []Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	log := stream.DiscardLogger()
	plan := faultinject.RandomPlan(11, 4, []faultinject.Kind{faultinject.WriterAfterRecords}, 2, int64(n/2/2), 1)
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(20*time.Millisecond), stream.Logger(log),
		stream.Restart(restart.FixedDelay(10, 0)))
	src, _ := registry.Default().Source(srcType)
	in, err := src.Build(registry.BuildContext{Env: env, Name: "in", Logger: log, Options: registry.NewOptions(opts), Positions: true})
	if err != nil {
		t.Fatal(err)
	}
	m, d := AddWithPolicies(in, positionSteps(t), PolicyOptions{Logger: log, DeadLetters: true})
	mainStore, deadStore := testsink.NewStore[Record](), testsink.NewStore[Record]()
	stream.SinkTo(m, faultinject.WrapSink(testsink.NewTwoPhase(mainStore), plan), "main")
	stream.SinkTo(d, testsink.NewTwoPhase(deadStore), "dead")
	res, err := env.Execute(ctx, "positions")
	if err != nil {
		t.Fatalf("%v (fired %v)", err, plan.Fired())
	}
	t.Logf("fired %v, %d restarts", plan.Fired(), res.Restarts)
	return mainStore.Committed(), deadStore.Committed()
}

// checkPositions checks main + dead letters = input, each once, that no
// main record carries a position, and that each dead letter names the
// position want gives for its record's id.
func checkPositions(t *testing.T, main, dead []Record, n int, want func(id int64) (split, file string, offset int64)) {
	t.Helper()
	seen := make([]int, n)
	for _, rr := range main {
		r := obj(rr)
		if len(r) != 3 || r["num"] != int64(1) {
			t.Fatalf("main record %v: want id, num, amount only", r)
		}
		seen[r["id"].(int64)]++
	}
	for _, dr := range dead {
		d := obj(dr)
		in, _ := d["record"].(Object)
		id, _ := in["id"].(int64)
		if d["operator"] != "big" || id%100 != 57 || len(in) != 2 {
			t.Fatalf("dead letter %v", d)
		}
		split, file, off := want(id)
		if d["split"] != split || d["offset"] != off || (file != "" && d["file"] != file) {
			t.Fatalf("dead letter %v: want split %q, file %q, offset %d", d, split, file, off)
		}
		seen[id]++
	}
	for id, k := range seen {
		if k != 1 {
			t.Fatalf("record %d: %d times, want once", id, k)
		}
	}
}

// TestTransformDeadLettersKafkaPosition: a dead letter of a transform
// names the topic-partition and offset of the Kafka record it failed on,
// and main output + dead letters = input, each once, under injected
// failures.
func TestTransformDeadLettersKafkaPosition(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "in"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 4000
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("in"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	recs := make([]*kgo.Record, n)
	for i := range n {
		recs[i] = &kgo.Record{Value: []byte(positionValue(i)), Partition: int32(i % 2)}
	}
	err = cl.ProduceSync(t.Context(), recs...).FirstErr()
	cl.Close()
	if err != nil {
		t.Fatal(err)
	}
	main, dead := runPositions(t, "kafka", map[string]any{"brokers": c.ListenAddrs(), "topics": []string{"in"}, "start": "earliest",
		"group": "", "bounded": true, "on-malformed": "fail"}, n)
	checkPositions(t, main, dead, n, func(id int64) (string, string, int64) {
		return fmt.Sprintf("in-%d", id%2), "", id / 2 // partition id%2 holds ids of that parity in order
	})
}

// TestTransformDeadLettersFilePosition: a dead letter of a transform names
// the file, split and byte offset of the line it failed on.
func TestTransformDeadLettersFilePosition(t *testing.T) {
	dir := t.TempDir()
	const n, files = 4000, 4
	offsets := map[int64]int64{}
	fileOf := map[int64]string{}
	per := n / files
	for f := range files {
		path := filepath.Join(dir, fmt.Sprintf("in-%d.jsonl", f))
		var b strings.Builder
		for i := f * per; i < (f+1)*per; i++ {
			offsets[int64(i)], fileOf[int64(i)] = int64(b.Len()), path
			b.WriteString(positionValue(i) + "\n")
		}
		if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	main, dead := runPositions(t, "file", map[string]any{"paths": []string{dir}, "discovery": time.Duration(0), "on-malformed": "fail"}, n)
	for _, dr := range dead {
		if s, _ := obj(dr)["split"].(string); s == "" {
			t.Fatalf("dead letter %v has no split", obj(dr))
		}
	}
	checkPositions(t, main, dead, n, func(id int64) (string, string, int64) {
		for _, dr := range dead {
			d := obj(dr)
			if d["record"].(Object)["id"] == id {
				return d["split"].(string), fileOf[id], offsets[id]
			}
		}
		return "", fileOf[id], offsets[id]
	})
}
