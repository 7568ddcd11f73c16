package file

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluice-io/sluice/checkpoint"
	"github.com/sluice-io/sluice/faultinject"
	"github.com/sluice-io/sluice/restart"
	"github.com/sluice-io/sluice/stream"
	"github.com/sluice-io/sluice/watermark"
)

// killHelperEnv makes the test binary run killHelperJob instead of tests.
const killHelperEnv = "SLUICE_FILEFORMATS_KILL_HELPER"

// killJob writes the text lines under in as records with the bulk format
// named by format into out, with checkpoints in ckpt; slow makes every
// record take a while, so that a checkpoint completes before the end.
func killJob(ctx context.Context, in, out, ckpt, format string, slow bool, restore *checkpoint.Snapshot) error {
	var bulk BulkFormat[map[string]any]
	suffix := "." + format
	switch format {
	case "avro":
		bulk = AvroBulk(eventSchema, AvroBlockSize(2000))
	case "parquet":
		bulk = ParquetBulk(eventSchema, ParquetRowGroupSize(20000))
	default:
		return fmt.Errorf("format %q", format)
	}
	sk, err := NewBulkSink(out, bulk, PartSuffix(suffix), WithBuckets(BasePathBuckets[map[string]any]()))
	if err != nil {
		return err
	}
	opts := []stream.Option{stream.Parallelism(2), stream.CheckpointEvery(20 * time.Millisecond),
		stream.CheckpointDir(ckpt), stream.Restart(restart.None()), stream.Logger(stream.DiscardLogger())}
	if restore != nil {
		opts = append(opts, stream.RestoreFrom(restore))
	}
	env := stream.New(opts...)
	lines := stream.FromSource(env, NewSource(TextLines(), []string{in}, ReadBatchSize(16)), watermark.None[string](), "lines")
	recs := stream.Map(lines, func(l string) map[string]any {
		if slow {
			time.Sleep(200 * time.Microsecond)
		}
		return eventOf(l)
	})
	stream.SinkTo(recs, sk, "out")
	_, err = env.Execute(ctx, "kill-"+format)
	return err
}

// TestBulkFormatsKillHelper is the job that TestBulkFormatsKillRestore
// runs in a child process and kills.
func TestBulkFormatsKillHelper(t *testing.T) {
	if os.Getenv(killHelperEnv) == "" {
		t.Skip("run by TestBulkFormatsKillRestore")
	}
	a := strings.Split(os.Getenv(killHelperEnv), "|")
	if err := killJob(context.Background(), a[0], a[1], a[2], a[3], true, nil); err != nil {
		t.Fatal(err)
	}
}

// TestBulkFormatsKillRestore kills (SIGKILL) a process writing Avro or
// Parquet part files after checkpoints completed, then restores the job
// from the newest checkpoint in its directory and runs it to the end: no
// half-written file is ever visible (every visible file reads completely
// with an independent reader, also right after the kill), no in-progress
// file is left, and the output holds every input line once.
func TestBulkFormatsKillRestore(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		format string
		lines  func(*testing.T, string) []string
	}{{"avro", ocfLines}, {"parquet", parquetLines}} {
		t.Run(c.format, func(t *testing.T) {
			in, out, ckpt := t.TempDir(), t.TempDir(), t.TempDir()
			inputs := writeInput(t, in, 6, 1500)
			cmd := exec.CommandContext(t.Context(), exe, "-test.run=^TestBulkFormatsKillHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), killHelperEnv+"="+strings.Join([]string{in, out, ckpt, c.format}, "|"))
			var stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stderr, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// Wait (bounded) for two completed checkpoints and a visible part
			// file, then kill.
			killed := false
			for range 3000 {
				id, ok, err := checkpoint.LatestCompleted(ckpt)
				if err == nil && ok && id >= 2 && len(finishedFiles(t, out)) > 0 {
					killed = cmd.Process.Kill() == nil
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			waitErr := cmd.Wait()
			if !killed {
				t.Fatalf("the child was not killed mid-run (exit %v): %s", waitErr, stderr.String())
			}
			visible := finishedFiles(t, out)
			for _, f := range visible {
				c.lines(t, filepath.Join(out, f)) // fails the test if the file is not complete
			}
			hidden := hiddenFiles(t, out)
			t.Logf("after the kill: %d visible part files, %d hidden", len(visible), len(hidden))

			snap, info, err := checkpoint.LoadLatest(t.Context(), ckpt)
			if err != nil {
				t.Fatal(err)
			}
			if err := killJob(t.Context(), in, out, ckpt, c.format, false, snap); err != nil {
				t.Fatalf("restored from checkpoint %d: %v", info.ID, err)
			}
			if h := hiddenFiles(t, out); len(h) > 0 {
				t.Errorf("in-progress files left behind: %v", h)
			}
			got := map[string][]string{}
			for _, f := range finishedFiles(t, out) {
				got[f] = c.lines(t, filepath.Join(out, f))
			}
			checkExactlyOnce(t, inputs, got, true)
		})
	}
}

// TestBulkFormatsCompacted writes small Avro and Parquet part files under
// injected failures with compaction by RecordWiseCompactor: the compacted
// files are valid (read by the independent readers) and hold every input
// line once.
func TestBulkFormatsCompacted(t *testing.T) {
	for i, c := range []struct {
		name   string
		bulk   BulkFormat[map[string]any]
		read   Format[map[string]any]
		suffix string
		lines  func(*testing.T, string) []string
	}{
		{"avro", AvroBulk(eventSchema), AvroFile(""), ".avro", ocfLines},
		{"parquet", ParquetBulk(eventSchema), ParquetFile(), ".parquet", parquetLines},
	} {
		t.Run(c.name, func(t *testing.T) {
			in, out := t.TempDir(), t.TempDir()
			inputs := writeInput(t, in, 4, 500)
			sk, err := NewBulkSink(out, c.bulk, PartSuffix(c.suffix), WithBuckets(BasePathBuckets[map[string]any]()),
				Compact(CompactStrategy{SizeThreshold: 1 << 20, CheckpointsBeforeCompaction: 3, Compactor: RecordWiseCompactor(c.read, c.bulk)}))
			if err != nil {
				t.Fatal(err)
			}
			plan := faultinject.RandomPlan(int64(80+i), 4, faultinject.Kinds(), 2, 800, 6)
			env := stream.New(stream.Parallelism(2), stream.CheckpointEvery(10*time.Millisecond),
				stream.Restart(restart.FixedDelay(6, 0)), stream.Logger(stream.DiscardLogger()))
			lines := stream.FromSource(env, faultinject.WrapSource(NewSource(TextLines(), []string{in}, ReadBatchSize(20)), plan), watermark.None[string](), "lines")
			stream.SinkTo(stream.Map(lines, eventOf), faultinject.WrapSink(sk, plan), "out")
			res, err := env.Execute(t.Context(), "compact-"+c.name)
			if err != nil {
				t.Fatalf("job: %v (fired %v)", err, plan.Fired())
			}
			files := finishedFiles(t, out)
			got := map[string][]string{}
			compacted := 0
			for _, f := range files {
				if strings.Contains(f, "-compacted-") {
					compacted++
				}
				got[f] = c.lines(t, filepath.Join(out, f))
			}
			checkExactlyOnce(t, inputs, got, true)
			if compacted == 0 {
				t.Errorf("no compacted file among %v", files)
			}
			t.Logf("%d files (%d compacted), %d checkpoints, fired %v", len(files), compacted, res.Checkpoints.Completed, plan.Fired())
		})
	}
}
