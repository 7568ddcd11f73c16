package pipeline

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/internal/registry"
)

// FuzzLoad feeds arbitrary files to the loader. Whatever the input, it
// must not panic or hang, and it must either return a spec or errors that
// wrap ErrInvalid, each one line at a line of the file, none repeating the
// value of a variable from the environment. Seeds: the example pipelines
// and the files of the other tests. As a normal test (go test) it runs
// over the seeds only.
func FuzzLoad(f *testing.F) {
	files, _ := filepath.Glob("../../examples/pipelines/*.yaml")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	for _, s := range []string{
		good,
		"source: {type: datagen}\nsink: {type: print}\n",
		"source:\n  type: kafka\n  options:\n    brokers: [${BROKERS}]\n    topics: t\nsink:\n  type: print\n",
		"source:\n  type: kafka\n  options:\n    brokers: \"${SECRET},h2:9092\"\n    topics: t\nsink:\n  type: kafka\n  options: {brokers: x, topic: y}\n",
		"parallelism: 100000\ncheckpoint: {retain: 0, timeout: 0s}\nrestart: {attempts: -1, delay: ${SECRET}}\nsource: {type: datagen, options: {splits: 0}}\nsink: {type: print}\n",
		"source: {type: datagen}\ntransforms:\n  - filter: amout > 1\n  - map: '{\"a\": id}'\n  - select: [a]\n  - rename: {a: b}\nsink: {type: file, options: {path: ${SECRET}, file-mode: '0640'}}\n",
		"source: {type: file, options: {paths: [${SECRET}], discovery: 1s}}\nsink: {type: file, options: {path: ${SECRET}}}\n",
		"a: &x [1, *x]\n",
		"source: [\n",
		"",
		"---\n---\n",
		"source: !!binary aGVsbG8=\n",
	} {
		f.Add([]byte(s))
	}
	lookup := env(map[string]string{"SECRET": "hunter2-fuzz-secret", "OUT": "/tmp/fuzz", "BROKERS": "h1:9092,h2:9092"})
	f.Fuzz(func(t *testing.T, data []byte) {
		spec, err := Parse("f.yaml", data, registry.Default(), lookup)
		if err == nil {
			if spec == nil {
				t.Fatal("no spec and no error")
			}
			if spec.Parallelism < 1 || spec.Parallelism > MaxParallelism || spec.CheckpointRetain < 1 {
				t.Fatalf("accepted parallelism %d, retain %d", spec.Parallelism, spec.CheckpointRetain)
			}
			return
		}
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("error does not wrap ErrInvalid: %v", err)
		}
		var es Errors
		if !errors.As(err, &es) || len(es) == 0 {
			t.Fatalf("error is not Errors: %v", err)
		}
		for _, e := range es {
			if e.Line < 1 || strings.Contains(e.Error(), "\n") {
				t.Fatalf("bad error: line %d, %q", e.Line, e.Error())
			}
			if strings.Contains(e.Error(), "hunter2-fuzz-secret") {
				t.Fatalf("error shows a value from the environment: %s", e)
			}
		}
	})
}
