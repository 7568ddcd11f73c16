package main

// Tests of issue 12's checked configuration, secrets and logs through the
// binary.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// shownPath is path as sluice shows it when it was built from the
// variables of env (NAME=value): the values replaced by ${NAME}.
func shownPath(path string, env []string) string {
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if len(v) >= 4 {
			path = strings.ReplaceAll(path, v, "${"+k+"}")
		}
	}
	return path
}

// expandEnv expands the ${NAME}s of s from env (NAME=value), as a shell
// would when the user pastes a path sluice printed.
func expandEnv(s string, env []string) string {
	return os.Expand(s, func(k string) string {
		for _, kv := range env {
			if name, v, _ := strings.Cut(kv, "="); name == k {
				return v
			}
		}
		return ""
	})
}

// writeConfigPipeline writes a pipeline file named name into dir.
func writeConfigPipeline(t *testing.T, dir, name, yaml string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestConfigExitCodes checks docs/cli.md's exit codes: 0 finished, 1 the
// job failed, 2 bad arguments or an invalid pipeline — a missing pipeline
// file included.
func TestConfigExitCodes(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	dir := t.TempDir()
	good := writeConfigPipeline(t, dir, "good.yaml", "source:\n  type: datagen\n  options: {count: 5}\nsink:\n  type: print\n")
	failing := writeConfigPipeline(t, dir, "failing.yaml", "restart: {strategy: none}\nsource:\n  type: datagen\n  options: {count: 5}\n"+
		"transforms:\n  - map: id\nsink:\n  type: print\n")
	invalid := writeConfigPipeline(t, dir, "invalid.yaml", "parallelism: 0\nsource:\n  type: datagen\nsink:\n  type: print\n")
	missing := filepath.Join(dir, "missing.yaml")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"run", "--progress", "off", good}, 0, ""},
		{[]string{"validate", good}, 0, ""},
		{[]string{"run", "--progress", "off", failing}, 1, "map returned int"},
		{[]string{"run", missing}, 2, "missing.yaml: no such file or directory"},
		{[]string{"validate", missing}, 2, "missing.yaml: no such file or directory"},
		{[]string{"run", dir}, 2, "is a directory"},
		{[]string{"run", invalid}, 2, "invalid.yaml:1: parallelism: must be between 1 and 1024, got 0"},
		{[]string{"validate", invalid}, 2, "parallelism: must be between 1 and 1024"},
		{[]string{"run", "--no-such-flag", good}, 2, "flag provided but not defined"},
		{[]string{"run", "--log-format", "xml", good}, 2, `--log-format: want text or json, got "xml"`},
		{[]string{"run"}, 2, "Usage"},
		{[]string{"frobnicate"}, 2, "unknown command"},
	} {
		r := run(t, nil, c.args...)
		if r.code != c.code || !strings.Contains(r.stderr, c.want) {
			t.Errorf("sluice %s: exit %d, want %d with %q; stderr:\n%s", strings.Join(c.args, " "), r.code, c.code, c.want, r.stderr)
		}
	}
}

// TestConfigEveryErrorAtItsLine: one run reports every problem of the
// file, one line each, at the line of the offending key.
func TestConfigEveryErrorAtItsLine(t *testing.T) {
	file := writeConfigPipeline(t, t.TempDir(), "p.yaml", `parallelism: 100000
checkpoint:
  retain: 0
restart:
  attempts: -1
  delay: 0s
source:
  type: datagen
  options:
    splits: 0
transforms:
  - filter: amuont > 10
sink:
  type: print
`)
	r := run(t, nil, "validate", file)
	want := []string{
		file + ":1: parallelism: must be between 1 and 1024, got 100000",
		file + ":3: checkpoint.retain: must be between 1 and 10000, got 0",
		file + ":5: restart.attempts: must be at least 1, got -1",
		file + ":6: restart.delay: must be greater than 0, got 0s",
		file + ":10: source.options.splits: must be between 1 and 65536, got 0",
		file + `:12: transforms[0].filter: no field "amuont" in the records from source datagen (fields: id, amount, user)`,
	}
	var got []string
	for l := range strings.Lines(r.stderr) {
		got = append(got, strings.TrimPrefix(strings.TrimSuffix(l, "\n"), "sluice: "))
	}
	if r.code != 2 || strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("exit %d; got:\n%s\nwant:\n%s", r.code, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestConfigUnquotedVarInList: brokers: [${BROKERS}] is invalid YAML; the
// error says to quote the variable. A comma-separated string is a list.
func TestConfigUnquotedVarInList(t *testing.T) {
	dir := t.TempDir()
	bad := writeConfigPipeline(t, dir, "bad.yaml", "source:\n  type: kafka\n  options:\n    brokers: [${BROKERS}]\n    topics: [t]\nsink:\n  type: print\n")
	r := run(t, []string{"BROKERS=127.0.0.1:1,127.0.0.1:2"}, "validate", bad)
	if r.code != 2 || !strings.Contains(r.stderr, bad+":4: invalid YAML: ") || !strings.Contains(r.stderr, `quote it, as in ["${BROKERS}"]`) {
		t.Errorf("exit %d:\n%s", r.code, r.stderr)
	}
	good := writeConfigPipeline(t, dir, "good.yaml", "source:\n  type: kafka\n  options:\n    brokers: \"${BROKERS}\"\n    topics: [t]\nsink:\n  type: print\n")
	if r := run(t, []string{"BROKERS=127.0.0.1:1,127.0.0.1:2"}, "validate", good); r.code != 0 {
		t.Errorf("quoted: exit %d:\n%s", r.code, r.stderr)
	}
}

// secretsIn returns the names of the secrets found in s.
func secretsIn(s string, secrets map[string]string) []string {
	var found []string
	for name, v := range secrets {
		if strings.Contains(s, v) {
			found = append(found, name)
		}
	}
	return found
}

// TestSecretsNeverShown runs pipelines whose paths and token come from the
// environment and greps everything the process shows for the values:
// stdout, stderr (text and JSON logs, errors, the summary), /status,
// /metrics and every file of the checkpoint directory.
func TestSecretsNeverShown(t *testing.T) {
	t.Parallel() // waits on its own sluice processes; its dirs, topics, tables, buckets and indexes are its own
	defer http.DefaultClient.CloseIdleConnections()
	base := t.TempDir()
	// A failing run: the sink's directory is built from a secret and
	// cannot be created (its parent is a regular file).
	blocker := filepath.Join(base, "blocker-sekrit-path")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{"OUT": blocker, "TOKEN": "tok-0123456789"}
	file := writeConfigPipeline(t, base, "fail.yaml", `checkpoint:
  interval: 20ms
restart:
  attempts: 1
  delay: 10ms
source:
  type: datagen
  options: {count: 100}
sink:
  type: file
  options:
    path: ${OUT}/files
http:
  token: ${TOKEN}
`)
	env := []string{"OUT=" + blocker, "TOKEN=" + secrets["TOKEN"]}
	for _, format := range []string{"text", "json"} {
		r := run(t, env, "run", "--progress", "plain", "--progress-interval", "10ms", "--log-format", format, file)
		if r.code != 1 || !strings.Contains(r.stderr, "mkdir ${OUT}: not a directory") {
			t.Fatalf("%s: exit %d, want 1 and the error with ${OUT} for the path:\n%s", format, r.code, r.stderr)
		}
		if found := secretsIn(r.stdout+r.stderr, secrets); len(found) > 0 {
			t.Errorf("%s: the values of %v appear:\n%s%s", format, found, r.stdout, r.stderr)
		}
	}

	// A running job: scrape /status and /metrics, stop it, and read the
	// checkpoints it wrote.
	secret := filepath.Join(base, "sekrit-dir-42")
	secrets = map[string]string{"OUT": secret, "TOKEN": "tok-0123456789"}
	file = writeConfigPipeline(t, base, "run.yaml", `checkpoint:
  interval: 20ms
  dir: ${OUT}/ckpt
source:
  type: datagen
  options: {count: 1000000, rate: 2000}
transforms:
  - filter: user != "${OUT}"
sink:
  type: file
  options:
    path: ${OUT}/files
http:
  listen: 127.0.0.1:0
  token: ${TOKEN}
`)
	env = []string{"OUT=" + secret, "TOKEN=" + secrets["TOKEN"]}
	p := start(t, env, "run", "--progress", "plain", "--progress-interval", "10ms", file)
	url := p.waitLine(t, httpRE)
	var scraped strings.Builder
	completed := regexp.MustCompile(`"completed":\s*[1-9]`)
	for i := 0; i < 400; i++ { // until a checkpoint completed (a hang guard, not a timing assertion)
		body, _ := tryGetURL(t, url+"/status", secrets["TOKEN"])
		scraped.WriteString(body)
		if completed.MatchString(body) {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	scraped.WriteString(getURL(t, url+"/metrics", secrets["TOKEN"]))
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.wait(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.stderr())
	}
	if !strings.Contains(p.stderr(), "resume with: sluice run --from ${OUT}/ckpt") {
		t.Errorf("the resume hint does not name the directory as ${OUT}/ckpt:\n%s", p.stderr())
	}
	if found := secretsIn(p.stderr()+scraped.String(), secrets); len(found) > 0 {
		t.Errorf("the values of %v appear in stderr or the HTTP responses:\n%s\n%s", found, p.stderr(), scraped.String())
	}
	n := 0
	err := filepath.WalkDir(filepath.Join(secret, "ckpt"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		n++
		if found := secretsIn(string(b), secrets); len(found) > 0 {
			t.Errorf("%s holds the values of %v", path, found)
		}
		return nil
	})
	if err != nil || n < 3 {
		t.Fatalf("read %d checkpoint files: %v", n, err)
	}
}

// TestOutputModes: checkpoint data and committed part files written by
// the binary are private to the user (no group or other bits), whatever
// the umask lets through.
func TestOutputModes(t *testing.T) {
	out := t.TempDir()
	file := writeConfigPipeline(t, out, "p.yaml", `checkpoint:
  interval: 20ms
  dir: `+out+`/ckpt
source:
  type: datagen
  options: {count: 300, rate: 3000}
sink:
  type: file
  options:
    path: `+out+`/out/files
`)
	r := run(t, nil, "run", "--progress", "off", file)
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s", r.code, r.stderr)
	}
	files := 0
	for _, root := range []string{filepath.Join(out, "ckpt"), filepath.Join(out, "out")} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			if fi.Mode().Perm()&0o077 != 0 {
				t.Errorf("%s: mode %#o is open to other users", path, fi.Mode().Perm())
			}
			if !d.IsDir() {
				files++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if files < 4 {
		t.Fatalf("found %d files", files)
	}
	if got := len(readOutput(t, filepath.Join(out, "out", "files"), "id")); got != 300 {
		t.Fatalf("output holds %d ids, want 300", got)
	}
}

// TestLogFormatJSON: with --log-format json every line of stderr is a JSON
// object, and the last one is the summary with the record counts; records
// a source skipped are counted (text summary too).
func TestLogFormatJSON(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in")
	if err := os.MkdirAll(in, 0o700); err != nil {
		t.Fatal(err)
	}
	var lines strings.Builder
	for i := range 50 {
		fmt.Fprintf(&lines, "{\"id\": %d}\n", i)
		if i%10 == 0 {
			lines.WriteString("not json\n")
		}
	}
	if err := os.WriteFile(filepath.Join(in, "a.jsonl"), []byte(lines.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	file := writeConfigPipeline(t, dir, "p.yaml", "source:\n  type: file\n  options:\n    paths: ["+in+"]\n    on-malformed: skip\n"+
		"sink:\n  type: file\n  options:\n    path: "+filepath.Join(dir, "out")+"\n")
	r := run(t, nil, "run", "--log-format", "json", "--progress-interval", "10ms", file)
	if r.code != 0 {
		t.Fatalf("exit %d:\n%s", r.code, r.stderr)
	}
	var last map[string]any
	n := 0
	sc := bufio.NewScanner(strings.NewReader(r.stderr))
	for sc.Scan() {
		n++
		last = nil
		if err := json.Unmarshal(sc.Bytes(), &last); err != nil {
			t.Fatalf("stderr line %d is not JSON: %v: %s", n, err, sc.Text())
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := last[k]; !ok {
				t.Errorf("line %d has no %q: %s", n, k, sc.Text())
			}
		}
	}
	want := map[string]any{"msg": "job ended", "state": "FINISHED", "records_in": 50.0, "records_out": 50.0, "records_skipped": 5.0, "records_dead_lettered": 0.0}
	for k, v := range want {
		if last[k] != v {
			t.Errorf("summary %s = %v, want %v (summary %v)", k, last[k], v, last)
		}
	}
	r = run(t, nil, "run", "--progress", "off", file)
	if want := "records with errors: 5 skipped, 0 dead-lettered"; r.code != 0 || !strings.Contains(r.stderr, want) {
		t.Errorf("text summary: exit %d, want %q:\n%s", r.code, want, r.stderr)
	}
}
