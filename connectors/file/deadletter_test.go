package file

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// writeFaultyInput writes files of JSON lines {"id": N} for N from 0, of
// which every N%100 == 13 is malformed (cut short) and every N%100 == 57
// carries "fail": true. It returns the number of records.
func writeFaultyInput(t *testing.T, dir string, files, lines int) int64 {
	t.Helper()
	n := int64(0)
	for f := range files {
		var b strings.Builder
		for range lines {
			switch n % 100 {
			case 13:
				fmt.Fprintf(&b, "{\"id\": %d, \"cut\n", n)
			case 57:
				fmt.Fprintf(&b, "{\"id\": %d, \"fail\": true}\n", n)
			default:
				fmt.Fprintf(&b, "{\"id\": %d}\n", n)
			}
			n++
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("in-%02d.jsonl", f)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

type jrec = map[string]any

// item is a record or a dead letter (the side output's record).
type item struct {
	id   int64
	dead string // "" for a good record
}

var rawID = regexp.MustCompile(`^\{"id": (\d+),`)

// TestDeadLettersExactlyOnce reads files with 1% malformed lines (emitted
// as dead letters by the source, EmitMalformed) and 1% records that fail
// a transform (routed to the dead letters by the transform), at
// parallelism 3 in small blocks, with seeded failures of every kind in the
// source, the main sink and the dead-letter sink, and restarts: the main
// output plus the dead letters equal the input, each record once, and the
// dead letters are exactly the bad records.
func TestDeadLettersExactlyOnce(t *testing.T) {
	seeds := []int64{1, 2, 3}
	files, lines := 24, 2500
	if testing.Short() {
		seeds, files = seeds[:1], 6
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			in := t.TempDir()
			total := writeFaultyInput(t, in, files, lines)
			const par = 3
			plan := faultinject.RandomPlan(seed, 6, faultinject.Kinds(), par, total/par/2, 4)
			side := faultinject.RandomPlan(seed+50, 3, faultinject.Kinds(), par, total/par/200, 4)
			src := NewSource(JSONLines[jrec](), []string{in}, BlockSize(4<<10), ReadBatchSize(64),
				OnMalformed(EmitMalformed), MalformedAs(func(m Malformed) jrec {
					return jrec{"dead": "malformed: " + m.Err.Error(), "raw": string(m.Raw), "split": m.Split, "offset": m.Offset}
				}))
			if err := src.Err(); err != nil {
				t.Fatal(err)
			}
			env := stream.New(stream.Parallelism(par), stream.CheckpointEvery(5*time.Millisecond),
				stream.Restart(restart.FixedDelay(10, 0)), stream.Logger(stream.DiscardLogger()))
			s := stream.FromSource(env, faultinject.WrapSource[jrec](src, plan), watermark.None[jrec](), "files")
			items := stream.Map(s, func(r jrec) item {
				if d, ok := r["dead"].(string); ok {
					m := rawID.FindStringSubmatch(r["raw"].(string))
					if m == nil {
						return item{-1, d}
					}
					id, _ := strconv.ParseInt(m[1], 10, 64)
					return item{id, d}
				}
				id := r["id"].(int64)
				if r["fail"] == true {
					return item{id, "transform failed"}
				}
				return item{id: id}
			}, stream.Name("transform"))
			good := stream.FlatMap(items, func(it item, emit func(int64)) {
				if it.dead == "" {
					emit(it.id)
				}
			}, stream.Name("main"))
			bad := stream.FlatMap(items, func(it item, emit func(item)) {
				if it.dead != "" {
					emit(it)
				}
			}, stream.Name("dead-letters"))
			mainStore, deadStore := testsink.NewStore[int64](), testsink.NewStore[item]()
			stream.SinkTo(good, faultinject.WrapSink(testsink.NewTwoPhase(mainStore), plan), "out")
			stream.SinkTo(bad, faultinject.WrapSink(testsink.NewTwoPhase(deadStore), side), "dead")
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			res, err := env.Execute(ctx, "dead-letters")
			if err != nil {
				t.Fatalf("%v (fired %v, %v)", err, plan.Fired(), side.Fired())
			}
			seen := make([]int, total)
			for _, id := range mainStore.Committed() {
				if id%100 == 13 || id%100 == 57 {
					t.Fatalf("bad record %d in the main output", id)
				}
				seen[id]++
			}
			var malformed, failed int
			for _, it := range deadStore.Committed() {
				switch {
				case it.id < 0:
					t.Fatalf("dead letter without an id: %+v", it)
				case it.id%100 == 13 && strings.HasPrefix(it.dead, "malformed: ") && strings.Contains(it.dead, "JSON line"):
					malformed++
				case it.id%100 == 57 && it.dead == "transform failed":
					failed++
				default:
					t.Fatalf("unexpected dead letter %+v", it)
				}
				seen[it.id]++
			}
			for id, n := range seen {
				if n != 1 {
					t.Fatalf("record %d is in the outputs %d times, want once", id, n)
				}
			}
			if want := int(total / 100); malformed != want || failed != want {
				t.Errorf("%d malformed and %d failed dead letters, want %d each", malformed, failed, want)
			}
			if st := append(mainStore.Staged(), deadStore.Staged()...); len(st) > 0 {
				t.Errorf("transactions left staged: %v", st)
			}
			t.Logf("fired %v and %v; %d restarts, %d checkpoints", plan.Fired(), side.Fired(), res.Restarts, res.Checkpoints.Completed)
		})
	}
}

// TestMalformedFailsWithoutRestart: under FailOnMalformed a malformed line
// fails the job at once although the strategy allows restarts (the line
// would fail every restart), with an error naming file, line and an
// excerpt of the record.
func TestMalformedFailsWithoutRestart(t *testing.T) {
	in := t.TempDir()
	p := filepath.Join(in, "a.jsonl")
	if err := os.WriteFile(p, []byte("{\"id\": 1}\n{\"id\": 2, \"secretless but bad\n{\"id\": 3}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := stream.New(stream.Restart(restart.FixedDelay(3, 0)), stream.Logger(stream.DiscardLogger()))
	s := stream.FromSource(env, NewSource(JSONLines[jrec](), []string{in}), watermark.None[jrec](), "files")
	stream.SinkTo(s, testsink.NewTwoPhase(testsink.NewStore[jrec]()), "out")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := env.Execute(ctx, "fail")
	if err == nil {
		t.Fatal("job succeeded")
	}
	if !errors.Is(err, restart.ErrUnrecoverable) || !errors.Is(err, ErrMalformed) {
		t.Errorf("error %v: want ErrMalformed and restart.ErrUnrecoverable", err)
	}
	for _, want := range []string{"a.jsonl line 2", `record: "{\"id\": 2, \"secretless but bad"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
	if res.Restarts != 0 {
		t.Errorf("%d restarts, want 0", res.Restarts)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestSkipMalformedLogsRateLimited: skipped records are counted in
// numRecordsInErrors and logged with file, split and offset, but not once
// per record.
func TestSkipMalformedLogsRateLimited(t *testing.T) {
	in := t.TempDir()
	total := writeFaultyInput(t, in, 1, 5000)
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	store := testsink.NewStore[jrec]()
	env := stream.New(stream.Logger(stream.DiscardLogger()))
	s := stream.FromSource(env, NewSource(JSONLines[jrec](), []string{in}, OnMalformed(SkipMalformed), SourceLogger(log)), watermark.None[jrec](), "files")
	stream.SinkTo(s, testsink.NewTwoPhase(store), "out")
	res, err := env.Execute(t.Context(), "skip")
	if err != nil {
		t.Fatal(err)
	}
	if n, want := res.Counter("numRecordsInErrors"), total/100; n != want {
		t.Errorf("numRecordsInErrors = %d, want %d", n, want)
	}
	if got, want := int64(len(store.Committed())), total-total/100; got != want {
		t.Errorf("%d records, want %d", got, want)
	}
	warnings := strings.Count(logs.String(), "skipped a malformed record")
	if warnings < 1 || int64(warnings) >= total/100 {
		t.Errorf("%d warnings for %d skipped records, want at least 1 and fewer than one per record:\n%s", warnings, total/100, logs.String())
	}
	if !strings.Contains(logs.String(), "offset=1") || !strings.Contains(logs.String(), "in-00.jsonl") {
		t.Errorf("the warning names no position:\n%s", logs.String())
	}
}
