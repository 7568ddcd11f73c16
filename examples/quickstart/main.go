// Command quickstart runs sluice's main demonstration job on embedded
// defaults, with nothing installed: a deterministic generator feeds a map
// and a rebalance into a two-phase-commit sink at parallelism 4, with a
// checkpoint every 100 ms. Two failures are injected on the way — a reader
// crashes mid-stream, and a committer crashes between prepare and commit —
// and the job recovers from its latest checkpoint each time. At the end
// the program checks that the sink's committed output equals the input:
// every record present, none twice.
//
//	go run ./examples/quickstart [-records N] [-parallelism P] [-dir DIR]
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"github.com/sluice-io/sluice/connectors/datagen"
	"github.com/sluice-io/sluice/connectors/testsink"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/metrics"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// Order is the record the job moves.
type Order struct {
	ID     int64
	Amount int64 // cents
}

func main() {
	records := flag.Int64("records", 1_000_000, "records to generate")
	parallelism := flag.Int("parallelism", 4, "parallelism of every operator")
	dir := flag.String("dir", "", "checkpoint directory (default: a new temporary directory)")
	flag.Parse()
	if err := run(*records, *parallelism, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(n int64, p int, dir string) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "sluice-quickstart-")
		if err != nil {
			return err
		}
		dir = d
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	plan := faultinject.NewPlan(
		faultinject.Fault{Kind: faultinject.AfterRecords, Subtask: 1, Records: n / int64(p) / 3},
		faultinject.Fault{Kind: faultinject.BeforeCommit, Subtask: 2, Checkpoint: 3},
	)
	store := testsink.NewStore[Order]()
	reg := metrics.NewRegistry()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	env := stream.New(
		stream.Parallelism(p),
		stream.CheckpointEvery(100*time.Millisecond),
		stream.CheckpointDir(dir),
		stream.Restart(restart.FixedDelay(5, 100*time.Millisecond)),
		stream.Metrics(reg),
		stream.Logger(log),
	)
	gen := datagen.New(func(i int64) int64 { return i }, datagen.Count(n), datagen.Splits(2*p),
		datagen.RatePerSecond(float64(n)/2)) // about two seconds of input
	ids := stream.FromSource(env, faultinject.WrapSource(gen, plan), watermark.None[int64](), "generator")
	orders := stream.Map(ids, func(i int64) Order { return Order{ID: i, Amount: i % 10_000} }, stream.Name("to-order"))
	stream.SinkTo(stream.Rebalance(orders), faultinject.WrapSink(testsink.NewTwoPhase(store), plan), "two-phase-sink")

	fmt.Printf("sluice quickstart: %d records, parallelism %d, checkpoints every 100ms in %s\n", n, p, dir)
	fmt.Printf("injected failures: %v\n", plan)
	start := time.Now()
	h, err := env.Start(ctx, "quickstart")
	if err != nil {
		return err
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	var lastIn int64
	for done := false; !done; {
		select {
		case <-h.Done():
			done = true
		case <-tick.C:
			in := reg.Sum(metrics.NumRecordsIn, "operator", "generator")
			st := h.Status()
			fmt.Printf("  %-10s records in %9d (%7.0f/s)  checkpoints %3d  restarts %d\n",
				st.State, in, float64(in-lastIn)/0.5, st.Checkpoints.Completed, st.Restarts)
			lastIn = in
		}
	}
	res, err := h.Wait()
	if err != nil {
		return err
	}
	got := store.Committed()
	seen := make([]int, n)
	missing, dups := 0, 0
	for _, o := range got {
		seen[o.ID]++
	}
	for _, c := range seen {
		switch {
		case c == 0:
			missing++
		case c > 1:
			dups += c - 1
		}
	}
	fmt.Printf("finished in %s: %d checkpoints, %d restarts (%d injected failures fired)\n",
		time.Since(start).Round(time.Millisecond), res.Checkpoints.Completed, res.Restarts, len(plan.Fired()))
	for _, f := range res.Failures {
		fmt.Printf("  recovered from: %v\n", f)
	}
	fmt.Printf("committed %d records: %d missing, %d duplicated, %d transactions left open\n",
		len(got), missing, dups, len(store.Staged()))
	if missing > 0 || dups > 0 || int64(len(got)) != n {
		return fmt.Errorf("output does not equal input")
	}
	fmt.Println("output equals input: exactly once.")
	return nil
}
