package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/checkpoint"
)

// TestCheckpointsPipelineFlag: `sluice checkpoints --pipeline FILE` lists
// the pipeline's checkpoint.dir (with ${VAR}s of the environment); a DIR
// given as well wins; a pipeline without checkpoint.dir, a bad pipeline
// or two directories are usage errors. (The s3:// case, where the file's
// checkpoint.s3.* settings make the client, is cmd/sluice's
// TestS3CheckpointsPipelineSettings.)
func TestCheckpointsPipelineFlag(t *testing.T) {
	work := t.TempDir()
	ckpt, other := filepath.Join(work, "ckpt"), filepath.Join(work, "other")
	for i, dir := range []string{ckpt, other} {
		st, err := checkpoint.NewLocal(dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Save(context.Background(), &checkpoint.Snapshot{ID: int64(7 + i), JobName: filepath.Base(dir) + "-job"}); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, body string) string {
		p := filepath.Join(work, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	withDir := write("p.yaml", `name: p
checkpoint:
  interval: 1s
  dir: ${CKPT}
source:
  type: datagen
  options: {count: 10}
sink:
  type: print
`)
	noDir := write("nodir.yaml", `name: p
source:
  type: datagen
  options: {count: 10}
sink:
  type: print
`)
	bad := write("bad.yaml", "name: p\nsource: {type: nosuch}\nsink: {type: print}\n")
	env := map[string]string{"CKPT": ckpt}
	runCmd := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		a := &App{Stdout: &out, Stderr: &errb, Getenv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
		code := a.Main(append([]string{"checkpoints"}, args...))
		return code, out.String(), errb.String()
	}
	for _, tc := range []struct {
		args []string
		code int
		want string // in stdout (exit 0) or stderr
	}{
		{[]string{"--pipeline", withDir}, ExitOK, "ckpt-job"},
		{[]string{"--pipeline", withDir, other}, ExitOK, "other-job"},
		{[]string{other, "--pipeline", withDir}, ExitOK, "other-job"},
		{[]string{other}, ExitOK, "other-job"},
		{[]string{"--pipeline", noDir}, ExitUsage, "has no checkpoint.dir"},
		{[]string{"--pipeline", noDir, ckpt}, ExitOK, "ckpt-job"},
		{[]string{"--pipeline", bad}, ExitUsage, "nosuch"},
		{[]string{"--pipeline", filepath.Join(work, "missing.yaml")}, ExitUsage, "missing.yaml"},
		{[]string{ckpt, other}, ExitUsage, "one directory"},
		{nil, ExitUsage, "needs one directory"},
	} {
		code, out, errb := runCmd(tc.args...)
		got := out
		if tc.code != ExitOK {
			got = errb
		}
		if code != tc.code || !strings.Contains(got, tc.want) {
			t.Errorf("checkpoints %q: exit %d, want %d with %q\nstdout: %s\nstderr: %s", tc.args, code, tc.code, tc.want, out, errb)
		}
	}
	// The pipeline's checkpoint.dir came from ${CKPT}: listed, and named
	// as the variable, as in a run's output.
	if _, out, _ := runCmd("--pipeline", withDir); !strings.Contains(out, "${CKPT}") {
		t.Errorf("checkpoints --pipeline: the directory from ${CKPT} is not shown as the variable:\n%s", out)
	}
}
