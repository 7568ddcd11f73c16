package cli

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// sourceTaskPipeline is datagen (one split, so one order) → a filter
// and a map that read the values → exactly-once files, at parallelism 1.
const sourceTaskPipeline = `name: source-task
parallelism: 1
source-task: ${MODE}
checkpoint:
  interval: 20ms
  dir: ${OUT}/checkpoints
source:
  type: datagen
  options:
    count: 30000
    splits: 1
    rate: ${RATE}
transforms:
  - filter: amount >= 0
  - map: '{"id": id, "twice": amount * 2}'
sink:
  type: file
  options:
    path: ${OUT}/output
`

// TestSourceTaskOwnExactlyOnceInOrder runs the pipeline with the source in
// a task of its own (source-task: own) and, for comparison, chained: the
// first run is stopped by a signal while records are in flight (a
// savepoint-less stop with a final checkpoint taken through the channel
// between the two tasks), the second resumes from its checkpoints. The
// output must be every record exactly once, in the source's order.
func TestSourceTaskOwnExactlyOnceInOrder(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, mode := range []string{"own", "chained"} {
		t.Run(mode, func(t *testing.T) {
			out := t.TempDir()
			run := func(rate string, stop bool, args ...string) {
				t.Helper()
				sigs := make(chan os.Signal, 1)
				done := make(chan struct{})
				defer close(done)
				if stop {
					go func() {
						select {
						case <-time.After(300 * time.Millisecond):
							sigs <- syscall.SIGTERM
						case <-done:
						}
					}()
				}
				var stdout, stderr bytes.Buffer
				term := false
				vars := map[string]string{"OUT": out, "RATE": rate, "MODE": mode}
				a := &App{Stdout: &stdout, Stderr: &stderr, Signals: sigs, Terminal: &term,
					Getenv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
				file := filepath.Join(out, "p.yaml")
				if err := os.WriteFile(file, []byte(sourceTaskPipeline), 0o644); err != nil {
					t.Fatal(err)
				}
				if code := a.Main(append([]string{"run", "--progress", "off"}, append(args, file)...)); code != ExitOK {
					t.Fatalf("exit %d\n%s", code, stderr.String())
				}
			}
			run("20000", true)
			run("0", false, "--from", filepath.Join(out, "checkpoints"))
			got := readParts(t, filepath.Join(out, "output"))
			if len(got) != 30000 {
				t.Fatalf("got %d records, want 30000", len(got))
			}
			for i, r := range got {
				if r.ID != int64(i) || r.Twice != int64(i)*37%1000*2 {
					t.Fatalf("record %d is %+v, want id %d (order or exactly-once broken)", i, r, i)
				}
			}
		})
	}
}

type idTwice struct {
	ID    int64 `json:"id"`
	Twice int64 `json:"twice"`
}

// readParts reads the committed part files of subtask 0 in the order the
// sink wrote them (by their counter).
func readParts(t *testing.T, dir string) []idTwice {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	type part struct {
		n    int
		name string
	}
	var parts []part
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") || e.IsDir() {
			continue
		}
		base := strings.TrimSuffix(name, filepath.Ext(name))
		n, err := strconv.Atoi(base[strings.LastIndexByte(base, '-')+1:])
		if err != nil {
			t.Fatalf("part file %s: no counter: %v", name, err)
		}
		parts = append(parts, part{n, name})
	}
	slices.SortFunc(parts, func(a, b part) int { return a.n - b.n })
	var out []idTwice
	for _, p := range parts {
		f, err := os.Open(filepath.Join(dir, p.name))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			var r idTwice
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				t.Fatalf("%s: %v", p.name, err)
			}
			out = append(out, r)
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}
