package cli

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/sluice-io/sluice/internal/pipeline"
	"github.com/sluice-io/sluice/internal/registry"
)

// demoPipeline is examples/pipelines/demo.yaml (a test keeps the two equal).
//
//go:embed demo.yaml
var demoPipeline []byte

func (a *App) cmdDemo(args []string) int {
	var o runOptions
	fs := a.runFlags("demo", "demo [flags]", &o)
	dir := fs.String("dir", "", "working directory for output and checkpoints (default: a new temporary directory)")
	records := fs.Int64("records", 200_000, "records to generate")
	rate := fs.Float64("rate", 100_000, "records per second (0 = unlimited)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return a.exit(usageError{err})
	}
	if len(pos) != 0 || *records < 1 || *rate < 0 {
		fs.Usage()
		return ExitUsage
	}
	if *dir == "" {
		d, err := os.MkdirTemp("", "sluice-demo-")
		if err != nil {
			return a.exit(err)
		}
		*dir = d
	}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		return a.exit(err)
	}
	vars := map[string]string{"DEMO_DIR": abs, "DEMO_RECORDS": strconv.FormatInt(*records, 10), "DEMO_RATE": strconv.FormatFloat(*rate, 'f', -1, 64)}
	lookup := func(k string) (string, bool) {
		if v, ok := vars[k]; ok {
			return v, true
		}
		return a.Getenv(k)
	}
	spec, err := pipeline.Parse("demo.yaml", demoPipeline, a.Registry, lookup)
	if err != nil {
		return a.exit(err)
	}
	out := filepath.Join(abs, "output")
	w := a.Stdout
	fmt.Fprintf(w, "sluice demo: %d records: datagen → filter (even amounts) → map → rename → exactly-once file sink\n", *records)
	fmt.Fprintf(w, "  parallelism %d, a checkpoint every %s in %s\n", spec.Parallelism, spec.CheckpointInterval, spec.CheckpointDir)
	fmt.Fprintf(w, "  the pipeline: examples/pipelines/demo.yaml (sluice run it with DEMO_DIR=%s)\n", abs)
	fmt.Fprintln(w, "  part files become visible only when the checkpoint that prepared them completes; Ctrl-C stops with a final checkpoint")
	res, err := a.runSpec(spec, o)
	if err != nil {
		return a.exit(err)
	}
	a.summarize(spec, res, "examples/pipelines/demo.yaml")
	if code := res.exitCode(); code != ExitOK {
		return code
	}
	rep, err := verifyDemo(out, *records, !res.signalled)
	fmt.Fprintf(w, "\noutput: %s (%d part files, %d records)\n", out, rep.files, rep.records)
	fmt.Fprintf(w, "check it: cat %s/part-* | wc -l   # %d lines\n", out, rep.records)
	fmt.Fprintf(w, "          sluice checkpoints %s\n", spec.CheckpointDir)
	if err != nil {
		fmt.Fprintln(w, "verification FAILED:", err)
		return ExitFailed
	}
	if res.signalled {
		fmt.Fprintf(w, "verified: %d records, none twice, all correct (stopped early; resume with DEMO_DIR=%s sluice run --from %s examples/pipelines/demo.yaml)\n",
			rep.records, abs, spec.CheckpointDir)
		return ExitOK
	}
	fmt.Fprintf(w, "verified: output equals input — all %d even-amount records of %d, each exactly once.\n", rep.records, *records)
	return ExitOK
}

type demoReport struct{ files, records int }

// verifyDemo checks the demo's committed output: every record is the
// transform of datagen record id, none twice and, if complete, every even
// id below n present.
func verifyDemo(dir string, n int64, complete bool) (demoReport, error) {
	var rep demoReport
	files, err := partFiles(dir)
	if err != nil {
		return rep, err
	}
	rep.files = len(files)
	seen := make([]bool, n)
	for _, f := range files {
		if err := func() error {
			fh, err := os.Open(f)
			if err != nil {
				return err
			}
			defer fh.Close()
			sc := bufio.NewScanner(fh)
			for line := 1; sc.Scan(); line++ {
				var r struct {
					ID       *int64 `json:"id"`
					Cents    int64  `json:"cents"`
					Customer string `json:"customer"`
				}
				if err := json.Unmarshal(sc.Bytes(), &r); err != nil || r.ID == nil {
					return fmt.Errorf("%s:%d: not a demo record: %q", f, line, sc.Text())
				}
				id := *r.ID
				want := registry.DatagenValue(id)
				if id < 0 || id >= n || id%2 != 0 || r.Cents != want["amount"].(int64)*100 || r.Customer != want["user"] {
					return fmt.Errorf("%s:%d: wrong record %s", f, line, sc.Text())
				}
				if seen[id] {
					return fmt.Errorf("%s:%d: id %d delivered twice", f, line, id)
				}
				seen[id] = true
				rep.records++
			}
			return sc.Err()
		}(); err != nil {
			return rep, err
		}
	}
	if complete && int64(rep.records) != (n+1)/2 {
		return rep, fmt.Errorf("got %d records, want %d (every even id below %d)", rep.records, (n+1)/2, n)
	}
	return rep, nil
}
