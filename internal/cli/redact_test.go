package cli

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/pipeline"
)

// TestRedactHTTP: a value from the environment in a response's body or
// headers (a path in /status, a label in /metrics) is replaced by its
// ${VAR}; status code and other content are kept.
func TestRedactHTTP(t *testing.T) {
	red := pipeline.NewRedactor([]pipeline.Substitution{{Var: "OUT", Value: "/srv/secret-dir"}, {Var: "TOKEN", Value: "tok-ab", Secret: true}})
	h := redactHTTP(red, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Path", "/srv/secret-dir/ckpt")
		w.Header().Set("Content-Length", "999")
		w.WriteHeader(http.StatusTeapot)
		_, _ = io.WriteString(w, `{"path": "/srv/secret-dir/chk-1", `)
		_, _ = io.WriteString(w, `"label": "dir=\"/srv/secret-dir\"", "token": "tok-ab"}`)
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"path": "${OUT}/chk-1", "label": "dir=\"${OUT}\"", "token": "${TOKEN}"}`
	if resp.StatusCode != http.StatusTeapot || string(b) != want || resp.Header.Get("X-Path") != "${OUT}/ckpt" {
		t.Errorf("got %d %q X-Path %q, want 418 %q", resp.StatusCode, b, resp.Header.Get("X-Path"), want)
	}
	if strings.Contains(string(b), "secret-dir") {
		t.Error("the value is in the body")
	}
	if redactHTTP(nil, h) == nil {
		t.Error("nil redactor")
	}
}

// TestValidateShowsTypedValues: `sluice validate` shows a number from the
// environment as it is (parallelism: ${PAR} → 1000, not ${PAR}), while
// the job name, a text value from the environment, stays ${NAME}.
func TestValidateShowsTypedValues(t *testing.T) {
	file := filepath.Join(t.TempDir(), "p.yaml")
	y := "name: ${NAME}\nparallelism: ${PAR}\nsource:\n  type: datagen\n  options:\n    count: ${COUNT}\nsink:\n  type: print\n"
	if err := os.WriteFile(file, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"NAME": "secret-job-name", "PAR": "1000", "COUNT": "5000"}
	var stdout, stderr bytes.Buffer
	a := &App{Stdout: &stdout, Stderr: &stderr, Getenv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }}
	if code := a.Main([]string{"validate", file}); code != ExitOK {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	out := stdout.String() + stderr.String()
	if !strings.Contains(stdout.String(), `job "${NAME}"`) || !strings.Contains(stdout.String(), "parallelism 1000") || strings.Contains(out, "secret-job-name") {
		t.Errorf("got %q; want the job name as ${NAME} and parallelism 1000", out)
	}
}
