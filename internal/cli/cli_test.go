package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/sluice-io/sluice/checkpoint"
)

func TestParseFlagsAnywhere(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	from := fs.String("from", "", "")
	pos, err := parseFlags(fs, []string{"a.yaml", "--from", "dir", "b"})
	if err != nil || *from != "dir" || !slices.Equal(pos, []string{"a.yaml", "b"}) {
		t.Errorf("got %v %q %v", pos, *from, err)
	}
}

func TestLoadRestore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := checkpoint.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	for id := int64(1); id <= 2; id++ {
		if _, err := st.Save(ctx, &checkpoint.Snapshot{ID: id, JobName: "j"}); err != nil {
			t.Fatal(err)
		}
	}
	s, _, err := loadRestore(ctx, dir, nil)
	if err != nil || s.ID != 2 {
		t.Fatalf("from the directory: got %v, %v; want checkpoint 2", s, err)
	}
	s, _, err = loadRestore(ctx, filepath.Join(dir, "chk-1"), nil)
	if err != nil || s.ID != 1 {
		t.Fatalf("from chk-1: got %v, %v; want checkpoint 1", s, err)
	}
	if _, _, err := loadRestore(ctx, t.TempDir(), nil); !errors.Is(err, checkpoint.ErrNotFound) {
		t.Errorf("from an empty directory: got %v, want ErrNotFound", err)
	}
}

func TestUnknownCommand(t *testing.T) {
	var out, errb bytes.Buffer
	a := &App{Stdout: &out, Stderr: &errb}
	if code := a.Main([]string{"frobnicate"}); code != ExitUsage || !strings.Contains(errb.String(), `unknown command "frobnicate"`) {
		t.Errorf("got %d %q", code, errb.String())
	}
	if code := a.Main([]string{"run"}); code != ExitUsage {
		t.Errorf("run without a file: got %d, want %d", code, ExitUsage)
	}
}

// TestSignalsStopThenCancel sends both signals at once: the first asks for
// a clean stop, the second cancels. Either way the run ends with exit 0,
// says how to resume, and leaves no goroutine behind.
func TestSignalsStopThenCancel(t *testing.T) {
	defer goleak.VerifyNone(t)
	out := t.TempDir()
	sigs := make(chan os.Signal, 2)
	sigs <- syscall.SIGTERM
	sigs <- syscall.SIGTERM
	var stdout, stderr bytes.Buffer
	term := false
	a := &App{Stdout: &stdout, Stderr: &stderr, Signals: sigs, Terminal: &term,
		Getenv: func(k string) (string, bool) {
			return map[string]string{"OUT": out, "RATE": "1000"}[k], k == "OUT" || k == "RATE"
		}}
	if code := a.Main([]string{"run", "--progress", "off", "../../examples/pipelines/datagen-to-file.yaml"}); code != ExitOK {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	// The directory came from ${OUT}: it is shown as ${OUT}.
	if !strings.Contains(stderr.String(), "resume with: sluice run --from ${OUT}/checkpoints") {
		t.Errorf("no resume hint:\n%s", stderr.String())
	}
}

// TestStopWithSavepointAndResume: with --savepoint-dir the first signal
// stops the job with a savepoint there; the summary names it, and a second
// run resumes from it with --from.
func TestStopWithSavepointAndResume(t *testing.T) {
	defer goleak.VerifyNone(t)
	out, spDir := t.TempDir(), t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		sigs := make(chan os.Signal, 1)
		sigs <- syscall.SIGTERM
		var stdout, stderr bytes.Buffer
		term := false
		a := &App{Stdout: &stdout, Stderr: &stderr, Signals: sigs, Terminal: &term,
			Getenv: func(k string) (string, bool) {
				return map[string]string{"OUT": out, "RATE": "1000"}[k], k == "OUT" || k == "RATE"
			}}
		args = append([]string{"run", "--progress", "off"}, append(args, "../../examples/pipelines/datagen-to-file.yaml")...)
		if code := a.Main(args); code != ExitOK {
			t.Fatalf("exit %d\n%s", code, stderr.String())
		}
		return stderr.String()
	}
	log := run("--savepoint-dir", spDir)
	infos, err := checkpoint.ListDir(t.Context(), spDir)
	if err != nil || len(infos) != 1 || infos[0].Kind != checkpoint.Savepoint {
		t.Fatalf("savepoints in %s: %+v, %v\n%s", spDir, infos, err, log)
	}
	if want := "resume with: sluice run --from " + infos[0].Path; !strings.Contains(log, want) {
		t.Fatalf("summary lacks %q:\n%s", want, log)
	}
	log = run("--from", infos[0].Path)
	if !strings.Contains(log, "stopped cleanly") {
		t.Fatalf("resumed run did not stop cleanly:\n%s", log)
	}
}
