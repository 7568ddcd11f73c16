package file

import (
	"fmt"
	"testing"

	"github.com/sluice-io/sluice/faultinject"
)

// TestCopyExactlyOnceUnderFailures copies many small files (and, in some
// cases, large files cut into blocks) from a file source to a file sink at
// parallelism 3 with checkpoints every 20 ms and seeded random failures of
// every kind: a reader after N records, a snapshot, a writer after N
// records, between prepare and commit, during commit. Output must equal
// input as a multiset, with each input file's lines in order within every
// output file, and no in-progress file may be left behind.
func TestCopyExactlyOnceUnderFailures(t *testing.T) {
	type tc struct {
		seed    int64
		faults  int
		rolling string
		block   int64
	}
	cases := []tc{
		{seed: 1, faults: 6, rolling: "checkpoint"},
		{seed: 2, faults: 6, rolling: "default"},
		{seed: 3, faults: 6, rolling: "size", block: 4 << 10},
		{seed: 4, faults: 8, rolling: "default", block: 3 << 10},
		{seed: 5, faults: 8, rolling: "checkpoint", block: 5 << 10},
		{seed: 6, faults: 8, rolling: "size"},
	}
	files, lines := 40, 2000
	if testing.Short() {
		cases, files, lines = cases[:3], 20, 1000
	}
	fired := 0
	for _, c := range cases {
		t.Run(fmt.Sprintf("seed=%d/%s/block=%d", c.seed, c.rolling, c.block), func(t *testing.T) {
			in, out := t.TempDir(), t.TempDir()
			want := writeInput(t, in, files, lines)
			const par = 3
			total := int64(len(want))
			plan := faultinject.RandomPlan(c.seed, c.faults, faultinject.Kinds(), par, total/par/2, 10)
			var opts []SinkOption
			switch c.rolling {
			case "checkpoint":
				opts = append(opts, Rolling(OnCheckpointRolling()))
			case "size":
				opts = append(opts, Rolling(DefaultRollingPolicy{PartSize: 8 << 10}))
			}
			jo := jobOpts{parallelism: par, plan: plan, restarts: c.faults + 2, sinkOpts: opts}
			if c.block > 0 {
				jo.srcOpts = append(jo.srcOpts, BlockSize(c.block))
			}
			res, err := runCopy(t, in, out, jo)
			if err != nil {
				t.Fatalf("job: %v (fired %v)", err, plan.Fired())
			}
			checkExactlyOnce(t, want, readOutput(t, out), c.block == 0)
			if h := hiddenFiles(t, out); len(h) > 0 {
				t.Errorf("in-progress files left behind: %v", h)
			}
			fired += len(plan.Fired())
			t.Logf("fired %v, %d restarts, %d checkpoints", plan.Fired(), res.Restarts, res.Checkpoints.Completed)
		})
	}
	t.Logf("%d injected failures fired", fired)
	if !testing.Short() && fired < 10 {
		t.Errorf("only %d injected failures fired, want at least 10", fired)
	}
}
