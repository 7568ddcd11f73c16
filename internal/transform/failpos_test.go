package transform

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/internal/registry"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// failPosBad is the one input record that lacks "amount": the filter
// fails on it.
const failPosBad = 1057

func failPosValue(i int) string {
	if i == failPosBad {
		return fmt.Sprintf(`{"id": %d, "n": 1}`, i)
	}
	return fmt.Sprintf(`{"id": %d, "n": 1, "amount": %d}`, i, i%1000)
}

// failPosSteps are a rename and a filter under fail (or, with mixed, the
// rename under dead-letter so that the pipeline goes through
// AddWithPolicies), as a CLI pipeline has them.
func failPosSteps(t *testing.T, mixed bool) []*Compiled {
	t.Helper()
	renPolicy := registry.PolicyFail
	if mixed {
		renPolicy = registry.PolicyDeadLetter
	}
	var steps []*Compiled
	for _, s := range []Step{
		{Kind: Rename, Name: "ren", Where: "p.yaml:3", Renames: [][2]string{{"n", "num"}}, OnError: renPolicy},
		{Kind: Filter, Name: "big", Where: "p.yaml:5", Expr: "amount >= 0"},
	} {
		steps = append(steps, mustCompile(t, s))
	}
	return steps
}

// runFailPos builds src with the positions the steps need → steps →
// a two-phase sink, with restarts allowed, and returns the job's result,
// what the sink committed and the job's error.
func runFailPos(t *testing.T, srcType string, opts map[string]any, steps []*Compiled, mixed bool) (*stream.Result, []Record, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	log := stream.DiscardLogger()
	env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(20*time.Millisecond), stream.Logger(log),
		stream.Restart(restart.FixedDelay(3, 0)))
	src, _ := registry.Default().Source(srcType)
	in, err := src.Build(registry.BuildContext{Env: env, Name: "in", Logger: log, Options: registry.NewOptions(opts),
		Positions: NeedsPositions(steps)})
	if err != nil {
		t.Fatal(err)
	}
	var out stream.DataStream[Record]
	if mixed {
		out, _ = AddWithPolicies(in, steps, PolicyOptions{Logger: log})
	} else {
		out = AddTo(in, steps)
	}
	store := testsink.NewStore[Record]()
	stream.SinkTo(out, testsink.NewTwoPhase(store), "sink")
	res, err := env.Execute(ctx, "failpos")
	return res, store.Committed(), err
}

// checkFailPos checks that the job failed at once (no restarts, an
// unrecoverable error) with the filter's *Error, which names the
// operator, where, the position and an excerpt of the record as the
// rename left it.
func checkFailPos(t *testing.T, res *stream.Result, err error, where string) {
	t.Helper()
	if err == nil {
		t.Fatal("the job did not fail")
	}
	if res != nil && res.Restarts != 0 {
		t.Errorf("%d restarts, want 0 (a failing record fails again)", res.Restarts)
	}
	if !errors.Is(err, restart.ErrUnrecoverable) {
		t.Errorf("%v is not restart.ErrUnrecoverable", err)
	}
	te, ok := errors.AsType[*Error](err)
	if !ok || te.Pos == nil {
		t.Fatalf("%v: want a *Error with the position", err)
	}
	want := fmt.Sprintf(`transform filter "big" (p.yaml:5) at %s: invalid operation: <nil> >= int`, where)
	if msg := err.Error(); !strings.Contains(msg, want) || !strings.Contains(msg, fmt.Sprintf(`record: {"id":%d,"num":1}`, failPosBad)) {
		t.Errorf("error %q\ndoes not contain %q and the record", msg, want)
	}
}

// checkNoPositions checks that every committed record is an input record
// as the rename makes it, without the position the source attached.
func checkNoPositions(t *testing.T, out []Record, n int) {
	t.Helper()
	seen := map[int64]bool{}
	for _, rr := range out {
		r := obj(rr)
		if len(r) != 3 || r["num"] != int64(1) {
			t.Fatalf("output record %v: want id, num, amount only", r)
		}
		seen[r["id"].(int64)] = true
	}
	if len(seen) != n {
		t.Fatalf("%d distinct records out, want %d", len(seen), n)
	}
}

func produceFailPos(t *testing.T, n int, skipBad bool) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "in"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("in"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var recs []*kgo.Record
	for i := range n {
		v := failPosValue(i)
		if skipBad && i == failPosBad {
			v = fmt.Sprintf(`{"id": %d, "n": 1, "amount": 1}`, i)
		}
		recs = append(recs, &kgo.Record{Value: []byte(v), Partition: int32(i % 2)})
	}
	if err := cl.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return c.ListenAddrs()
}

// TestFailNamesKafkaPosition: under on-error fail, a filter that fails
// on a Kafka record fails the job at once, without restarts, with an
// error naming the operator, the topic, partition and offset, and the
// record; through AddTo (every step fail) and AddWithPolicies (another
// step dead-letters). Without a failing record the output is the input,
// without positions.
func TestFailNamesKafkaPosition(t *testing.T) {
	const n = 2000
	for _, mixed := range []bool{false, true} {
		t.Run(fmt.Sprintf("mixed=%v", mixed), func(t *testing.T) {
			opts := map[string]any{"brokers": produceFailPos(t, n, false), "topics": []string{"in"}, "start": "earliest",
				"group": "", "bounded": true, "on-malformed": "fail"}
			res, _, err := runFailPos(t, "kafka", opts, failPosSteps(t, mixed), mixed)
			// Partition id%2 holds the ids of that parity in order.
			checkFailPos(t, res, err, fmt.Sprintf(`topic "in" partition %d offset %d`, failPosBad%2, failPosBad/2))
		})
	}
	t.Run("good", func(t *testing.T) {
		opts := map[string]any{"brokers": produceFailPos(t, n, true), "topics": []string{"in"}, "start": "earliest",
			"group": "", "bounded": true, "on-malformed": "fail"}
		_, out, err := runFailPos(t, "kafka", opts, failPosSteps(t, false), false)
		if err != nil {
			t.Fatal(err)
		}
		checkNoPositions(t, out, n)
	})
}

// TestFailNamesFilePosition: the same with the file source: the error
// names the file, the line and its byte offset.
func TestFailNamesFilePosition(t *testing.T) {
	const n, files = 2000, 2
	write := func(t *testing.T, skipBad bool) (dir, badFile string, badOffset int64) {
		dir = t.TempDir()
		per := n / files
		for f := range files {
			path := filepath.Join(dir, fmt.Sprintf("in-%d.jsonl", f))
			var b strings.Builder
			for i := f * per; i < (f+1)*per; i++ {
				v := failPosValue(i)
				if i == failPosBad {
					badFile, badOffset = path, int64(b.Len())
					if skipBad {
						v = fmt.Sprintf(`{"id": %d, "n": 1, "amount": 1}`, i)
					}
				}
				b.WriteString(v + "\n")
			}
			if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir, badFile, badOffset
	}
	for _, mixed := range []bool{false, true} {
		t.Run(fmt.Sprintf("mixed=%v", mixed), func(t *testing.T) {
			dir, file, off := write(t, false)
			res, _, err := runFailPos(t, "file", map[string]any{"paths": []string{dir}, "discovery": time.Duration(0)}, failPosSteps(t, mixed), mixed)
			// The bad record is line 58 of the second file (ids 1000…).
			checkFailPos(t, res, err, fmt.Sprintf("file %s line %d (offset %d)", file, failPosBad-n/files+1, off))
		})
	}
	t.Run("good", func(t *testing.T) {
		dir, _, _ := write(t, true)
		_, out, err := runFailPos(t, "file", map[string]any{"paths": []string{dir}, "discovery": time.Duration(0)}, failPosSteps(t, false), false)
		if err != nil {
			t.Fatal(err)
		}
		checkNoPositions(t, out, n)
	})
}

// TestNeedsPositions: only steps that never fail, under fail, do without
// positions.
func TestNeedsPositions(t *testing.T) {
	sel := mustCompile(t, Step{Kind: Select, Fields: []string{"a"}})
	ow := mustCompile(t, Step{Kind: Rename, Renames: [][2]string{{"a", "b"}}, Overwrite: true})
	rn := mustCompile(t, Step{Kind: Rename, Renames: [][2]string{{"a", "b"}}})
	fl := mustCompile(t, Step{Kind: Filter, Expr: "a > 1"})
	selSkip := mustCompile(t, Step{Kind: Select, Fields: []string{"a"}, OnError: registry.PolicySkip})
	for _, c := range []struct {
		steps []*Compiled
		want  bool
	}{
		{nil, false}, {[]*Compiled{sel, ow}, false}, {[]*Compiled{sel, rn}, true}, {[]*Compiled{fl}, true}, {[]*Compiled{selSkip}, true},
	} {
		if got := NeedsPositions(c.steps); got != c.want {
			t.Errorf("NeedsPositions(%v) = %v, want %v", c.steps, got, c.want)
		}
	}
}
